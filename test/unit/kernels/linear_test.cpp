//===- linear_test.cpp - the linear layer's fused ops ---------------------===//
//
// linear (matmul, add of the bias, add of the residual, gelu) for both
// weight layouts, with and without GELU and the kept pre-activation, with a
// residual with and without the bias, matmul_gelu_grad (matmul,
// gelu_grad), matmul_swiglu_grad (matmul, swiglu_grad) and
// linear_weight_grad (matmul, reduce_sum): conformance cases against the
// unfused double references (and CUDA against the CPU); tests against the
// CPU's own unfused kernels, which they must equal exactly in every dtype
// (linear rounds where they do); and the binding errors.

#include "Conformance.h"

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

//===----------------------------------------------------------------------===//
// Conformance cases: the fused kernels against the double reference, and
// CUDA (cuBLASLt's BIAS, GELU_BIAS, GELU_AUX_BIAS, DGELU(_BGRAD) and BGRADA
// epilogues, a residual as its C, the elementwise fallbacks where N is not
// a multiple of 8) against the CPU. Norm metric, as for matmul; fp32 within
// 1e-6 of the reference, 1e-5 between backends (no TF32). Under bf16 and
// f16 the epilogue rounds once where the CPU rounds every step, well within
// tolerance(dtype).
//===----------------------------------------------------------------------===//

/// Shapes of the conformance cases: kCases, one row of one column, K = 0
/// with an aligned N, and GPT-2's MLP at B·T = 256 (fc and proj).
std::vector<LinearCase> conformanceShapes() {
  std::vector<LinearCase> shapes = kCases;
  shapes.push_back({{1}, 1, 8});
  shapes.push_back({{2, 3}, 0, 16});
  return shapes;
}
const LinearCase kGpt2Fc = {{2, 128}, 768, 3072}, kGpt2Proj = {{2, 128}, 3072, 768};

/// The fused kernels' tolerance against the double reference.
double referenceTolerance(DType dtype) { return dtype == DType::F32 ? 1e-6 : tolerance(dtype); }

std::string linearLabel(DType dtype, const LinearCase &c, bool transposeB) {
  return std::string(dtypeName(dtype)) + "_" + shapeLabel(c.rows) + "_k" + std::to_string(c.k) +
         "_n" + std::to_string(c.n) + (transposeB ? "_transpose_b" : "");
}

/// x and w of a case, in w's layout, added to `k` as its first inputs.
void addProductInputs(KernelCall &k, DType dtype, const LinearCase &c, bool transposeB,
                      uint64_t seed) {
  k.input(randomTensor(withLast(c.rows, c.k), seed), dtype);
  k.input(randomTensor(transposeB ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n},
                       seed + 1, 0.3),
          dtype);
}

ConformanceCase linearCase(DType dtype, const LinearCase &c, bool transposeB, const Epilogue &e,
                           uint64_t seed) {
  std::string label = linearLabel(dtype, c, transposeB) + (e.bias ? "_bias" : "") +
                      (e.residual ? "_residual" : "") + (e.gelu ? "_gelu" : "") +
                      (e.keepPre ? "_keep_pre" : "");
  return {"linear", label, [=] {
            KernelCall k;
            addProductInputs(k, dtype, c, transposeB, seed);
            if (e.bias)
              k.input(randomTensor({c.n}, seed + 2), dtype);
            if (e.residual)
              k.input(randomTensor(withLast(c.rows, c.n), seed + 3), dtype);
            k.output(dtype, withLast(c.rows, c.n));
            if (e.keepPre)
              k.output(dtype, withLast(c.rows, c.n));
            k.attrs = linearAttrs(transposeB, e);
            k.reference = [=](const std::vector<RefTensor> &in) {
              const RefTensor *bias = e.bias ? &in[2] : nullptr;
              const RefTensor *residual = e.residual ? &in.back() : nullptr;
              std::vector<RefTensor> out =
                  ref::linear(in[0], in[1], bias, residual, transposeB, e.gelu);
              out.resize(e.keepPre ? 2 : 1);
              return out;
            };
            k.metric = k.cudaMetric = Metric::Norm;
            k.tolerances = {referenceTolerance(dtype)};
            return k;
          }};
}

std::vector<ConformanceCase> linearCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 3100;
  for (DType dtype : kFloatTypes)
    for (bool transposeB : {false, true}) {
      for (const LinearCase &c : conformanceShapes())
        for (const Epilogue &e : kEpilogues)
          cases.push_back(linearCase(dtype, c, transposeB, e, seed += 4));
      cases.push_back(linearCase(dtype, kGpt2Fc, transposeB, {true, false, true, true}, seed += 4));
      cases.push_back(
          linearCase(dtype, kGpt2Proj, transposeB, {true, true, false, false}, seed += 4));
      cases.push_back(
          linearCase(dtype, kGpt2Proj, transposeB, {false, true, false, false}, seed += 4));
    }
  return cases;
}

/// linear_weight_grad: x [..., K] and dy [..., N] with as many rows (of any
/// leading shape); BGRADA sums dy's rows in fp32 on the GPU, the CPU in
/// double.
std::vector<ConformanceCase> linearWeightGradCases() {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 7, 16}, {3, 7, 33}},     {{21, 16}, {3, 7, 33}},    {{21, 16}, {3, 7, 64}},
      {{4, 64, 128}, {4, 64, 512}}, {{2, 1, 8}, {2, 1, 1031}}, {{2, 3, 0}, {2, 3, 5}},
      {{2, 3, 0}, {2, 3, 16}},      {{1, 8}, {1, 8}},          {{2, 128, 3072}, {2, 128, 768}},
  };
  std::vector<ConformanceCase> cases;
  uint64_t seed = 3400;
  for (DType dtype : kFloatTypes)
    for (const auto &[xShape, dyShape] : shapes) {
      std::string label =
          std::string(dtypeName(dtype)) + "_x" + shapeLabel(xShape) + "_dy" + shapeLabel(dyShape);
      cases.push_back({"linear_weight_grad", label, [=, caseSeed = seed += 2] {
                         KernelCall k;
                         k.input(randomTensor(xShape, caseSeed), dtype);
                         k.input(randomTensor(dyShape, caseSeed + 1), dtype);
                         k.output(dtype, {xShape.back(), dyShape.back()});
                         k.output(dtype, {dyShape.back()});
                         k.reference = [](const std::vector<RefTensor> &in) {
                           return ref::linearWeightGrad(in[0], in[1]);
                         };
                         k.metric = k.cudaMetric = Metric::Norm;
                         k.tolerances = {referenceTolerance(dtype)};
                         return k;
                       }});
    }
  return cases;
}

/// matmul_gelu_grad (with and without its bias gradient; GELU's input over
/// the curve's bend, where its derivative varies) and matmul_swiglu_grad,
/// on the conformance shapes, 1024 rows of 40 (reduce_sum's row chunks)
/// and GPT-2's fc.
std::vector<ConformanceCase> matmulActivationGradCases() {
  std::vector<LinearCase> shapes = conformanceShapes();
  shapes.push_back({{8, 128}, 16, 40});
  std::vector<ConformanceCase> cases;
  uint64_t seed = 3600;
  auto add = [&](DType dtype, const LinearCase &c, bool transposeB) {
    std::vector<int64_t> shape = withLast(c.rows, c.n);
    for (bool biasGrad : {false, true})
      cases.push_back(
          {"matmul_gelu_grad", linearLabel(dtype, c, transposeB) + (biasGrad ? "_bias_grad" : ""),
           [=, caseSeed = seed += 3] {
             KernelCall k;
             addProductInputs(k, dtype, c, transposeB, caseSeed);
             k.input(randomTensor(shape, caseSeed + 2, 3.0), dtype); // pre
             k.output(dtype, shape);
             if (biasGrad)
               k.output(dtype, {c.n});
             k.attrs = attrs({}, {{"transpose_b", transposeB}, {"bias_grad", biasGrad}});
             k.reference = [=](const std::vector<RefTensor> &in) {
               RefTensor dy = ref::geluGrad(in[2], ref::matmul(in[0], in[1], false, transposeB));
               std::vector<RefTensor> out = {dy};
               if (biasGrad)
                 out.push_back(ref::reduceSum(dy, {c.n}));
               return out;
             };
             k.metric = k.cudaMetric = Metric::Norm;
             k.tolerances = {referenceTolerance(dtype)};
             return k;
           }});
    cases.push_back(
        {"matmul_swiglu_grad", linearLabel(dtype, c, transposeB), [=, caseSeed = seed += 4] {
           KernelCall k;
           addProductInputs(k, dtype, c, transposeB, caseSeed);
           k.input(randomTensor(shape, caseSeed + 2, 3.0), dtype); // gate
           k.input(randomTensor(shape, caseSeed + 3), dtype);      // up
           k.output(dtype, shape);
           k.output(dtype, shape);
           k.attrs = attrs({}, {{"transpose_b", transposeB}});
           k.reference = [=](const std::vector<RefTensor> &in) {
             return ref::swigluGrad(in[2], in[3], ref::matmul(in[0], in[1], false, transposeB));
           };
           k.metric = k.cudaMetric = Metric::Norm;
           k.tolerances = {referenceTolerance(dtype)};
           return k;
         }});
  };
  for (DType dtype : kFloatTypes) {
    for (bool transposeB : {false, true})
      for (const LinearCase &c : shapes) add(dtype, c, transposeB);
    add(dtype, kGpt2Fc, true);
  }
  return cases;
}

LLMC_CONFORMANCE_CASES(Linear, linearCases);
LLMC_CONFORMANCE_CASES(LinearWeightGrad, linearWeightGradCases);
LLMC_CONFORMANCE_CASES(MatmulActivationGrad, matmulActivationGradCases);

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

TEST(LinearWeightGradKernel, EqualsMatmulReduceSumExactly) {
  uint64_t seed = 3400;
  for (DType dtype : kFloatTypes)
    for (const WeightGradCase &c : kWeightGradCases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " x " + shapeString(c.xShape) + " dy " +
                   shapeString(c.dyShape));
      const int64_t k = c.xShape.back(), n = c.dyShape.back();
      RefTensor x = roundTo(randomTensor(c.xShape, ++seed), dtype);
      RefTensor dy = roundTo(randomTensor(c.dyShape, ++seed), dtype);
      Buffer xb = Buffer::of(x, dtype), dyb = Buffer::of(dy, dtype), dw(dtype, {k, n}),
             db(dtype, {n});
      dw.poison(), db.poison();
      ASSERT_TRUE(runKernel("linear_weight_grad", {&xb, &dyb}, {&dw, &db}));
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

TEST(MatmulGeluGradKernel, EqualsMatmulGeluGradReduceSumExactly) {
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
          // The unfused kernels on the same bytes: equal, not just close.
          Buffer product(dtype, shape), unfused(dtype, shape), unfusedDb(dtype, {c.n});
          ASSERT_TRUE(runKernel("matmul", {&x, &w}, {&product}, layout));
          ASSERT_TRUE(runKernel("gelu_grad", {&preb, &product}, {&unfused}));
          EXPECT_EQ(y.toRef().data, unfused.toRef().data);
          if (biasGrad) {
            ASSERT_TRUE(runKernel("reduce_sum", {&unfused}, {&unfusedDb}));
            EXPECT_EQ(db.toRef().data, unfusedDb.toRef().data);
          }
        }
}

TEST(MatmulSwigluGradKernel, EqualsMatmulSwigluGradExactly) {
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
