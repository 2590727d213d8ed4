//===- paged_attention_test.cpp - kv_cache_write and paged_attention ------===//
//
// kv_cache_write moves bytes: its conformance cases (Conformance.h) compare
// it exactly, in place and out of place, on both backends. paged_attention
// is compared two ways, with the norm metric (outputs are weighted sums of
// many terms):
//  - as conformance cases, against the double reference (and on a GPU
//    CUDA against the CPU), on pools filled with random values
//    everywhere, so a kernel reading a slot no sequence owns shows; and
//    here with key ranges split over 1, 3 and 8 threads;
//  - against the `attention` kernel, causal, on contiguous K/V: a sequence
//    scattered by kv_cache_write into shuffled pages and attended at its
//    positions 0..L−1 must give causal attention's rows (1e-5 in f32), and
//    a decode call (T = 1) at position p must give row p.
// Shapes cover multi-head, GQA (H = 4, KV = 2), MQA (KV = 1), query heads
// per kv head beyond one chunk's rows, pages of 1, 5, 7, 8 and 16 tokens
// (dividing the length or not), three sequences of lengths 1, 17 and 40 in
// one batch, prefill chunks part way into a context, key tiles spanning
// pages, padding (position −1), unaddressable positions, and key ranges
// split across threads (flash-decoding) for 1, 3 and 8 threads.
//
// Narrow caches: int8 and fp8 E4M3 writes match the reference's codes and
// scales bit for bit (and fp8's ties and subnormals the shared rounding's);
// attention over int8 and fp8 pools (q f32, bf16, f16) and over bf16/f16
// pools (q f32) matches the reference over the values the pools hold; and
// pools filled by kv_cache_write stay within 2% (int8) and 5% (fp8) of the
// output's norm of causal attention over the unquantized keys and values.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"
#include "PagedCacheLayout.h"

#include "common/Fp8.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

namespace llmc::test {
namespace {


std::string describeLengths(const std::vector<int64_t> &lengths) {
  std::string s = "L";
  for (int64_t length : lengths) s += " " + std::to_string(length);
  return s;
}

struct PagedCase {
  std::vector<int64_t> lengths; ///< context length per sequence
  int64_t t, h, kv, d, page;    ///< query tokens (each row's last), heads, head dim, page size
};

std::string describe(const PagedCase &c) {
  return describeLengths(c.lengths) + " T" + std::to_string(c.t) + " H" + std::to_string(c.h) +
         " KV" + std::to_string(c.kv) + " D" + std::to_string(c.d) + " P" + std::to_string(c.page);
}

const std::vector<PagedCase> kCases = {
    {{40}, 40, 4, 4, 16, 16},        // multi-head prefill
    {{33}, 33, 4, 2, 32, 8},         // GQA, P does not divide L
    {{23, 7}, 23, 3, 1, 8, 5},       // MQA
    {{1, 17, 40}, 40, 4, 2, 64, 16}, // three sequences
    {{1, 17, 40}, 1, 4, 2, 64, 16},  // decode
    {{300, 129}, 1, 8, 1, 128, 16},  // decode, group of 8, several key tiles
    {{100}, 8, 4, 2, 32, 16},        // a prefill chunk part way into the context
    {{150}, 150, 2, 1, 24, 7},       // several query chunks and key tiles
    {{10}, 10, 2, 2, 8, 1},          // pages of one token
    {{70}, 3, 128, 2, 16, 8},        // group of 64: one token per chunk
};

/// paged_attention on `c` with random pools, against the reference.
void expectPagedAttentionMatchesReference(const PagedCase &c, DType dtype, uint64_t seed) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + describe(c));
  const int64_t b = static_cast<int64_t>(c.lengths.size());
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  Pages pages = shuffledPages(c.lengths, c.page, seed);
  RefTensor q = roundTo(randomTensor({b, c.t, c.h, c.d}, seed + 1), dtype);
  RefTensor k = roundTo(randomTensor({pages.blocks, c.page, c.kv, c.d}, seed + 2), dtype);
  RefTensor v = roundTo(randomTensor({pages.blocks, c.page, c.kv, c.d}, seed + 3), dtype);
  RefTensor positions = lastPositions(c.lengths, c.t);
  Buffer qb = Buffer::of(q, dtype), kb = Buffer::of(k, dtype), vb = Buffer::of(v, dtype);
  Buffer tb = Buffer::of(pages.table, DType::I32), pb = Buffer::of(positions, DType::I32);
  Buffer out(dtype, q.shape);
  out.poison();
  ASSERT_TRUE(
      runKernel("paged_attention", {&qb, &kb, &vb, &tb, &pb}, {&out}, attrs({{"scale", scale}})));
  EXPECT_CLOSE(out.toRef(), ref::pagedAttention(q, k, v, pages.table, positions, scale),
               Metric::Norm, tolerance(dtype));
}

/// With fewer (sequence, kv head, chunk) tasks than threads the key range
/// is split and merged; every thread count gives the reference.
TEST(PagedAttentionKernels, KeySplitsMatchReference) {
  const int saved = omp_get_max_threads();
  for (int threads : {1, 3, 8}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    omp_set_num_threads(threads);
    expectPagedAttentionMatchesReference({{300}, 1, 2, 1, 64, 16}, DType::F32, 1500);
    expectPagedAttentionMatchesReference({{5, 200}, 1, 4, 2, 32, 8}, DType::F32, 1510);
    expectPagedAttentionMatchesReference({{130}, 2, 2, 2, 16, 16}, DType::BF16, 1520);
  }
  omp_set_num_threads(saved);
}

//===----------------------------------------------------------------------===//
// Against causal attention
//===----------------------------------------------------------------------===//

/// Causal `attention` of q [B, T, H, D] over the contiguous k and v, with
/// each sequence's rows from its length on set to 0: what paged attention
/// over the same sequences, padded to T, must give.
RefTensor maskedCausalAttention(Buffer &q, Buffer &k, Buffer &v, double scale,
                                const std::vector<int64_t> &lengths) {
  const int64_t b = q.shape[0], t = q.shape[1], h = q.shape[2], d = q.shape[3];
  Buffer causal(q.dtype, q.shape), lse(DType::F32, {b, h, t});
  EXPECT_TRUE(runKernel("attention", {&q, &k, &v}, {&causal, &lse},
                        attrs({{"scale", scale}}, {{"causal", 1}})));
  RefTensor expected = causal.toRef();
  for (int64_t row = 0; row < b; ++row)
    for (int64_t i = lengths[row]; i < t; ++i)
      std::fill_n(expected.data.begin() + (row * t + i) * h * d, h * d, 0.0);
  return expected;
}

struct CausalCase {
  std::vector<int64_t> lengths;
  int64_t h, kv, d, page;
};

/// Scatters each sequence's K and V into shuffled pages with kv_cache_write
/// (positions 0..L_b−1, padding past L_b), then checks paged_attention at
/// those positions against causal `attention` on the contiguous K and V,
/// whose row i of sequence b depends on keys 0..i only, so rows i < L_b of
/// the padded batch are exact targets; padding rows must be 0. Then one
/// decode call per sequence at position p must give row p.
void expectMatchesCausalAttention(const CausalCase &c, DType dtype, uint64_t seed) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + describeLengths(c.lengths) + " H" +
               std::to_string(c.h) + " KV" + std::to_string(c.kv) + " D" + std::to_string(c.d) +
               " P" + std::to_string(c.page));
  const int64_t b = static_cast<int64_t>(c.lengths.size());
  const int64_t t = *std::max_element(c.lengths.begin(), c.lengths.end());
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  const double tol = dtype == DType::F32 ? 1e-5 : tolerance(dtype);
  Pages pages = shuffledPages(c.lengths, c.page, seed);
  const std::vector<int64_t> pool = {pages.blocks, c.page, c.kv, c.d};

  Buffer q = Buffer::of(randomTensor({b, t, c.h, c.d}, seed + 1), dtype);
  Buffer k = Buffer::of(randomTensor({b, t, c.kv, c.d}, seed + 2), dtype);
  Buffer v = Buffer::of(randomTensor({b, t, c.kv, c.d}, seed + 3), dtype);
  // Slots no sequence owns hold values too, which no query may see.
  Buffer kPool = Buffer::of(randomTensor(pool, seed + 4, 10.0), dtype);
  Buffer vPool = Buffer::of(randomTensor(pool, seed + 5, 10.0), dtype);
  Buffer table = Buffer::of(pages.table, DType::I32);
  RefTensor positions = RefTensor::zeros({b, t});
  for (int64_t row = 0; row < b; ++row)
    for (int64_t i = 0; i < t; ++i)
      positions.data[row * t + i] = i < c.lengths[row] ? static_cast<double>(i) : -1.0;
  Buffer pos = Buffer::of(positions, DType::I32);

  ASSERT_TRUE(runKernel("kv_cache_write", {&kPool, &k, &table, &pos}, {&kPool}));
  ASSERT_TRUE(runKernel("kv_cache_write", {&vPool, &v, &table, &pos}, {&vPool}));
  Buffer paged(dtype, {b, t, c.h, c.d});
  paged.poison();
  KernelAttrs a = attrs({{"scale", scale}});
  ASSERT_TRUE(runKernel("paged_attention", {&q, &kPool, &vPool, &table, &pos}, {&paged}, a));

  RefTensor expected = maskedCausalAttention(q, k, v, scale, c.lengths);
  const int64_t rowSize = c.h * c.d;
  RefTensor got = paged.toRef();
  EXPECT_CLOSE(got, expected, Metric::Norm, tol);
  for (int64_t row = 0; row < b; ++row)
    for (int64_t i = c.lengths[row]; i < t; ++i)
      for (int64_t e = 0; e < rowSize; ++e)
        ASSERT_EQ(got.data[(row * t + i) * rowSize + e], 0.0) << "padding row " << row << ", " << i;

  // Decode: one query per sequence, at its first, middle and last position.
  RefTensor qAll = q.toRef();
  for (int which = 0; which < 3; ++which) {
    RefTensor q1 = RefTensor::zeros({b, 1, c.h, c.d}), p1 = RefTensor::zeros({b, 1});
    RefTensor want = RefTensor::zeros({b, 1, c.h, c.d});
    for (int64_t row = 0; row < b; ++row) {
      int64_t p = which == 0 ? 0 : which == 1 ? c.lengths[row] / 2 : c.lengths[row] - 1;
      p1.data[row] = static_cast<double>(p);
      std::copy_n(qAll.data.begin() + (row * t + p) * rowSize, rowSize,
                  q1.data.begin() + row * rowSize);
      std::copy_n(expected.data.begin() + (row * t + p) * rowSize, rowSize,
                  want.data.begin() + row * rowSize);
    }
    SCOPED_TRACE("decode " + std::to_string(which));
    Buffer qb = Buffer::of(q1, dtype), pb = Buffer::of(p1, DType::I32), out(dtype, q1.shape);
    out.poison();
    ASSERT_TRUE(runKernel("paged_attention", {&qb, &kPool, &vPool, &table, &pb}, {&out}, a));
    EXPECT_CLOSE(out.toRef(), want, Metric::Norm, tol);
  }
}

TEST(PagedAttentionKernels, MatchesCausalAttention) {
  const std::vector<CausalCase> cases = {
      {{48}, 4, 4, 16, 16},        // multi-head, P divides L
      {{45}, 4, 2, 32, 16},        // GQA, P does not divide L
      {{37}, 3, 1, 8, 8},          // MQA
      {{1, 17, 40}, 4, 2, 64, 16}, // three sequences of different lengths
      {{1, 17, 40}, 2, 1, 24, 7},  // MQA, pages of 7
      {{130, 70}, 8, 2, 128, 16},  // several query chunks and key tiles
  };
  uint64_t seed = 2000;
  for (const CausalCase &c : cases) expectMatchesCausalAttention(c, DType::F32, seed += 10);
  for (const CausalCase &c : cases) expectMatchesCausalAttention(c, DType::BF16, seed += 10);
  expectMatchesCausalAttention(cases[3], DType::F16, seed += 10);
}

//===----------------------------------------------------------------------===//
// kv_cache_write
//===----------------------------------------------------------------------===//

/// A batch of 2 rows × 5 tokens into a pool of 6 pages of 4 slots, M = 3:
/// padding (−1), a position past the table (12), a page id of −1 and one
/// past the pool (9) among ordinary positions.
struct WriteCase {
  RefTensor table{{2, 3}, {4, 0, -1, 2, 9, 5}};
  RefTensor positions{{2, 5}, {0, 5, -1, 9, 12, 3, 1, -1, 6, 2}};
  std::vector<int64_t> pool = {6, 4, 2, 8};
};

/// Token rows that land: (b, t) with an addressable position.
int64_t addressedRows(const WriteCase &w) {
  int64_t n = 0;
  for (int64_t row = 0; row < 2; ++row)
    for (int64_t i = 0; i < 5; ++i) {
      int64_t p = static_cast<int64_t>(w.positions.data[row * 5 + i]);
      if (p < 0 || p / 4 >= 3) continue;
      double page = w.table.data[row * 3 + p / 4];
      n += page >= 0 && page < 6;
    }
  return n;
}

/// kv_cache_write of `fresh` [B, T, KV, D] (of `freshType`) into a `cache`
/// pool (of `cacheType`: fresh's type, or bf16/f16 under f32 rows, which
/// round each value on write), in place or into a poisoned output: exact.
ConformanceCase kvCacheWriteCase(const std::string &label, DType cacheType, DType freshType,
                                 DType indexType, const std::vector<int64_t> &pool,
                                 const std::vector<int64_t> &freshShape, const RefTensor &table,
                                 const RefTensor &positions, bool inPlace, uint64_t seed) {
  return {"kv_cache_write", label, [=] {
            KernelCall k;
            size_t cache = k.input(randomTensor(pool, seed), cacheType);
            k.input(randomTensor(freshShape, seed + 1), freshType);
            k.input(table, indexType);
            k.input(positions, indexType);
            k.outputMaybeInPlace(inPlace, cache, cacheType, pool);
            k.reference = [cacheType](const std::vector<RefTensor> &in) {
              return std::vector<RefTensor>{
                  roundTo(ref::kvCacheWrite(in[0], in[1], in[2], in[3]), cacheType)};
            };
            k.tolerances = k.cudaTolerances = {0.0};
            return k;
          }};
}

/// The WriteCase layout at head dims 8 and 64, in place and not, every
/// float type with i32 and i64 indices; bf16 and f16 caches under f32 rows
/// at head dims 16, 64 and 80; and a prefill's worth: 3 sequences (1, 17
/// and 40 tokens) of 8 kv heads × 128 on shuffled pages of 16.
std::vector<ConformanceCase> kvCacheWriteCases() {
  WriteCase w;
  std::vector<ConformanceCase> cases;
  uint64_t seed = 3000;
  for (int64_t d : {8, 64})
    for (DType dtype : kFloatTypes)
      for (DType indexType : {DType::I32, DType::I64})
        for (bool inPlace : {false, true}) {
          std::string label = std::string(dtypeName(dtype)) + "_D" + std::to_string(d) +
                              "_indices_" + dtypeName(indexType) + (inPlace ? "_in_place" : "");
          cases.push_back(kvCacheWriteCase(label, dtype, dtype, indexType, {6, 4, 2, d},
                                           {2, 5, 2, d}, w.table, w.positions, inPlace, seed += 2));
        }
  for (int64_t d : {16, 64, 80})
    for (DType cacheType : {DType::BF16, DType::F16}) {
      std::string label =
          std::string(dtypeName(cacheType)) + "_cache_f32_rows_D" + std::to_string(d);
      cases.push_back(kvCacheWriteCase(label, cacheType, DType::F32, DType::I32, {6, 4, 2, d},
                                       {2, 5, 2, d}, w.table, w.positions, true, seed += 2));
    }
  std::vector<int64_t> lengths = {1, 17, 40};
  Pages pages = shuffledPages(lengths, 16, 12010);
  cases.push_back(kvCacheWriteCase("bf16_prefill_3x40x8x128", DType::BF16, DType::BF16, DType::I32,
                                   {pages.blocks, 16, 8, 128}, {3, 40, 8, 128}, pages.table,
                                   lastPositions(lengths, 40), true, seed += 2));
  return cases;
}

LLMC_CONFORMANCE_CASES(KvCacheWrite, kvCacheWriteCases);

/// Exactly the addressed slots change, each to its token's row; padding and
/// unaddressable positions write nothing.
TEST(KvCacheWriteKernels, OnlyAddressedSlotsChange) {
  WriteCase w;
  RefTensor cache = roundTo(randomTensor(w.pool, 3101), DType::F32);
  RefTensor fresh = roundTo(randomTensor({2, 5, 2, 8}, 3102, 1.0, 100.0), DType::F32); // ≠ cache
  Buffer cb = Buffer::of(cache, DType::F32), nb = Buffer::of(fresh, DType::F32),
         tb = Buffer::of(w.table, DType::I32), pb = Buffer::of(w.positions, DType::I32);
  ASSERT_TRUE(runKernel("kv_cache_write", {&cb, &nb, &tb, &pb}, {&cb}));
  RefTensor got = cb.toRef();
  const int64_t rowSize = 2 * 8;
  int64_t changed = 0;
  for (int64_t slot = 0; slot < 6 * 4; ++slot) {
    bool same =
        std::equal(got.data.begin() + slot * rowSize, got.data.begin() + (slot + 1) * rowSize,
                   cache.data.begin() + slot * rowSize);
    changed += !same;
  }
  EXPECT_EQ(changed, addressedRows(w));
  EXPECT_EQ(addressedRows(w), 5);
  // Token (0, 1) at position 5 → page table[0][1] = 0, slot 1.
  EXPECT_TRUE(std::equal(fresh.data.begin() + 1 * rowSize, fresh.data.begin() + 2 * rowSize,
                         got.data.begin() + (0 * 4 + 1) * rowSize));
  EXPECT_CLOSE(got, ref::kvCacheWrite(cache, fresh, w.table, w.positions), Metric::Elementwise,
               0.0);
}

//===----------------------------------------------------------------------===//
// Narrow caches: bf16 or f16 under f32, int8 or fp8 codes with scales
//===----------------------------------------------------------------------===//

using quant::Format;

/// The kernels' `format` attribute for codes of `f`.
KernelAttrs formatAttrs(Format f,
                        std::initializer_list<std::pair<const char *, double>> floats = {}) {
  return attrs(floats, {{"format", static_cast<int64_t>(f)}});
}

/// Code values (int8: integers in [-127, 127]; fp8_e4m3: E4M3 numbers) as
/// their codes in a u8 buffer.
Buffer codesBuffer(const RefTensor &values, Format f) {
  Buffer b(DType::U8, values.shape);
  uint8_t *bytes = b.view().as<uint8_t>();
  for (int64_t i = 0; i < values.numel(); ++i)
    bytes[i] = f == Format::Fp8E4M3
                   ? fp8::codeOfValue(static_cast<float>(values.data[i]), fp8::Kind::E4M3)
                   : static_cast<uint8_t>(static_cast<int8_t>(values.data[i]));
  return b;
}

/// `bytes` (a u8 buffer's values, 0..255) as the values of the codes of
/// `f` they hold.
RefTensor codeValues(RefTensor bytes, Format f) {
  for (double &x : bytes.data)
    x = f == Format::Fp8E4M3 ? fp8::decode(static_cast<uint8_t>(x), fp8::Kind::E4M3)
                             : (x > 127 ? x - 256 : x);
  return bytes;
}

/// The code values of a u8 buffer of codes of `f`.
RefTensor codesOf(const Buffer &b, Format f) { return codeValues(b.toRef(), f); }

/// Random code values: int8 uniform in [-127, 127]; fp8 any E4M3 code but
/// NaN's, uniform over codes.
RefTensor randomCodes(const std::vector<int64_t> &shape, uint64_t seed, Format f = Format::Int8) {
  if (f == Format::Int8)
    return randomIds(shape, seed, -127, 128);
  RefTensor bytes = randomIds(shape, seed, 0, 254); // 0x00..0xfd, then 0x7f moves to 0xfe
  for (double &x : bytes.data)
    if (x == 0x7f)
      x = 0xfe;
  return codeValues(bytes, f);
}

/// Positive scales of about 3/127 (int8) or 3/448 (fp8_e4m3): what rows of
/// standard-normal values get.
RefTensor randomScales(const std::vector<int64_t> &shape, uint64_t seed, Format f = Format::Int8) {
  const double max = f == Format::Fp8E4M3 ? 448.0 : 127.0;
  RefTensor out = randomTensor(shape, seed, 0.5 / max, 3.0 / max);
  for (double &x : out.data) x = static_cast<float>(std::fabs(x));
  return out;
}

const char *nameOf(Format f) { return quant::formatName(f); }

/// Quantization on write is the reference's fp32 arithmetic
/// (common/KvCacheCodes.h), so codes and scales match bit for bit: f32,
/// bf16 and f16 rows, i32 and i64 indices, in place and out of place, an
/// all-zero row (s = 0, codes 0), a row with one large outlier. Untouched
/// slots keep their codes and scales. Each written row reads back within
/// half a step of its grid (int8: s / 2; fp8: 2^-4 of the value, or half
/// the least subnormal step, 2^-10·s), and its largest value is the top
/// code (±127, ±448) exactly.
void expectCodesMatchReference(Format f) {
  WriteCase w;
  const std::vector<int64_t> scalePool(w.pool.begin(), w.pool.end() - 1);
  const double top = f == Format::Fp8E4M3 ? 448.0 : 127.0;
  for (DType dtype : kFloatTypes)
    for (DType indexType : {DType::I32, DType::I64}) {
      SCOPED_TRACE(std::string(nameOf(f)) + " cache, new " + dtypeName(dtype) + " indices " +
                   dtypeName(indexType));
      RefTensor codes = randomCodes(w.pool, 3201, f), scales = randomScales(scalePool, 3202, f);
      RefTensor fresh = randomTensor({2, 5, 2, 8}, 3203);
      std::fill_n(fresh.data.begin() + 8, 8, 0.0);   // token (0, 0), kv head 1: zeros
      fresh.data[2 * 16 + 3] = 1000.0;                // token (0, 2): padding, never written
      fresh.data[5 * 16 + 5] = -60.0;                 // token (1, 0), kv head 0: an outlier
      fresh = roundTo(fresh, dtype);
      std::vector<RefTensor> expected =
          ref::kvCacheWriteCodes(codes, scales, fresh, w.table, w.positions, f);
      const Buffer expectedCodes = codesBuffer(expected[0], f);
      Buffer nb = Buffer::of(fresh, dtype), tb = Buffer::of(w.table, indexType),
             pb = Buffer::of(w.positions, indexType);

      Buffer cb = codesBuffer(codes, f), sb = Buffer::of(scales, DType::F32);
      ASSERT_TRUE(
          runKernel("kv_cache_write", {&cb, &nb, &tb, &pb, &sb}, {&cb, &sb}, formatAttrs(f)));
      EXPECT_TRUE(cb.storage == expectedCodes.storage) << "codes, in place";
      EXPECT_EQ(sb.toRef().data, expected[1].data) << "scales, in place";

      Buffer source = codesBuffer(codes, f), sourceScales = Buffer::of(scales, DType::F32);
      Buffer out(DType::U8, w.pool), outScales(DType::F32, scalePool);
      out.poison();
      outScales.poison();
      ASSERT_TRUE(runKernel("kv_cache_write", {&source, &nb, &tb, &pb, &sourceScales},
                            {&out, &outScales}, formatAttrs(f)));
      EXPECT_TRUE(out.storage == expectedCodes.storage) << "codes, out of place";
      EXPECT_EQ(outScales.toRef().data, expected[1].data) << "scales, out of place";
      EXPECT_TRUE(source.storage == codesBuffer(codes, f).storage) << "the input changed";

      RefTensor back = ref::dequantizeCache(expected[0], expected[1]);
      RefTensor exact = ref::kvCacheWrite(ref::dequantizeCache(codes, scales), fresh, w.table,
                                          w.positions);
      for (int64_t head = 0; head < 6 * 4 * 2; ++head) {
        const double s = expected[1].data[head];
        double largest = 0.0;
        for (int64_t e = 0; e < 8; ++e) {
          const int64_t i = head * 8 + e;
          const double step =
              f == Format::Fp8E4M3
                  ? std::max(std::ldexp(std::fabs(exact.data[i]), -4), std::ldexp(s, -10))
                  : 0.5 * s;
          EXPECT_LE(std::fabs(back.data[i] - exact.data[i]), step * (1 + 1e-4) + 1e-12)
              << "slot " << head / 2 << " head " << head % 2;
          largest = std::max(largest, std::fabs(expected[0].data[i]));
        }
        if (s != scales.data[head] && s > 0) {
          EXPECT_EQ(largest, top);
        }
      }
    }
}

TEST(KvCacheWriteKernels, Int8MatchesReferenceBitForBit) {
  expectCodesMatchReference(Format::Int8);
}
TEST(KvCacheWriteKernels, Fp8MatchesReferenceBitForBit) {
  expectCodesMatchReference(Format::Fp8E4M3);
}

/// A row at the edges of E4M3: values whose x / s are ties between fp8
/// neighbours (rounded to the even code), E4M3 subnormals, a value that
/// underflows to zero, and a negative zero; every code equals the shared
/// rounding's (fp8::encode) of x / s, and an f32 cache's reads match.
TEST(KvCacheWriteKernels, Fp8RoundsTiesToEvenAndSubnormals) {
  // s = 448 / 448 = 1 exactly: x / s = x, so the ties below are exact.
  const std::vector<double> row = {448.0,
                                   0.5 * (1.0 + 1.125),
                                   0.5 * (1.125 + 1.25),
                                   std::ldexp(3.0, -10),
                                   std::ldexp(1.0, -10),
                                   std::ldexp(1.0, -12),
                                   -0.0,
                                   -300.0};
  RefTensor fresh{{1, 1, 1, 8}, row};
  RefTensor table{{1, 1}, {0}}, positions{{1, 1}, {0}};
  Buffer cache(DType::U8, {1, 1, 1, 8}), scales(DType::F32, {1, 1, 1});
  cache.poison();
  scales.poison();
  Buffer nb = Buffer::of(fresh, DType::F32), tb = Buffer::of(table, DType::I32),
         pb = Buffer::of(positions, DType::I32);
  ASSERT_TRUE(runKernel("kv_cache_write", {&cache, &nb, &tb, &pb, &scales}, {&cache, &scales},
                        formatAttrs(Format::Fp8E4M3)));
  EXPECT_EQ(scales.toRef().data[0], 1.0);
  const uint8_t *codes = cache.view().as<uint8_t>();
  const std::vector<uint8_t> expected = {0x7e, 0x38, 0x3a, 0x02, 0x00, 0x00, 0x80, 0xf9};
  for (size_t e = 0; e < row.size(); ++e) {
    EXPECT_EQ(codes[e], expected[e]) << "element " << e;
    EXPECT_EQ(codes[e], fp8::encode(static_cast<float>(row[e]), fp8::Kind::E4M3));
  }
}

/// bf16 and f16 caches under f32 rows store each value rounded to nearest
/// even; the rest of the pool is untouched.
TEST(KvCacheWriteKernels, NarrowFloatCacheRoundsOnWrite) {
  WriteCase w;
  for (DType cacheType : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(cacheType));
    RefTensor cache = roundTo(randomTensor(w.pool, 3301), cacheType);
    RefTensor fresh = randomTensor({2, 5, 2, 8}, 3302);
    Buffer expected =
        Buffer::of(ref::kvCacheWrite(cache, fresh, w.table, w.positions), cacheType);
    Buffer cb = Buffer::of(cache, cacheType), nb = Buffer::of(fresh, DType::F32),
           tb = Buffer::of(w.table, DType::I32), pb = Buffer::of(w.positions, DType::I32);
    ASSERT_TRUE(runKernel("kv_cache_write", {&cb, &nb, &tb, &pb}, {&cb}));
    EXPECT_TRUE(cb.storage == expected.storage);
  }
}

//===----------------------------------------------------------------------===//
// Conformance
//===----------------------------------------------------------------------===//

/// Where one paged_attention call's queries look: its pool's pages, block
/// table and positions.
struct PagedLayout {
  std::string label;
  std::vector<int64_t> q, pool; ///< [B, T, H, D], [blocks, page, KV, D]
  RefTensor table, positions;
};

/// `c` on shuffled pages, queried at each row's last positions.
PagedLayout layoutOf(const PagedCase &c, uint64_t seed) {
  Pages pages = shuffledPages(c.lengths, c.page, seed);
  std::string label = "L";
  for (int64_t length : c.lengths) label += std::to_string(length) + "_";
  label += "T" + std::to_string(c.t) + "_H" + std::to_string(c.h) + "_KV" + std::to_string(c.kv) +
           "_D" + std::to_string(c.d) + "_P" + std::to_string(c.page);
  return {label,
          {static_cast<int64_t>(c.lengths.size()), c.t, c.h, c.d},
          {pages.blocks, c.page, c.kv, c.d},
          pages.table,
          lastPositions(c.lengths, c.t)};
}

/// paged_attention of a `qType` q over a `cacheType` pool (U8: codes of
/// `codes` with f32 scales per slot and kv head), random everywhere, so a
/// kernel reading a slot no sequence owns shows. Norm metric at `tol` both
/// ways: outputs are weighted sums of many terms, added in different
/// orders on the GPU, and both backends round their fp32 results once.
ConformanceCase pagedCase(const PagedLayout &l, DType qType, DType cacheType, DType indexType,
                          double scale, double tol, uint64_t seed, Format codes = Format::Int8) {
  const bool quantized = cacheType == DType::U8;
  std::string label = l.label + "_q_" + dtypeName(qType) + "_cache_" +
                      (quantized ? nameOf(codes) : dtypeName(cacheType)) + "_indices_" +
                      dtypeName(indexType);
  return {"paged_attention", label, [=] {
            KernelCall k;
            const std::vector<int64_t> scalePool = {l.pool[0], l.pool[1], l.pool[2]};
            k.input(randomTensor(l.q, seed + 1), qType);
            if (quantized) {
              k.input(codesBuffer(randomCodes(l.pool, seed + 2, codes), codes));
              k.input(codesBuffer(randomCodes(l.pool, seed + 3, codes), codes));
            } else {
              k.input(randomTensor(l.pool, seed + 2), cacheType);
              k.input(randomTensor(l.pool, seed + 3), cacheType);
            }
            k.input(l.table, indexType);
            k.input(l.positions, indexType);
            if (quantized) {
              k.input(randomScales(scalePool, seed + 4, codes), DType::F32);
              k.input(randomScales(scalePool, seed + 5, codes), DType::F32);
            }
            k.output(qType, l.q);
            k.attrs =
                quantized ? formatAttrs(codes, {{"scale", scale}}) : attrs({{"scale", scale}});
            k.reference = [=](const std::vector<RefTensor> &in) {
              RefTensor keys =
                  quantized ? ref::dequantizeCache(codeValues(in[1], codes), in[5]) : in[1];
              RefTensor values =
                  quantized ? ref::dequantizeCache(codeValues(in[2], codes), in[6]) : in[2];
              return std::vector<RefTensor>{
                  ref::pagedAttention(in[0], keys, values, in[3], in[4], scale)};
            };
            k.metric = k.cudaMetric = Metric::Norm;
            k.tolerances = k.cudaTolerances = {tol};
            return k;
          }};
}

/// The shapes above (kCases), and the CUDA kernels' paths: head dims 64
/// and 128 (fast) and 7, 32, 80, 256 (generic), groups of 2, 4 and 8 (two
/// rounds of a block's 4 warps), pages of 1, 5 and 16 tokens.
const std::vector<PagedCase> kCudaPathCases = {
    {{1, 17, 40}, 1, 8, 2, 64, 16}, // decode, three sequences
    {{1, 17, 40}, 40, 8, 2, 128, 16}, // prefill with padding
    {{300, 129}, 1, 32, 4, 128, 16}, // decode, group of 8: two warp rounds
    {{300}, 16, 4, 1, 64, 16}, // MQA, a chunk part way into the context
    {{77}, 77, 4, 4, 128, 5}, // multi-head, pages of 5
    {{45, 3}, 2, 6, 2, 80, 16}, // generic head dims from here (and kCases' 32)
    {{20}, 20, 2, 1, 7, 1}, // pages of one token
    {{70}, 1, 4, 4, 256, 16},
};

/// Narrow pools on both head-dim paths, MHA, GQA and MQA (beside kCases).
const std::vector<PagedCase> kCudaNarrowCases = {
    {{1, 17, 40}, 1, 8, 2, 64, 16}, // decode, GQA
    {{1, 17, 40}, 40, 8, 2, 128, 16}, // prefill with padding
    {{300}, 16, 4, 1, 64, 16}, // MQA, a chunk part way into the context
    {{45, 3}, 2, 6, 6, 80, 5}, // multi-head, generic D, pages of 5
};

double scaleOf(const PagedCase &c) { return 1.0 / std::sqrt(static_cast<double>(c.d)); }

/// Float pools in every dtype: the dtype's tolerance. Int8 and fp8 pools
/// with q in f32 (1e-5: the reference takes the kernels' fp32 products of
/// codes and scales), bf16 and f16 (the dtype's); bf16 and f16 pools under
/// an f32 q (1e-5: their values are exact in fp32). i64 indices; table entries −1 and past the
/// pool, and positions past the table (11 and 40 past 12 keys), which must be left out, never read.
std::vector<ConformanceCase> pagedAttentionCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 1000;
  for (const std::vector<PagedCase> *list : {&kCases, &kCudaPathCases})
    for (DType dtype : kFloatTypes)
      for (const PagedCase &c : *list) {
        seed += 10;
        cases.push_back(pagedCase(layoutOf(c, seed), dtype, dtype, DType::I32, scaleOf(c),
                                  tolerance(dtype), seed));
      }
  seed = 4000;
  for (const std::vector<PagedCase> *list : {&kCases, &kCudaNarrowCases})
    for (const PagedCase &c : *list) {
      PagedLayout l = layoutOf(c, seed += 10);
      for (Format codes : {Format::Int8, Format::Fp8E4M3})
        for (DType q : kFloatTypes)
          cases.push_back(pagedCase(l, q, DType::U8, DType::I32, scaleOf(c),
                                    q == DType::F32 ? 1e-5 : tolerance(q), seed, codes));
      for (DType cacheType : {DType::BF16, DType::F16})
        cases.push_back(
            pagedCase(l, DType::F32, cacheType, DType::I32, scaleOf(c), 1e-5, seed + 20));
    }
  PagedCase i64a = {{9, 20}, 2, 2, 1, 8, 4}, i64b = {{50, 9}, 3, 4, 2, 64, 16};
  cases.push_back(
      pagedCase(layoutOf(i64a, 1600), DType::F32, DType::F32, DType::I64, 0.3, 1e-5, 1600));
  cases.push_back(pagedCase(layoutOf(i64b, 11900), DType::F32, DType::F32, DType::I64,
                            scaleOf(i64b), 1e-5, 11900));
  const RefTensor table{{2, 3}, {3, -1, 0, 1, 7, 4}};
  const RefTensor positions{{2, 3}, {5, 11, 40, 2, 6, 9}};
  cases.push_back(pagedCase({"unaddressable_D8", {2, 3, 2, 8}, {5, 4, 2, 8}, table, positions},
                            DType::F32, DType::F32, DType::I32, 0.5, 1e-5, 1700));
  cases.push_back(pagedCase({"unaddressable_D64", {2, 3, 4, 64}, {5, 4, 2, 64}, table, positions},
                            DType::F32, DType::F32, DType::I32, 0.125, 1e-5, 11910));
  return cases;
}

LLMC_CONFORMANCE_CASES(PagedAttention, pagedAttentionCases);

/// ‖out − ref‖ / ‖ref‖.
double normError(const RefTensor &out, const RefTensor &ref) {
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    diff += (out.data[i] - ref.data[i]) * (out.data[i] - ref.data[i]);
    norm += ref.data[i] * ref.data[i];
  }
  return std::sqrt(diff / norm);
}

/// Keys and values written by kv_cache_write into pools of `f`'s codes on
/// shuffled pages, then attended: the reference over the written codes
/// (1e-5, and with key ranges split over 1, 3 and 8 threads), and causal
/// attention over the unquantized K and V within the format's error
/// (`bound` of the output's norm, for standard-normal inputs).
void expectCodesWrittenThenReadMatchAttention(Format f, double bound) {
  struct Case {
    std::vector<int64_t> lengths;
    int64_t h, kv, d, page;
  };
  const std::vector<Case> cases = {
      {{48}, 4, 4, 16, 16},        // multi-head
      {{45}, 4, 2, 32, 16},        // GQA, P does not divide L
      {{1, 17, 40}, 4, 2, 64, 16}, // three sequences
      {{130, 70}, 8, 1, 128, 7},   // MQA, several query chunks and key tiles
  };
  const int saved = omp_get_max_threads();
  uint64_t seed = 4500;
  double best = 1.0, worst = 0.0;
  for (const Case &c : cases)
    for (DType dtype : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(nameOf(f)) + " cache, " + dtypeName(dtype) + " " +
                   describeLengths(c.lengths) + " H" + std::to_string(c.h) + " KV" +
                   std::to_string(c.kv) + " D" + std::to_string(c.d) + " P" +
                   std::to_string(c.page));
      seed += 10;
      const int64_t b = static_cast<int64_t>(c.lengths.size());
      const int64_t t = *std::max_element(c.lengths.begin(), c.lengths.end());
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      Pages pages = shuffledPages(c.lengths, c.page, seed);
      const std::vector<int64_t> pool = {pages.blocks, c.page, c.kv, c.d},
                                 scalePool = {pages.blocks, c.page, c.kv};
      Buffer q = Buffer::of(randomTensor({b, t, c.h, c.d}, seed + 1), dtype);
      Buffer k = Buffer::of(randomTensor({b, t, c.kv, c.d}, seed + 2), dtype);
      Buffer v = Buffer::of(randomTensor({b, t, c.kv, c.d}, seed + 3), dtype);
      // Slots no sequence owns hold codes too, which no query may see.
      Buffer kPool = codesBuffer(randomCodes(pool, seed + 4, f), f),
             vPool = codesBuffer(randomCodes(pool, seed + 5, f), f);
      Buffer kScales = Buffer::of(randomScales(scalePool, seed + 6, f), DType::F32),
             vScales = Buffer::of(randomScales(scalePool, seed + 7, f), DType::F32);
      Buffer table = Buffer::of(pages.table, DType::I32);
      RefTensor positions = RefTensor::zeros({b, t});
      for (int64_t row = 0; row < b; ++row)
        for (int64_t i = 0; i < t; ++i)
          positions.data[row * t + i] = i < c.lengths[row] ? static_cast<double>(i) : -1.0;
      Buffer pos = Buffer::of(positions, DType::I32);
      ASSERT_TRUE(runKernel("kv_cache_write", {&kPool, &k, &table, &pos, &kScales},
                            {&kPool, &kScales}, formatAttrs(f)));
      ASSERT_TRUE(runKernel("kv_cache_write", {&vPool, &v, &table, &pos, &vScales},
                            {&vPool, &vScales}, formatAttrs(f)));

      RefTensor reference = ref::pagedAttention(
          q.toRef(), ref::dequantizeCache(codesOf(kPool, f), kScales.toRef()),
          ref::dequantizeCache(codesOf(vPool, f), vScales.toRef()), pages.table, positions, scale);
      for (int threads : {saved, 1, 3, 8}) {
        SCOPED_TRACE(std::to_string(threads) + " threads");
        omp_set_num_threads(threads);
        Buffer paged(dtype, {b, t, c.h, c.d});
        paged.poison();
        ASSERT_TRUE(runKernel("paged_attention",
                              {&q, &kPool, &vPool, &table, &pos, &kScales, &vScales}, {&paged},
                              formatAttrs(f, {{"scale", scale}})));
        EXPECT_CLOSE(paged.toRef(), reference, Metric::Norm,
                     dtype == DType::F32 ? 1e-5 : tolerance(dtype));
      }
      omp_set_num_threads(saved);

      RefTensor expected = maskedCausalAttention(q, k, v, scale, c.lengths);
      const double error = normError(reference, expected);
      EXPECT_LE(error, bound);
      best = std::min(best, error);
      worst = std::max(worst, error);
    }
  std::printf("[ info ] %s cache: attention %.2e to %.2e (norm) from the unquantized keys' "
              "and values'\n",
              nameOf(f), best, worst);
}

/// int8: measured 0.6-0.9% of the output's norm, bounded by 2%.
TEST(PagedAttentionKernels, Int8CacheWrittenThenReadMatchesAttention) {
  expectCodesWrittenThenReadMatchAttention(Format::Int8, 2e-2);
}
/// fp8 E4M3 (3 mantissa bits: a step of 2^-3 of a value's power of two,
/// against int8's 1/127 of the row's amax): measured 2.7-3.3%, bounded by
/// 5%.
TEST(PagedAttentionKernels, Fp8CacheWrittenThenReadMatchesAttention) {
  expectCodesWrittenThenReadMatchAttention(Format::Fp8E4M3, 5e-2);
}

//===----------------------------------------------------------------------===//
// Contracts
//===----------------------------------------------------------------------===//

TEST(PagedCacheKernels, FactoriesNameTheBadOperand) {
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto bf16 = [](std::vector<int64_t> s) { return typeOnly(DType::BF16, std::move(s)); };
  auto i32 = [](std::vector<int64_t> s) { return typeOnly(DType::I32, std::move(s)); };
  auto i64 = [](std::vector<int64_t> s) { return typeOnly(DType::I64, std::move(s)); };
  auto u8 = [](std::vector<int64_t> s) { return typeOnly(DType::U8, std::move(s)); };
  // B = 2, T = 3, H = 4, KV = 2, D = 8; pool of NB = 6 pages of P = 4; M = 5.
  const TensorView cache = f32({6, 4, 2, 8}), fresh = f32({2, 3, 2, 8}), table = i32({2, 5}),
                   positions = i32({2, 3}), q = f32({2, 3, 4, 8});
  const KernelAttrs scale = attrs({{"scale", 0.35}});
  struct ErrorCase {
    const char *kernel;
    std::vector<TensorView> inputs, outputs;
    KernelAttrs attrs;
    std::string expected; // the whole message
  };
  const std::vector<ErrorCase> cases = {
      {"kv_cache_write",
       {cache, fresh, table},
       {cache},
       {},
       "kv_cache_write: expected 4 inputs, got 3"},
      {"kv_cache_write",
       {f32({6, 4, 16}), fresh, table, positions},
       {f32({6, 4, 16})},
       {},
       "kv_cache_write: cache must have rank 4, got f32[6x4x16]"},
      {"kv_cache_write",
       {i32({6, 4, 2, 8}), fresh, table, positions},
       {i32({6, 4, 2, 8})},
       {},
       "kv_cache_write: cache must be f32, bf16 or f16, got i32[6x4x2x8]"},
      {"kv_cache_write",
       {f32({6, 0, 2, 8}), fresh, table, positions},
       {f32({6, 0, 2, 8})},
       {},
       "kv_cache_write: cache must be [NB, P, KV, D] with a page size P >= 1, got f32[6x0x2x8]"},
      {"kv_cache_write",
       {cache, bf16({2, 3, 2, 8}), table, positions},
       {cache},
       {},
       "kv_cache_write: cache must be bf16 (new's type) or u8 (codes), got f32[6x4x2x8]"},
      {"kv_cache_write",
       {u8({6, 4, 2, 8}), fresh, table, positions},
       {u8({6, 4, 2, 8})},
       {},
       "kv_cache_write: a cache of codes (u8) takes its scale pool [NB, P, KV] f32 as input 5 "
       "and output 2: expected 5 inputs, got 4"},
      {"kv_cache_write",
       {u8({6, 4, 2, 8}), fresh, table, positions, f32({6, 4, 2})},
       {u8({6, 4, 2, 8}), f32({6, 4, 2})},
       attrs({}, {{"format", 3}}),
       "kv_cache_write: attribute 'format' of a u8 cache must be 0 (int8) or 2 (fp8_e4m3), got "
       "3"},
      {"kv_cache_write",
       {cache, fresh, table, positions},
       {cache},
       attrs({}, {{"format", 2}}),
       "kv_cache_write: attribute 'format' applies to caches of codes (u8), got a cache of f32"},
      {"kv_cache_write",
       {u8({6, 4, 2, 8}), fresh, table, positions, f32({6, 4, 2})},
       {u8({6, 4, 2, 8})},
       {},
       "kv_cache_write: expected 2 outputs, got 1"},
      {"kv_cache_write",
       {u8({6, 4, 2, 8}), fresh, table, positions, f32({6, 4})},
       {u8({6, 4, 2, 8}), f32({6, 4})},
       {},
       "kv_cache_write: scales must be f32[6x4x2], got f32[6x4]"},
      {"kv_cache_write",
       {u8({6, 4, 2, 8}), fresh, table, positions, f32({6, 4, 2})},
       {u8({6, 4, 2, 8}), bf16({6, 4, 2})},
       {},
       "kv_cache_write: out scales must be f32[6x4x2], got bf16[6x4x2]"},
      {"kv_cache_write",
       {cache, f32({2, 3, 1, 8}), table, positions},
       {cache},
       {},
       "kv_cache_write: new must be [B, T, KV, D] with cache's KV and D: cache is f32[6x4x2x8], "
       "new is f32[2x3x1x8]"},
      {"kv_cache_write",
       {cache, fresh, f32({2, 5}), positions},
       {cache},
       {},
       "kv_cache_write: block_table must be i32 or i64, got f32[2x5]"},
      {"kv_cache_write",
       {cache, fresh, i32({3, 5}), positions},
       {cache},
       {},
       "kv_cache_write: block_table must be [B, M] with B = 2, got i32[3x5]"},
      {"kv_cache_write",
       {cache, fresh, table, i32({2, 4})},
       {cache},
       {},
       "kv_cache_write: positions must be i32[2x3], got i32[2x4]"},
      {"kv_cache_write",
       {cache, fresh, table, positions},
       {f32({6, 4, 2, 4})},
       {},
       "kv_cache_write: out must be f32[6x4x2x8], got f32[6x4x2x4]"},
      {"paged_attention",
       {q, cache, cache, table, positions},
       {q},
       {},
       "paged_attention: missing float attribute 'scale'"},
      {"paged_attention",
       {q, cache, cache, table},
       {q},
       scale,
       "paged_attention: expected 5 inputs, got 4"},
      {"paged_attention",
       {f32({2, 3, 32}), cache, cache, table, positions},
       {f32({2, 3, 32})},
       scale,
       "paged_attention: q must have rank 4, got f32[2x3x32]"},
      {"paged_attention",
       {q, bf16({6, 4, 2, 8}), cache, table, positions},
       {q},
       scale,
       "paged_attention: v_cache must be bf16[6x4x2x8], got f32[6x4x2x8]"},
      {"paged_attention",
       {bf16({2, 3, 4, 8}), cache, cache, table, positions},
       {bf16({2, 3, 4, 8})},
       scale,
       "paged_attention: k_cache must be bf16 (q's type) or u8 (codes), got f32[6x4x2x8]"},
      {"paged_attention",
       {q, i32({6, 4, 2, 8}), cache, table, positions},
       {q},
       scale,
       "paged_attention: k_cache must be f32, bf16 or f16, got i32[6x4x2x8]"},
      {"paged_attention",
       {q, u8({6, 4, 2, 8}), u8({6, 4, 2, 8}), table, positions},
       {q},
       scale,
       "paged_attention: caches of codes (u8) take their scale pools [NB, P, KV] f32 as inputs "
       "6 and 7: expected 7 inputs, got 5"},
      {"paged_attention",
       {q, u8({6, 4, 2, 8}), u8({6, 4, 2, 8}), table, positions, f32({6, 4, 2}), f32({6, 4, 2})},
       {q},
       attrs({{"scale", 0.35}}, {{"format", 1}}),
       "paged_attention: attribute 'format' of a u8 cache must be 0 (int8) or 2 (fp8_e4m3), got "
       "1"},
      {"paged_attention",
       {q, u8({6, 4, 2, 8}), u8({6, 4, 2, 8}), table, positions, f32({6, 4, 2}), f32({6, 4, 1})},
       {q},
       scale,
       "paged_attention: v_scales must be f32[6x4x2], got f32[6x4x1]"},
      {"paged_attention",
       {q, cache, f32({6, 4, 1, 8}), table, positions},
       {q},
       scale,
       "paged_attention: v_cache must be f32[6x4x2x8], got f32[6x4x1x8]"},
      {"paged_attention",
       {f32({2, 3, 4, 16}), cache, cache, table, positions},
       {f32({2, 3, 4, 16})},
       scale,
       "paged_attention: k_cache must be [NB, P, KV, D] with q's D: q is f32[2x3x4x16], "
       "k_cache is f32[6x4x2x8]"},
      {"paged_attention",
       {f32({2, 3, 3, 8}), cache, cache, table, positions},
       {f32({2, 3, 3, 8})},
       scale,
       "paged_attention: query heads H = 3 must be a multiple of kv heads KV = 2"},
      {"paged_attention",
       {q, cache, cache, i32({10}), positions},
       {q},
       scale,
       "paged_attention: block_table must have rank 2, got i32[10]"},
      {"paged_attention",
       {q, cache, cache, table, i64({3, 3})},
       {q},
       scale,
       "paged_attention: positions must be i64[2x3], got i64[3x3]"},
      {"paged_attention",
       {q, cache, cache, table, positions},
       {bf16({2, 3, 4, 8})},
       scale,
       "paged_attention: out must be f32[2x3x4x8], got bf16[2x3x4x8]"},
  };
  for (const ErrorCase &c : cases)
    EXPECT_EQ(bindError(c.kernel, c.inputs, c.outputs, c.attrs), c.expected);
}

} // namespace
} // namespace llmc::test
