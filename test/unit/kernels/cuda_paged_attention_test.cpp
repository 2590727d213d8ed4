//===- cuda_paged_attention_test.cpp - CUDA paged KV cache against the CPU ===//
//
// kv_cache_write into float caches and paged_attention over float, bf16,
// f16, int8 and fp8 E4M3 pools are conformance cases
// (paged_attention_test.cpp). Here: kv_cache_write's int8 and fp8 writes,
// compared exactly, and the binding errors.
//
//===----------------------------------------------------------------------===//

#include "CudaConformance.h"
#include "PagedCacheLayout.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace llmc::test {
namespace {

//===----------------------------------------------------------------------===//
// Narrow caches: bf16/f16 under f32, int8 or fp8 codes with scales
//===----------------------------------------------------------------------===//

/// Random codes (any byte) in a u8 buffer of `shape`.
Buffer randomCodes(const std::vector<int64_t> &shape, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  Buffer b = randomBytes(n, seed);
  b.shape = shape;
  return b;
}

/// Positive scales of about 3/127, as rows of standard-normal values get in
/// an int8 cache (what they are does not matter to a write, which replaces
/// the scales of the rows it writes and keeps the others).
Buffer randomScales(const std::vector<int64_t> &shape, uint64_t seed) {
  RefTensor s = randomTensor(shape, seed, 0.004, 0.024);
  for (double &x : s.data) x = std::fabs(x);
  return Buffer::of(s, DType::F32);
}

/// Quantization on write is the CPU's fp32 arithmetic with IEEE division
/// and the shared rounding (common/KvCacheCodes.h): codes and scales equal
/// bit for bit, in place and out of place, for f32, bf16 and f16 rows
/// (float caches are conformance cases), with an all-zero row and, for
/// fp8, rows whose x / s fall on E4M3 ties and subnormals.
void expectCodesMatchCpu(quant::Format format) {
  RefTensor table{{2, 3}, {4, 0, -1, 2, 9, 5}};
  RefTensor positions{{2, 5}, {0, 5, -1, 9, 12, 3, 1, -1, 6, 2}};
  Buffer tb = Buffer::of(table, DType::I32), pb = Buffer::of(positions, DType::I32);
  const KernelAttrs attrsOf = attrs({}, {{"format", static_cast<int64_t>(format)}});
  for (int64_t d : {16, 64, 80}) {
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::string(quant::formatName(format)) + " cache, new " + dtypeName(dtype) +
                   " D" + std::to_string(d));
      RefTensor values = randomTensor({2, 5, 2, d}, 12101 + d);
      std::fill_n(values.data.begin(), d, 0.0); // token (0, 0), kv head 0: zeros
      // Token (0, 1), kv head 0: amax 448, so s = 1 and x / s = x: ties
      // between E4M3 neighbours and subnormals.
      const double edges[] = {448.0, 1.0625, 1.1875, 0x1.8p-9, 0x1p-10, -0x1p-12, -300.0, 17.0};
      std::copy(std::begin(edges), std::end(edges), values.data.begin() + 2 * d);
      Buffer fresh = Buffer::of(values, dtype);
      Buffer cache = randomCodes({6, 4, 2, d}, 12102), scales = randomScales({6, 4, 2}, 12103);
      expectCudaMatchesCpu("kv_cache_write", {&cache, &fresh, &tb, &pb, &scales}, {&cache, &scales},
                           attrsOf, {Metric::Elementwise, {0.0}});
      Buffer out(DType::U8, {6, 4, 2, d}), outScales(DType::F32, {6, 4, 2});
      expectCudaMatchesCpu("kv_cache_write", {&cache, &fresh, &tb, &pb, &scales},
                           {&out, &outScales}, attrsOf, {Metric::Elementwise, {0.0}});
    }
  }
}

TEST(CudaKvCacheWrite, Int8CacheMatchesCpu) {
  LLMC_REQUIRE_GPU();
  expectCodesMatchCpu(quant::Format::Int8);
}

TEST(CudaKvCacheWrite, Fp8CacheMatchesCpu) {
  LLMC_REQUIRE_GPU();
  expectCodesMatchCpu(quant::Format::Fp8E4M3);
}

TEST(CudaPagedAttention, BindingErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  auto f32 = [](std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); };
  auto i32 = [](std::vector<int64_t> shape) { return typeOnly(DType::I32, std::move(shape)); };
  auto u8 = [](std::vector<int64_t> shape) { return typeOnly(DType::U8, std::move(shape)); };
  const KernelAttrs scale = attrs({{"scale", 0.125}});
  const TensorView cache = f32({6, 4, 2, 64}), table = i32({2, 5}), positions = i32({2, 3});
  const std::vector<CudaBindErrorCase> cases = {
      // new with another KV.
      {"kv_cache_write", {cache, f32({2, 3, 1, 64}), table, positions}, {cache}, {}},
      // block_table as floats.
      {"kv_cache_write", {cache, f32({2, 3, 2, 64}), f32({2, 5}), positions}, {cache}, {}},
      // H not a multiple of KV.
      {"paged_attention",
       {f32({2, 3, 3, 64}), cache, cache, table, positions},
       {f32({2, 3, 3, 64})},
       scale},
      // positions of the wrong shape.
      {"paged_attention",
       {f32({2, 3, 4, 64}), cache, cache, table, i32({2, 4})},
       {f32({2, 3, 4, 64})},
       scale},
      // No scale.
      {"paged_attention",
       {f32({2, 3, 4, 64}), cache, cache, table, positions},
       {f32({2, 3, 4, 64})},
       {}},
      // int8 pools without their scale pools.
      {"paged_attention",
       {f32({2, 3, 4, 64}), u8({6, 4, 2, 64}), u8({6, 4, 2, 64}), table, positions},
       {f32({2, 3, 4, 64})},
       scale},
      // An int8 cache's scale pool of the wrong shape.
      {"kv_cache_write",
       {u8({6, 4, 2, 64}), f32({2, 3, 2, 64}), table, positions, f32({6, 4})},
       {u8({6, 4, 2, 64}), f32({6, 4})},
       {}},
      // fp8 pools' format on a float cache, and a format no cache has.
      {"paged_attention",
       {f32({2, 3, 4, 64}), cache, cache, table, positions},
       {f32({2, 3, 4, 64})},
       attrs({{"scale", 0.125}}, {{"format", 2}})},
      {"kv_cache_write",
       {u8({6, 4, 2, 64}), f32({2, 3, 2, 64}), table, positions, f32({6, 4, 2})},
       {u8({6, 4, 2, 64}), f32({6, 4, 2})},
       attrs({}, {{"format", 3}})},
      // A float cache wider than q.
      {"paged_attention",
       {typeOnly(DType::BF16, {2, 3, 4, 64}), cache, cache, table, positions},
       {typeOnly(DType::BF16, {2, 3, 4, 64})},
       scale},
  };
  expectCudaBindErrorsMatchCpu(cases);

  // A head dim the CPU takes but the CUDA kernel does not: a clear error.
  const TensorView wide = f32({6, 4, 2, 300});
  EXPECT_EQ(cudaBindError("paged_attention",
                          {f32({1, 2, 2, 300}), wide, wide, i32({1, 5}), i32({1, 2})},
                          {f32({1, 2, 2, 300})}, scale),
            "paged_attention: head dim D = 300 is outside the CUDA kernel's range [1, 256]: q is "
            "f32[1x2x2x300]");
}

} // namespace
} // namespace llmc::test
