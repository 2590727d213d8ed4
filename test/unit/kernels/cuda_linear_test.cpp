//===- cuda_linear_test.cpp - the fused linear GEMMs against the CPU ------===//
//
// cuBLASLt's BIAS, GELU_BIAS and GELU_AUX_BIAS epilogues, a residual as
// its C, and the elementwise fallback where N is not a multiple of 8 (no
// aux epilogue), against the CPU kernel; matmul_gelu_grad's DGELU
// epilogue (and its fallback) and matmul_swiglu_grad's GEMM and pass
// likewise; linear_weight_grad's BGRADA
// epilogue against the CPU's matmul and reduce_sum. Norm metric, as for
// matmul; f32 runs without TF32. Under bf16 and f16 the epilogue rounds
// once where the CPU rounds the product, the biased value, the sum with
// the residual and the GELU, well within tolerance(dtype).

#include "CudaConformance.h"

namespace llmc::test {
namespace {

struct Case {
  std::vector<int64_t> rows; // x's leading dims
  int64_t k, n;
};

const std::vector<Case> kCases = {
    {{1}, 1, 8},      {{3, 7}, 16, 33},  {{2, 5}, 24, 64},      {{13}, 8, 1031},
    {{4, 64}, 128, 512}, {{2, 3}, 0, 16}, {{2, 128}, 768, 3072},
};

std::vector<int64_t> withLast(std::vector<int64_t> shape, int64_t last) {
  shape.push_back(last);
  return shape;
}

/// A case's x, w (in its layout) and bias, random, in `dtype`.
struct LinearOperands {
  Buffer x, w, bias;
  LinearOperands(const Case &c, bool transposeB, DType dtype, uint64_t &seed)
      : x(Buffer::of(randomTensor(withLast(c.rows, c.k), ++seed), dtype)),
        w(Buffer::of(randomTensor(transposeB ? std::vector<int64_t>{c.n, c.k}
                                             : std::vector<int64_t>{c.k, c.n},
                                  ++seed, 0.3),
                     dtype)),
        bias(Buffer::of(randomTensor({c.n}, ++seed), dtype)) {}
};

/// The trace line naming a case.
std::string caseName(DType dtype, const Case &c, bool transposeB) {
  return std::string(dtypeName(dtype)) + " rows " + shapeString(c.rows) + " k" +
         std::to_string(c.k) + " n" + std::to_string(c.n) + (transposeB ? " transpose_b" : "");
}

TEST(CudaLinear, MatchesCpuForEveryEpilogue) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 3300;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kCases)
      for (bool transposeB : {false, true})
        for (int act = 0; act < 3; ++act) { // none, gelu, gelu + keep_pre
          const bool gelu = act > 0, keepPre = act == 2;
          SCOPED_TRACE(caseName(dtype, c, transposeB) + (gelu ? " gelu" : "") +
                       (keepPre ? " keep_pre" : ""));
          LinearOperands o(c, transposeB, dtype, seed);
          Buffer y(dtype, withLast(c.rows, c.n)), pre(dtype, withLast(c.rows, c.n));
          std::vector<Buffer *> outputs = {&y};
          if (keepPre) outputs.push_back(&pre);
          expectCudaMatchesCpu(
              "linear", {&o.x, &o.w, &o.bias}, outputs,
              attrs({}, {{"transpose_b", transposeB}, {"gelu", gelu}, {"keep_pre", keepPre}}),
              {Metric::Norm, {tolerance(dtype)}});
        }
}

// The residual as cuBLASLt's C (beta = 1, y is D), with and without the
// BIAS epilogue; odd N (no vector-aligned rows) included. The GEMM adds
// bias and residual to the fp32 accumulator and rounds once.
TEST(CudaLinear, ResidualMatchesCpu) {
  LLMC_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {{3, 7}, 16, 33}, {{2, 5}, 24, 64}, {{3, 5}, 24, 50257}, {{2, 3}, 0, 16},
      {{2, 128}, 3072, 768},
  };
  uint64_t seed = 3600;
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases)
      for (bool transposeB : {false, true})
        for (bool withBias : {false, true}) {
          SCOPED_TRACE(caseName(dtype, c, transposeB) + (withBias ? " bias" : ""));
          LinearOperands o(c, transposeB, dtype, seed);
          Buffer residual = Buffer::of(randomTensor(withLast(c.rows, c.n), ++seed), dtype);
          Buffer y(dtype, withLast(c.rows, c.n));
          std::vector<Buffer *> inputs = {&o.x, &o.w};
          if (withBias) inputs.push_back(&o.bias);
          inputs.push_back(&residual);
          expectCudaMatchesCpu("linear", inputs, {&y}, attrs({}, {{"transpose_b", transposeB}}),
                               {Metric::Norm, {tolerance(dtype)}});
        }
}

// BGRADA sums dy's rows in fp32 inside the GEMM; the CPU's reduce_sum sums
// in double: well within the tolerance.
TEST(CudaLinear, WeightGradMatchesCpu) {
  LLMC_REQUIRE_GPU();
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{1, 8}, {1, 8}},           {{3, 7, 16}, {3, 7, 33}},   {{21, 16}, {3, 7, 64}},
      {{4, 64, 128}, {4, 64, 512}}, {{2, 3, 0}, {2, 3, 16}}, {{2, 128, 3072}, {2, 128, 768}},
  };
  uint64_t seed = 3500;
  for (DType dtype : kFloatTypes)
    for (const auto &[xShape, dyShape] : shapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " x " + shapeString(xShape) + " dy " +
                   shapeString(dyShape));
      Buffer x = Buffer::of(randomTensor(xShape, ++seed), dtype);
      Buffer dy = Buffer::of(randomTensor(dyShape, ++seed), dtype);
      Buffer dw(dtype, {xShape.back(), dyShape.back()}), db(dtype, {dyShape.back()});
      expectCudaMatchesCpu("linear_weight_grad", {&x, &dy}, {&dw, &db}, {},
                           {Metric::Norm, {tolerance(dtype)}});
    }
}

// DGELU multiplies the fp32 accumulator by GELU's derivative at pre (the
// aux matrix), DGELU_BGRAD also sums the result's rows; N not a multiple
// of 8 takes the plain GEMM and the elementwise pass (and reduce_sum).
TEST(CudaLinear, GeluGradMatchesCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 3700;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kCases)
      for (bool transposeB : {false, true}) {
        SCOPED_TRACE(caseName(dtype, c, transposeB));
        for (bool biasGrad : {false, true}) {
          SCOPED_TRACE(biasGrad ? "bias_grad" : "");
          LinearOperands o(c, transposeB, dtype, seed);
          Buffer pre = Buffer::of(randomTensor(withLast(c.rows, c.n), ++seed, 3.0), dtype);
          Buffer y(dtype, withLast(c.rows, c.n)), db(dtype, {c.n});
          std::vector<Buffer *> outputs = {&y};
          if (biasGrad) outputs.push_back(&db);
          expectCudaMatchesCpu("matmul_gelu_grad", {&o.x, &o.w, &pre}, outputs,
                               attrs({}, {{"transpose_b", transposeB}, {"bias_grad", biasGrad}}),
                               {Metric::Norm, {tolerance(dtype)}});
        }
      }
}

TEST(CudaLinear, SwigluGradMatchesCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 3900;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kCases)
      for (bool transposeB : {false, true}) {
        SCOPED_TRACE(caseName(dtype, c, transposeB));
        LinearOperands o(c, transposeB, dtype, seed);
        Buffer gate = Buffer::of(randomTensor(withLast(c.rows, c.n), ++seed, 3.0), dtype);
        Buffer up = Buffer::of(randomTensor(withLast(c.rows, c.n), ++seed), dtype);
        Buffer dgate(dtype, withLast(c.rows, c.n)), dup(dtype, withLast(c.rows, c.n));
        expectCudaMatchesCpu("matmul_swiglu_grad", {&o.x, &o.w, &gate, &up}, {&dgate, &dup},
                             attrs({}, {{"transpose_b", transposeB}}),
                             {Metric::Norm, {tolerance(dtype)}});
      }
}

TEST(CudaLinear, BindingErrorsMatchTheCpu) {
  LLMC_REQUIRE_GPU();
  TensorView x = typeOnly(DType::F32, {4, 8, 16}), w = typeOnly(DType::F32, {16, 32}),
             bias = typeOnly(DType::F32, {32}), y = typeOnly(DType::F32, {4, 8, 32});
  EXPECT_EQ(cudaBindError("linear", {x, w, typeOnly(DType::F32, {16})}, {y}),
            bindError("linear", {x, w, typeOnly(DType::F32, {16})}, {y}));
  KernelAttrs keepPre = attrs({}, {{"keep_pre", 1}});
  EXPECT_EQ(cudaBindError("linear", {x, w, bias}, {y, y}, keepPre),
            bindError("linear", {x, w, bias}, {y, y}, keepPre));
  TensorView rows = typeOnly(DType::F32, {32, 32});
  EXPECT_EQ(cudaBindError("linear", {x, w, bias, rows}, {y}),
            bindError("linear", {x, w, bias, rows}, {y}));
  TensorView dy = typeOnly(DType::F32, {31, 32}), dw = typeOnly(DType::F32, {16, 32});
  EXPECT_EQ(cudaBindError("linear_weight_grad", {x, dy}, {dw, bias}),
            bindError("linear_weight_grad", {x, dy}, {dw, bias}));
  EXPECT_EQ(cudaBindError("matmul_gelu_grad", {x, w, bias}, {y}),
            bindError("matmul_gelu_grad", {x, w, bias}, {y}));
  EXPECT_EQ(cudaBindError("matmul_swiglu_grad", {x, w, y, bias}, {y, y}),
            bindError("matmul_swiglu_grad", {x, w, y, bias}, {y, y}));
}

} // namespace
} // namespace llmc::test
