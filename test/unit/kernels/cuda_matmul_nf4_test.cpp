//===- cuda_matmul_nf4_test.cpp - matmul_nf4 on the GPU against the CPU ---===//
//
// matmul_nf4's products are conformance cases (matmul_nf4_test.cpp), run
// on the GPU by CudaKernelConformance. Here: pieces of a split weight
// (whose blocks' scales are indexed in the whole weight), weights
// expanded in several chunks, and binding errors. Norm metric: f32 within 1e-5; bf16 within 1e-2,
// as the GPU multiplies the weights rounded to bf16 and the CPU in fp32.
//
//===----------------------------------------------------------------------===//

#include "CudaConformance.h"
#include "common/QuantScheme.h"

#include <random>

namespace llmc::test {
namespace {

/// Rank 1's piece of a column split in three chunks (GPT-2's fused QKV)
/// and of a row split, both layouts, int8 and E4M3 absmax levels: the
/// blocks' scales are found by their index in the whole weight on both
/// backends.
TEST(CudaMatmulNf4, PiecesMatchCpu) {
  LLMC_REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> piece, whole, chunks, offset;
    bool transposeB;
  };
  // 17 rows: the CPU's few-row products over Wᵀ quantize x (matmul_nf4_test.cpp).
  const int64_t block = 64, rows = 17;
  const std::vector<Case> cases = {{{768, 1152}, {768, 2304}, {1, 3}, {0, 384}, false},
                                   {{384, 768}, {768, 768}, {1, 1}, {384, 0}, false},
                                   {{1152, 768}, {2304, 768}, {3, 1}, {384, 0}, true}};
  uint64_t seed = 1400;
  for (DType dtype : {DType::F32, DType::BF16})
    for (quant::AbsmaxFormat format : {quant::AbsmaxFormat::Int8, quant::AbsmaxFormat::Fp8E4M3})
      for (const Case &c : cases) {
        const int64_t k = c.transposeB ? c.piece[1] : c.piece[0];
        const int64_t cols = c.transposeB ? c.piece[0] : c.piece[1];
        Nf4PieceStorage w =
            randomNf4Piece(c.piece[0] * c.piece[1], c.whole[0] * c.whole[1], block, seed);
        Buffer x = Buffer::of(randomTensor({rows, k}, ++seed), dtype), out(dtype, {rows, cols});
        KernelAttrs a = attrs({}, {{"block", block}, {"transpose_b", c.transposeB}});
        a.setInts("weight_shape", c.piece);
        a.setInts("whole_shape", c.whole);
        a.setInts("chunks", c.chunks);
        a.setInts("piece_offset", c.offset);
        a.setInt("absmax_format", static_cast<int64_t>(format));
        expectCudaMatchesCpu("matmul_nf4", {&x, &w.codes, &w.absmaxQ, &w.scale, &w.mean}, {&out}, a,
                             {Metric::Norm, {tolerance(dtype)}});
      }
}

TEST(CudaMatmulNf4, WeightsOfSeveralChunksMatchCpu) {
  // W is expanded 64 MiB of x's type at a time, each chunk's GEMM writing
  // its columns of y in place (rows N apart): f32 [2048, 8200] is 8192
  // columns then 8, bf16 [2048, 16400] 16384 then 16; both layouts.
  LLMC_REQUIRE_GPU();
  const int64_t block = 64, rows = 17, k = 2048;
  uint64_t seed = 1500;
  for (auto [dtype, n] :
       {std::pair{DType::F32, int64_t{8200}}, std::pair{DType::BF16, int64_t{16400}}})
    for (bool transposeB : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (transposeB ? " W [N, K]" : " W [K, N]"));
      Nf4PieceStorage w = randomNf4Piece(k * n, k * n, block, seed);
      Buffer x = Buffer::of(randomTensor({rows, k}, ++seed), dtype), out(dtype, {rows, n});
      KernelAttrs a = attrs({}, {{"block", block}, {"transpose_b", transposeB}});
      a.setInts("weight_shape",
                transposeB ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
      expectCudaMatchesCpu("matmul_nf4", {&x, &w.codes, &w.absmaxQ, &w.scale, &w.mean}, {&out}, a,
                           {Metric::Norm, {tolerance(dtype)}});
    }
}

TEST(CudaMatmulNf4, BindingErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto u8 = [](std::vector<int64_t> s) { return typeOnly(DType::U8, std::move(s)); };
  KernelAttrs a = attrs({}, {{"block", 48}});
  a.setInts("weight_shape", {64, 128});
  std::vector<TensorView> in = {f32({2, 64}), u8({4096}), u8({128}), f32({1}), f32({})};
  std::string expected = bindError("matmul_nf4", in, {f32({2, 128})}, a);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(cudaBindError("matmul_nf4", in, {f32({2, 128})}, a), expected);
}

} // namespace
} // namespace llmc::test
