//===- cuda_linear_test.cpp - the matmul with its epilogue against the CPU ===//
//
// cuBLASLt's BIAS, GELU_BIAS and GELU_AUX_BIAS epilogues, and the
// elementwise fallback where N is not a multiple of 8 (no aux epilogue),
// against the CPU kernel. Norm metric, as for matmul; f32 runs without
// TF32. Under bf16 and f16 the epilogue rounds once where the CPU rounds
// the product, the biased value and the GELU, well within tolerance(dtype).

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

TEST(CudaLinear, MatchesCpuForEveryEpilogue) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 3300;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kCases)
      for (bool transposeB : {false, true})
        for (int act = 0; act < 3; ++act) { // none, gelu, gelu + keep_pre
          const bool gelu = act > 0, keepPre = act == 2;
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " rows " + shapeString(c.rows) + " k" +
                       std::to_string(c.k) + " n" + std::to_string(c.n) +
                       (transposeB ? " transpose_b" : "") + (gelu ? " gelu" : "") +
                       (keepPre ? " keep_pre" : ""));
          Buffer x = Buffer::of(randomTensor(withLast(c.rows, c.k), ++seed), dtype);
          Buffer w = Buffer::of(randomTensor(transposeB ? std::vector<int64_t>{c.n, c.k}
                                                        : std::vector<int64_t>{c.k, c.n},
                                             ++seed, 0.3),
                                dtype);
          Buffer bias = Buffer::of(randomTensor({c.n}, ++seed), dtype);
          Buffer y(dtype, withLast(c.rows, c.n)), pre(dtype, withLast(c.rows, c.n));
          std::vector<Buffer *> outputs = {&y};
          if (keepPre) outputs.push_back(&pre);
          expectCudaMatchesCpu(
              "linear", {&x, &w, &bias}, outputs,
              attrs({}, {{"transpose_b", transposeB}, {"gelu", gelu}, {"keep_pre", keepPre}}),
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
}

} // namespace
} // namespace llmc::test
