//===- cuda_paged_attention_test.cpp - CUDA paged KV cache against the CPU ===//
//
// kv_cache_write into float caches is a conformance case
// (paged_attention_test.cpp); here its int8 writes, compared exactly.
// paged_attention with the norm metric (outputs are
// sums of many terms added in different orders): 1e-5 for f32, 1e-2 for
// bf16 and f16 (both backends round their fp32 results once).
//
// Shapes: head dims 64 and 128 (the fast paths) and 7, 32, 80, 256 (the
// generic path); multi-head, grouped-query with groups of 2, 4 and 8 (two
// rounds of a block's 4 warps) and multi-query; pages of 1, 5 and 16
// tokens; decode (T = 1), whole prefills and a chunk part way into a
// context; sequences of different lengths with padding; unaddressable table
// entries; i64 indices. The pools hold random values everywhere, so a
// kernel reading a slot no sequence owns shows. Narrow caches: int8 writes
// (codes and scales bit for bit) and bf16/f16 writes under f32; attention
// over int8 pools with q in f32, bf16 and f16, and over bf16/f16 pools
// under an f32 q.
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

struct Case {
  std::vector<int64_t> lengths; ///< context length per sequence
  int64_t t, h, kv, d, page;    ///< query tokens (each row's last), heads, head dim, page size
};

std::string describe(const Case &c) {
  std::string s = "L";
  for (int64_t length : c.lengths) s += " " + std::to_string(length);
  return s + " T" + std::to_string(c.t) + " H" + std::to_string(c.h) + " KV" +
         std::to_string(c.kv) + " D" + std::to_string(c.d) + " P" + std::to_string(c.page);
}


void expectPagedAttentionMatches(const Case &c, DType dtype, DType indexType, uint64_t seed) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + describe(c) + " indices " +
               dtypeName(indexType));
  const int64_t b = static_cast<int64_t>(c.lengths.size());
  Pages pages = shuffledPages(c.lengths, c.page, seed);
  const int64_t blocks = pages.blocks;
  const RefTensor &table = pages.table;
  Buffer q = Buffer::of(randomTensor({b, c.t, c.h, c.d}, seed + 1), dtype);
  Buffer k = Buffer::of(randomTensor({blocks, c.page, c.kv, c.d}, seed + 2), dtype);
  Buffer v = Buffer::of(randomTensor({blocks, c.page, c.kv, c.d}, seed + 3), dtype);
  Buffer tb = Buffer::of(table, indexType);
  Buffer pb = Buffer::of(lastPositions(c.lengths, c.t), indexType);
  Buffer out(dtype, {b, c.t, c.h, c.d});
  expectCudaMatchesCpu("paged_attention", {&q, &k, &v, &tb, &pb}, {&out},
                       attrs({{"scale", 1.0 / std::sqrt(static_cast<double>(c.d))}}),
                       {Metric::Norm, {tolerance(dtype)}});
}

TEST(CudaPagedAttention, FastHeadDimsMatchCpu) {
  LLMC_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {{1, 17, 40}, 1, 8, 2, 64, 16},   // decode, three sequences
      {{1, 17, 40}, 40, 8, 2, 128, 16}, // prefill with padding
      {{300, 129}, 1, 32, 4, 128, 16},  // decode, group of 8: two warp rounds
      {{300}, 16, 4, 1, 64, 16},        // MQA, a chunk part way into the context
      {{77}, 77, 4, 4, 128, 5},         // multi-head, pages of 5
  };
  uint64_t seed = 11000;
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) expectPagedAttentionMatches(c, dtype, DType::I32, seed += 10);
}

TEST(CudaPagedAttention, GenericHeadDimsMatchCpu) {
  LLMC_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {{33}, 33, 4, 2, 32, 8},
      {{45, 3}, 2, 6, 2, 80, 16},
      {{20}, 20, 2, 1, 7, 1}, // pages of one token
      {{70}, 1, 4, 4, 256, 16},
  };
  uint64_t seed = 11500;
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) expectPagedAttentionMatches(c, dtype, DType::I32, seed += 10);
}

TEST(CudaPagedAttention, I64IndicesAndUnaddressableKeysMatchCpu) {
  LLMC_REQUIRE_GPU();
  expectPagedAttentionMatches({{50, 9}, 3, 4, 2, 64, 16}, DType::F32, DType::I64, 11900);
  // Table entries −1 and past the pool, and positions past the table.
  Buffer table = Buffer::of(RefTensor{{2, 3}, {3, -1, 0, 1, 7, 4}}, DType::I32);
  Buffer positions = Buffer::of(RefTensor{{2, 3}, {5, 11, 40, 2, 6, 9}}, DType::I32);
  Buffer q = Buffer::of(randomTensor({2, 3, 4, 64}, 11910), DType::F32);
  Buffer k = Buffer::of(randomTensor({5, 4, 2, 64}, 11911), DType::F32);
  Buffer v = Buffer::of(randomTensor({5, 4, 2, 64}, 11912), DType::F32);
  Buffer out(DType::F32, {2, 3, 4, 64});
  expectCudaMatchesCpu("paged_attention", {&q, &k, &v, &table, &positions}, {&out},
                       attrs({{"scale", 0.125}}), {Metric::Norm, {1e-5}});
}

//===----------------------------------------------------------------------===//
// Narrow caches: bf16/f16 under f32, int8 codes with scales
//===----------------------------------------------------------------------===//

/// Random int8 codes (any byte) in a u8 buffer of `shape`.
Buffer randomCodes(const std::vector<int64_t> &shape, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  Buffer b = randomBytes(n, seed);
  b.shape = shape;
  return b;
}

/// Positive scales of about 3/127, as rows of standard-normal values get.
Buffer randomScales(const std::vector<int64_t> &shape, uint64_t seed) {
  RefTensor s = randomTensor(shape, seed, 0.004, 0.024);
  for (double &x : s.data) x = std::fabs(x);
  return Buffer::of(s, DType::F32);
}

/// Quantization on write is the CPU's fp32 arithmetic with IEEE division:
/// codes and scales equal bit for bit, in place and out of place, for f32,
/// bf16 and f16 rows (float caches are conformance cases).
TEST(CudaKvCacheWrite, Int8CacheMatchesCpu) {
  LLMC_REQUIRE_GPU();
  RefTensor table{{2, 3}, {4, 0, -1, 2, 9, 5}};
  RefTensor positions{{2, 5}, {0, 5, -1, 9, 12, 3, 1, -1, 6, 2}};
  Buffer tb = Buffer::of(table, DType::I32), pb = Buffer::of(positions, DType::I32);
  for (int64_t d : {16, 64, 80}) {
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::string("int8 cache, new ") + dtypeName(dtype) + " D" + std::to_string(d));
      RefTensor values = randomTensor({2, 5, 2, d}, 12101 + d);
      std::fill_n(values.data.begin(), d, 0.0); // token (0, 0), kv head 0: zeros
      Buffer fresh = Buffer::of(values, dtype);
      Buffer cache = randomCodes({6, 4, 2, d}, 12102), scales = randomScales({6, 4, 2}, 12103);
      expectCudaMatchesCpu("kv_cache_write", {&cache, &fresh, &tb, &pb, &scales},
                           {&cache, &scales}, {}, {Metric::Elementwise, {0.0}});
      Buffer out(DType::U8, {6, 4, 2, d}), outScales(DType::F32, {6, 4, 2});
      expectCudaMatchesCpu("kv_cache_write", {&cache, &fresh, &tb, &pb, &scales},
                           {&out, &outScales}, {}, {Metric::Elementwise, {0.0}});
    }
  }
}

/// paged_attention over int8 pools (q f32, bf16, f16) and over bf16/f16
/// pools (q f32), on both head-dim paths, MHA, GQA and MQA.
TEST(CudaPagedAttention, Int8AndNarrowCachesMatchCpu) {
  LLMC_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {{1, 17, 40}, 1, 8, 2, 64, 16},   // decode, GQA
      {{1, 17, 40}, 40, 8, 2, 128, 16}, // prefill with padding
      {{300}, 16, 4, 1, 64, 16},        // MQA, a chunk part way into the context
      {{45, 3}, 2, 6, 6, 80, 5},        // multi-head, generic D, pages of 5
      {{33}, 33, 4, 2, 32, 8},
  };
  uint64_t seed = 12500;
  for (const Case &c : cases) {
    seed += 10;
    const int64_t b = static_cast<int64_t>(c.lengths.size());
    Pages pages = shuffledPages(c.lengths, c.page, seed);
    const std::vector<int64_t> pool = {pages.blocks, c.page, c.kv, c.d},
                               scalePool = {pages.blocks, c.page, c.kv};
    Buffer tb = Buffer::of(pages.table, DType::I32);
    Buffer pb = Buffer::of(lastPositions(c.lengths, c.t), DType::I32);
    const KernelAttrs a = attrs({{"scale", 1.0 / std::sqrt(static_cast<double>(c.d))}});
    Buffer k = randomCodes(pool, seed + 1), v = randomCodes(pool, seed + 2);
    Buffer ks = randomScales(scalePool, seed + 3), vs = randomScales(scalePool, seed + 4);
    for (DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::string("int8 cache, q ") + dtypeName(dtype) + " " + describe(c));
      Buffer q = Buffer::of(randomTensor({b, c.t, c.h, c.d}, seed + 5), dtype);
      Buffer out(dtype, {b, c.t, c.h, c.d});
      expectCudaMatchesCpu("paged_attention", {&q, &k, &v, &tb, &pb, &ks, &vs}, {&out}, a,
                           {Metric::Norm, {dtype == DType::F32 ? 1e-5 : tolerance(dtype)}});
    }
    for (DType cacheType : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(dtypeName(cacheType)) + " cache, q f32 " + describe(c));
      Buffer q = Buffer::of(randomTensor({b, c.t, c.h, c.d}, seed + 6), DType::F32);
      Buffer kc = Buffer::of(randomTensor(pool, seed + 7), cacheType);
      Buffer vc = Buffer::of(randomTensor(pool, seed + 8), cacheType);
      Buffer out(DType::F32, {b, c.t, c.h, c.d});
      expectCudaMatchesCpu("paged_attention", {&q, &kc, &vc, &tb, &pb}, {&out}, a,
                           {Metric::Norm, {1e-5}});
    }
  }
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
