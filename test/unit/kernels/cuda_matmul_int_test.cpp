//===- cuda_matmul_int_test.cpp - matmul_int on the GPU against the CPU ---===//
//
// The same int8/int4 storage (IntWeightCases.h) and x on both backends:
// every grouping (one scale, per row, per column, blocks), both symmetries
// and layouts, decode-sized and prefill-sized rows. Norm metric: f32 within 1e-5 (the
// weights expand to the same fp32 values); bf16 within 1e-2, as the GPU
// multiplies the weights rounded to bf16 and the CPU in fp32.
//
//===----------------------------------------------------------------------===//

#include "CudaConformance.h"
#include "IntWeightCases.h"

namespace llmc::test {
namespace {

TEST(CudaMatmulInt, MatchesCpu) {
  LLMC_REQUIRE_GPU();
  struct Case {
    int64_t rows, k, n;
  };
  const std::vector<Case> cases = {{1, 128, 192}, {3, 200, 640}, {40, 2048, 600},
                                   {16, 768, 2304}};
  const std::vector<Grouping> groupings = {{0, -1}, {0, 0}, {0, 1}, {32, -1}};
  uint64_t seed = 1700;
  for (DType dtype : {DType::F32, DType::BF16})
    for (int bits : {8, 4})
      for (const Case &c : cases)
        for (const Grouping &g : groupings)
          for (bool tb : {false, true})
            for (bool asymmetric : {false, true}) {
              std::vector<int64_t> shape = tb ? std::vector<int64_t>{c.n, c.k}
                                              : std::vector<int64_t>{c.k, c.n};
              if (g.block > 0 && shape[1] % g.block != 0) continue;
              SCOPED_TRACE(std::string(dtypeName(dtype)) + " int" + std::to_string(bits) + " " +
                           g.name() + (asymmetric ? " asym" : "") + " rows " +
                           std::to_string(c.rows) + " k" + std::to_string(c.k) + " n" +
                           std::to_string(c.n) + (tb ? " transposed" : ""));
              IntWeight w = randomWeight(bits, shape[0], shape[1], g, asymmetric, seed += 3);
              Buffer x = Buffer::of(randomTensor({c.rows, c.k}, ++seed), dtype),
                     out(dtype, {c.rows, c.n});
              expectCudaMatchesCpu("matmul_int", inputsOf(x, w), {&out},
                                   intAttrs(bits, g, shape, tb), {Metric::Norm, {tolerance(dtype)}});
            }
}

TEST(CudaMatmulInt, BindingErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto u8 = [](std::vector<int64_t> s) { return typeOnly(DType::U8, std::move(s)); };
  KernelAttrs a = attrs({}, {{"bits", 4}, {"block", 48}});
  a.setInts("weight_shape", {64, 128});
  std::vector<TensorView> in = {f32({2, 64}), u8({4096}), f32({128})};
  std::string expected = bindError("matmul_int", in, {f32({2, 128})}, a);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(cudaBindError("matmul_int", in, {f32({2, 128})}, a), expected);
}

} // namespace
} // namespace llmc::test
