//===- linear_test.cpp - the linear layer's fused ops ---------------------===//
//
// The fused kernels against the unfused references: linear (matmul, add of
// the bias, add of the residual, gelu) for both weight layouts, with and
// without GELU and the kept pre-activation, with a residual with and
// without the bias, matmul_gelu_grad (matmul, gelu_grad),
// matmul_swiglu_grad (matmul, swiglu_grad) and
// linear_weight_grad (matmul, reduce_sum); against
// the CPU's own unfused kernels, which they must equal exactly in every
// dtype (linear rounds where they do); and the binding errors.

#include "KernelTest.h"

namespace llmc::test {
namespace {

struct LinearCase {
  std::vector<int64_t> rows; // x's leading dims
  int64_t k, n;
};

// Odd sizes (a vocabulary of 50257, rows no tile divides) beside GPT-2's;
// two and three rows: a decode step's product (DecodeGemv.h with
// transpose_b; matmul's one-row GEMV without it is not sgemm's sums).
const std::vector<LinearCase> kCases = {
    {{3, 7}, 16, 33},    {{2, 5}, 24, 64}, {{13}, 8, 1031}, {{4, 64}, 128, 512},
    {{3, 5}, 24, 50257}, {{2, 3}, 0, 5},   {{2}, 100, 33},  {{1, 3}, 64, 17},
};

/// What follows the product: bias (+ gelu, + keep_pre), bias + residual,
/// or the residual alone.
struct Epilogue {
  bool bias, residual, gelu, keepPre;
};
const std::vector<Epilogue> kEpilogues = {
    {true, false, false, false}, {true, false, true, false}, {true, false, true, true},
    {true, true, false, false},  {false, true, false, false},
};

std::vector<int64_t> withLast(std::vector<int64_t> shape, int64_t last) {
  shape.push_back(last);
  return shape;
}

std::string describe(DType dtype, const LinearCase &c, bool transposeB, const Epilogue &e) {
  return std::string(dtypeName(dtype)) + " rows " + shapeString(c.rows) + " k" +
         std::to_string(c.k) + " n" + std::to_string(c.n) + (transposeB ? " transpose_b" : "") +
         (e.bias ? " bias" : "") + (e.residual ? " residual" : "") + (e.gelu ? " gelu" : "") +
         (e.keepPre ? " keep_pre" : "");
}

/// Calls `fn(dtype, case, transposeB, epilogue)` for every variant.
template <typename Fn> void forEachVariant(Fn fn) {
  for (DType dtype : kFloatTypes)
    for (const LinearCase &c : kCases)
      for (bool transposeB : {false, true})
        for (const Epilogue &e : kEpilogues) {
          SCOPED_TRACE(describe(dtype, c, transposeB, e));
          fn(dtype, c, transposeB, e);
        }
}

KernelAttrs linearAttrs(bool transposeB, const Epilogue &e) {
  return attrs({}, {{"transpose_b", transposeB}, {"gelu", e.gelu}, {"keep_pre", e.keepPre}});
}

/// The operands of one variant: x, w, bias and residual (the last two
/// empty where the epilogue has none).
struct Operands {
  RefTensor x, w, bias, residual;
};
Operands randomOperands(DType dtype, const LinearCase &c, bool transposeB, const Epilogue &e,
                        uint64_t &seed) {
  Operands o;
  o.x = roundTo(randomTensor(withLast(c.rows, c.k), ++seed), dtype);
  o.w = roundTo(randomTensor(transposeB ? std::vector<int64_t>{c.n, c.k}
                                        : std::vector<int64_t>{c.k, c.n},
                             ++seed, 0.3),
                dtype);
  if (e.bias) o.bias = roundTo(randomTensor({c.n}, ++seed), dtype);
  if (e.residual) o.residual = roundTo(randomTensor(withLast(c.rows, c.n), ++seed), dtype);
  return o;
}

/// Runs the fused kernel on `o` into y (and pre under keep_pre).
void runLinear(DType dtype, bool transposeB, const Epilogue &e, const Operands &o, Buffer &y,
               Buffer &pre) {
  std::vector<Buffer> operands = {Buffer::of(o.x, dtype), Buffer::of(o.w, dtype)};
  if (e.bias) operands.push_back(Buffer::of(o.bias, dtype));
  if (e.residual) operands.push_back(Buffer::of(o.residual, dtype));
  std::vector<Buffer *> inputs;
  for (Buffer &b : operands) inputs.push_back(&b);
  y.poison(), pre.poison();
  std::vector<Buffer *> outputs = {&y};
  if (e.keepPre) outputs.push_back(&pre);
  ASSERT_TRUE(runKernel("linear", inputs, outputs, linearAttrs(transposeB, e)));
}

TEST(LinearKernel, MatchesTheUnfusedReference) {
  uint64_t seed = 3100;
  forEachVariant([&](DType dtype, const LinearCase &c, bool transposeB, const Epilogue &e) {
    Operands o = randomOperands(dtype, c, transposeB, e, seed);
    std::vector<RefTensor> expected = ref::linear(o.x, o.w, e.bias ? &o.bias : nullptr,
                                                  e.residual ? &o.residual : nullptr, transposeB,
                                                  e.gelu);
    Buffer y(dtype, withLast(c.rows, c.n)), pre(dtype, withLast(c.rows, c.n));
    runLinear(dtype, transposeB, e, o, y, pre);
    // fp32: within 1e-6 of the double reference, relative to the output's norm.
    const double tol = dtype == DType::F32 ? 1e-6 : tolerance(dtype);
    EXPECT_CLOSE(y.toRef(), expected[0], Metric::Norm, tol);
    if (e.keepPre) {
      EXPECT_CLOSE(pre.toRef(), expected[1], Metric::Norm, tol);
    }
  });
}

TEST(LinearKernel, EqualsMatmulAddGeluExactly) {
  uint64_t seed = 3200;
  forEachVariant([&](DType dtype, const LinearCase &c, bool transposeB, const Epilogue &e) {
    Operands o = randomOperands(dtype, c, transposeB, e, seed);
    std::vector<int64_t> yShape = withLast(c.rows, c.n);
    Buffer x = Buffer::of(o.x, dtype), w = Buffer::of(o.w, dtype), product(dtype, yShape);
    ASSERT_TRUE(runKernel("matmul", {&x, &w}, {&product}, attrs({}, {{"transpose_b", transposeB}})));
    // The unfused ops in turn, each storing its result.
    Buffer unfused = product, pre = product;
    if (e.bias) {
      Buffer bias = Buffer::of(o.bias, dtype), biased(dtype, yShape);
      ASSERT_TRUE(runKernel("add", {&unfused, &bias}, {&biased}));
      unfused = pre = biased;
    }
    if (e.residual) {
      Buffer residual = Buffer::of(o.residual, dtype), sum(dtype, yShape);
      ASSERT_TRUE(runKernel("add", {&unfused, &residual}, {&sum}));
      unfused = sum;
    }
    if (e.gelu) {
      Buffer activated(dtype, yShape);
      ASSERT_TRUE(runKernel("gelu", {&unfused}, {&activated}));
      unfused = activated;
    }

    Buffer y(dtype, yShape), fusedPre(dtype, yShape);
    runLinear(dtype, transposeB, e, o, y, fusedPre);
    EXPECT_EQ(y.toRef().data, unfused.toRef().data);
    if (e.keepPre) {
      EXPECT_EQ(fusedPre.toRef().data, pre.toRef().data);
    }
  });
}

TEST(LinearKernel, BindingErrorsNameTheOperand) {
  TensorView x = typeOnly(DType::F32, {4, 8, 16}), w = typeOnly(DType::F32, {16, 32}),
             bias = typeOnly(DType::F32, {32}), y = typeOnly(DType::F32, {4, 8, 32});
  KernelAttrs gelu = attrs({}, {{"gelu", 1}, {"keep_pre", 1}});
  EXPECT_EQ(bindError("linear", {x, w, bias}, {y}), "");
  EXPECT_EQ(bindError("linear", {x, w, bias}, {y, y}, gelu), "");
  EXPECT_NE(bindError("linear", {x, typeOnly(DType::F32, {15, 32}), bias}, {y})
                .find("does not match x"),
            std::string::npos);
  EXPECT_NE(bindError("linear", {x, w, typeOnly(DType::F32, {16})}, {typeOnly(DType::F32, {4, 8, 16})},
                      attrs({}, {{"transpose_b", 1}}))
                .find("(w is [N, K] with transpose_b)"),
            std::string::npos);
  EXPECT_NE(bindError("linear", {x, w, typeOnly(DType::F32, {16})}, {y}).find("bias"),
            std::string::npos);
  EXPECT_NE(bindError("linear", {x, w, typeOnly(DType::BF16, {32})}, {y}).find("bias"),
            std::string::npos);
  EXPECT_NE(bindError("linear", {x, w, bias}, {y, typeOnly(DType::F32, {4, 8, 16})}, gelu)
                .find("pre"),
            std::string::npos);
  EXPECT_NE(bindError("linear", {x, w, bias}, {y, y}, attrs({}, {{"keep_pre", 1}}))
                .find("keep_pre needs gelu"),
            std::string::npos);
  EXPECT_NE(bindError("linear", {typeOnly(DType::F32, {16}), w, bias}, {typeOnly(DType::F32, {32})})
                .find("rank >= 2"),
            std::string::npos);
  // A residual has y's shape and type; it takes no GELU.
  EXPECT_EQ(bindError("linear", {x, w, y}, {y}), "");
  EXPECT_EQ(bindError("linear", {x, w, bias, y}, {y}), "");
  EXPECT_NE(bindError("linear", {x, w, bias, typeOnly(DType::F32, {4, 32})}, {y}).find("residual"),
            std::string::npos);
  EXPECT_NE(bindError("linear", {x, w, typeOnly(DType::BF16, {4, 8, 32})}, {y}).find("residual"),
            std::string::npos);
  EXPECT_NE(bindError("linear", {x, w, bias, y}, {y}, attrs({}, {{"gelu", 1}}))
                .find("gelu needs a bias and takes no residual"),
            std::string::npos);
  EXPECT_NE(bindError("linear", {x, w}, {y}).find("expected 3 to 4 inputs"), std::string::npos);
}

struct WeightGradCase {
  std::vector<int64_t> xShape, dyShape; // [..., K] and [..., N], as many rows
};

const std::vector<WeightGradCase> kWeightGradCases = {
    {{3, 7, 16}, {3, 7, 33}}, {{21, 16}, {3, 7, 33}}, {{4, 64, 128}, {4, 64, 512}},
    {{2, 1, 8}, {2, 1, 1031}}, {{2, 3, 0}, {2, 3, 5}},
};

TEST(LinearWeightGradKernel, MatchesTheReferenceAndEqualsMatmulReduceSum) {
  uint64_t seed = 3400;
  for (DType dtype : kFloatTypes)
    for (const WeightGradCase &c : kWeightGradCases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " x " + shapeString(c.xShape) + " dy " +
                   shapeString(c.dyShape));
      const int64_t k = c.xShape.back(), n = c.dyShape.back();
      RefTensor x = roundTo(randomTensor(c.xShape, ++seed), dtype);
      RefTensor dy = roundTo(randomTensor(c.dyShape, ++seed), dtype);
      std::vector<RefTensor> expected = ref::linearWeightGrad(x, dy);
      Buffer xb = Buffer::of(x, dtype), dyb = Buffer::of(dy, dtype), dw(dtype, {k, n}),
             db(dtype, {n});
      dw.poison(), db.poison();
      ASSERT_TRUE(runKernel("linear_weight_grad", {&xb, &dyb}, {&dw, &db}));
      const double tol = dtype == DType::F32 ? 1e-6 : tolerance(dtype);
      EXPECT_CLOSE(dw.toRef(), expected[0], Metric::Norm, tol);
      EXPECT_CLOSE(db.toRef(), expected[1], Metric::Norm, tol);

      // The unfused kernels on the same bytes: equal, not just close.
      const int64_t rows = dy.numel() / n;
      Buffer xRows = xb, dyRows = dyb, unfusedDw(dtype, {k, n}), unfusedDb(dtype, {n});
      xRows.shape = {rows, k};
      dyRows.shape = {rows, n};
      ASSERT_TRUE(runKernel("matmul", {&xRows, &dyRows}, {&unfusedDw},
                            attrs({}, {{"transpose_a", 1}})));
      ASSERT_TRUE(runKernel("reduce_sum", {&dyb}, {&unfusedDb}));
      EXPECT_EQ(dw.toRef().data, unfusedDw.toRef().data);
      EXPECT_EQ(db.toRef().data, unfusedDb.toRef().data);
    }
}

TEST(LinearWeightGradKernel, BindingErrorsNameTheOperand) {
  TensorView x = typeOnly(DType::F32, {4, 8, 16}), dy = typeOnly(DType::F32, {32, 24}),
             dw = typeOnly(DType::F32, {16, 24}), db = typeOnly(DType::F32, {24});
  EXPECT_EQ(bindError("linear_weight_grad", {x, dy}, {dw, db}), "");
  EXPECT_NE(bindError("linear_weight_grad", {x, typeOnly(DType::F32, {31, 24})}, {dw, db})
                .find("as many rows"),
            std::string::npos);
  EXPECT_NE(bindError("linear_weight_grad", {x, dy}, {typeOnly(DType::F32, {24, 16}), db})
                .find("dw"),
            std::string::npos);
  EXPECT_NE(bindError("linear_weight_grad", {x, dy}, {dw, typeOnly(DType::F32, {16})}).find("db"),
            std::string::npos);
  EXPECT_NE(bindError("linear_weight_grad", {x, typeOnly(DType::BF16, {32, 24})}, {dw, db})
                .find("dy"),
            std::string::npos);
  EXPECT_NE(bindError("linear_weight_grad", {typeOnly(DType::F32, {16}), dy}, {dw, db})
                .find("rank >= 2"),
            std::string::npos);
}

TEST(MatmulGeluGradKernel, MatchesTheReferenceAndEqualsMatmulGeluGradReduceSum) {
  // Beside kCases: 1024 rows of 40, which reduce_sum sums in 4 row chunks.
  std::vector<LinearCase> cases = kCases;
  cases.push_back({{8, 128}, 16, 40});
  uint64_t seed = 3600;
  for (DType dtype : kFloatTypes)
    for (const LinearCase &c : cases)
      for (bool transposeB : {false, true})
        for (bool biasGrad : {false, true}) {
          SCOPED_TRACE(describe(dtype, c, transposeB, {false, false, false, false}) +
                       (biasGrad ? " bias_grad" : ""));
          Operands o = randomOperands(dtype, c, transposeB, {false, false, false, false}, seed);
          std::vector<int64_t> shape = withLast(c.rows, c.n);
          // GELU's input over the curve's bend, where its derivative varies.
          RefTensor pre = roundTo(randomTensor(shape, ++seed, 3.0), dtype);
          Buffer x = Buffer::of(o.x, dtype), w = Buffer::of(o.w, dtype),
                 preb = Buffer::of(pre, dtype), y(dtype, shape), db(dtype, {c.n});
          y.poison(), db.poison();
          KernelAttrs layout = attrs({}, {{"transpose_b", transposeB}});
          KernelAttrs fused = attrs({}, {{"transpose_b", transposeB}, {"bias_grad", biasGrad}});
          std::vector<Buffer *> outputs = {&y};
          if (biasGrad) outputs.push_back(&db);
          ASSERT_TRUE(runKernel("matmul_gelu_grad", {&x, &w, &preb}, outputs, fused));
          const double tol = dtype == DType::F32 ? 1e-6 : tolerance(dtype);
          RefTensor expected = ref::geluGrad(pre, ref::matmul(o.x, o.w, false, transposeB));
          EXPECT_CLOSE(y.toRef(), expected, Metric::Norm, tol);

          // The unfused kernels on the same bytes: equal, not just close.
          Buffer product(dtype, shape), unfused(dtype, shape), unfusedDb(dtype, {c.n});
          ASSERT_TRUE(runKernel("matmul", {&x, &w}, {&product}, layout));
          ASSERT_TRUE(runKernel("gelu_grad", {&preb, &product}, {&unfused}));
          EXPECT_EQ(y.toRef().data, unfused.toRef().data);
          if (biasGrad) {
            ASSERT_TRUE(runKernel("reduce_sum", {&unfused}, {&unfusedDb}));
            EXPECT_EQ(db.toRef().data, unfusedDb.toRef().data);
            EXPECT_CLOSE(db.toRef(), ref::reduceSum(expected, {c.n}), Metric::Norm, tol);
          }
        }
}

TEST(MatmulSwigluGradKernel, MatchesTheReferenceAndEqualsMatmulSwigluGrad) {
  uint64_t seed = 3800;
  for (DType dtype : kFloatTypes)
    for (const LinearCase &c : kCases)
      for (bool transposeB : {false, true}) {
        SCOPED_TRACE(describe(dtype, c, transposeB, {false, false, false, false}));
        Operands o = randomOperands(dtype, c, transposeB, {false, false, false, false}, seed);
        std::vector<int64_t> shape = withLast(c.rows, c.n);
        RefTensor gate = roundTo(randomTensor(shape, ++seed, 3.0), dtype);
        RefTensor up = roundTo(randomTensor(shape, ++seed), dtype);
        Buffer x = Buffer::of(o.x, dtype), w = Buffer::of(o.w, dtype),
               gateb = Buffer::of(gate, dtype), upb = Buffer::of(up, dtype), dgate(dtype, shape),
               dup(dtype, shape);
        dgate.poison(), dup.poison();
        KernelAttrs layout = attrs({}, {{"transpose_b", transposeB}});
        ASSERT_TRUE(
            runKernel("matmul_swiglu_grad", {&x, &w, &gateb, &upb}, {&dgate, &dup}, layout));
        std::vector<RefTensor> expected =
            ref::swigluGrad(gate, up, ref::matmul(o.x, o.w, false, transposeB));
        const double tol = dtype == DType::F32 ? 1e-6 : tolerance(dtype);
        EXPECT_CLOSE(dgate.toRef(), expected[0], Metric::Norm, tol);
        EXPECT_CLOSE(dup.toRef(), expected[1], Metric::Norm, tol);

        // The unfused kernels on the same bytes: equal, not just close.
        Buffer product(dtype, shape), unfusedGate(dtype, shape), unfusedUp(dtype, shape);
        ASSERT_TRUE(runKernel("matmul", {&x, &w}, {&product}, layout));
        ASSERT_TRUE(runKernel("swiglu_grad", {&gateb, &upb, &product}, {&unfusedGate, &unfusedUp}));
        EXPECT_EQ(dgate.toRef().data, unfusedGate.toRef().data);
        EXPECT_EQ(dup.toRef().data, unfusedUp.toRef().data);
      }
}

TEST(MatmulSwigluGradKernel, BindingErrorsNameTheOperand) {
  TensorView x = typeOnly(DType::F32, {4, 8, 16}), w = typeOnly(DType::F32, {16, 32}),
             g = typeOnly(DType::F32, {4, 8, 32});
  EXPECT_EQ(bindError("matmul_swiglu_grad", {x, w, g, g}, {g, g}), "");
  EXPECT_NE(bindError("matmul_swiglu_grad", {x, w, g, typeOnly(DType::F32, {4, 8, 16})}, {g, g})
                .find("up"),
            std::string::npos);
  EXPECT_NE(bindError("matmul_swiglu_grad", {x, w, g, g}, {g, typeOnly(DType::BF16, {4, 8, 32})})
                .find("dup"),
            std::string::npos);
  EXPECT_NE(bindError("matmul_swiglu_grad", {x, w, g, g}, {g}).find("matmul_swiglu_grad"),
            std::string::npos);
}

TEST(MatmulGeluGradKernel, BindingErrorsNameTheOperand) {
  TensorView x = typeOnly(DType::F32, {4, 8, 16}), w = typeOnly(DType::F32, {16, 32}),
             pre = typeOnly(DType::F32, {4, 8, 32}), y = typeOnly(DType::F32, {4, 8, 32});
  EXPECT_EQ(bindError("matmul_gelu_grad", {x, w, pre}, {y}), "");
  EXPECT_NE(bindError("matmul_gelu_grad", {x, w, typeOnly(DType::F32, {4, 8, 16})}, {y})
                .find("pre"),
            std::string::npos);
  EXPECT_NE(bindError("matmul_gelu_grad", {x, w, pre}, {typeOnly(DType::BF16, {4, 8, 32})})
                .find("y"),
            std::string::npos);
  EXPECT_NE(bindError("matmul_gelu_grad", {x, w, pre}, {y}, attrs({}, {{"transpose_b", 1}}))
                .find("w is [N, K] with transpose_b"),
            std::string::npos);
  EXPECT_NE(bindError("matmul_gelu_grad", {x, w}, {y}).find("matmul_gelu_grad"),
            std::string::npos);
  KernelAttrs biasGrad = attrs({}, {{"bias_grad", 1}});
  EXPECT_EQ(bindError("matmul_gelu_grad", {x, w, pre}, {y, typeOnly(DType::F32, {32})}, biasGrad),
            "");
  EXPECT_NE(bindError("matmul_gelu_grad", {x, w, pre}, {y, typeOnly(DType::F32, {16})}, biasGrad)
                .find("db"),
            std::string::npos);
  EXPECT_NE(bindError("matmul_gelu_grad", {x, w, pre}, {y}, biasGrad).find("matmul_gelu_grad"),
            std::string::npos);
}

} // namespace
} // namespace llmc::test
