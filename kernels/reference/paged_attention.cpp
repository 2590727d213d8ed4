//===- paged_attention.cpp - paged KV cache write and attention reference -===//
//
// The paged cache the textbook way: the writer walks the tokens, and
// attention gathers each sequence's visible keys and values out of the
// pages into contiguous rows, then takes a plain stable softmax over them
// (the kernels never gather: they read the pages in place).
//
//===----------------------------------------------------------------------===//

#include "common/KvCacheCodes.h"
#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

namespace {

struct PagedDims {
  int64_t b, t, blocks, page, kv, d, maxBlocks;
};

PagedDims pagedDims(const RefTensor &cache, const RefTensor &blockTable, const RefTensor &positions,
                    const char *fn) {
  require(cache.shape.size() == 4 && cache.shape[1] >= 1, fn,
          "a cache must be [NB,P,KV,D], P >= 1");
  require(blockTable.shape.size() == 2 && positions.shape.size() == 2 &&
              blockTable.shape[0] == positions.shape[0],
          fn, "block_table must be [B,M] and positions [B,T]");
  PagedDims n;
  n.b = positions.shape[0], n.t = positions.shape[1];
  n.blocks = cache.shape[0], n.page = cache.shape[1], n.kv = cache.shape[2], n.d = cache.shape[3];
  n.maxBlocks = blockTable.shape[1];
  return n;
}

/// Offset in a cache of token position p of sequence b, kv head g, or −1
/// when the position is unaddressable.
int64_t slotAt(const PagedDims &n, const RefTensor &blockTable, int64_t b, int64_t p, int64_t g) {
  if (p < 0 || p / n.page >= n.maxBlocks) return -1;
  double block = blockTable.data[b * n.maxBlocks + p / n.page];
  if (block < 0 || block >= static_cast<double>(n.blocks)) return -1;
  return ((static_cast<int64_t>(block) * n.page + p % n.page) * n.kv + g) * n.d;
}

} // namespace

RefTensor kvCacheWrite(const RefTensor &cache, const RefTensor &fresh, const RefTensor &blockTable,
                       const RefTensor &positions) {
  PagedDims n = pagedDims(cache, blockTable, positions, "kvCacheWrite");
  require(fresh.shape == std::vector<int64_t>{n.b, n.t, n.kv, n.d}, "kvCacheWrite",
          "new must be [B,T,KV,D]");
  RefTensor out = cache;
  for (int64_t b = 0; b < n.b; ++b)
    for (int64_t i = 0; i < n.t; ++i) {
      int64_t p = static_cast<int64_t>(positions.data[b * n.t + i]);
      for (int64_t g = 0; g < n.kv; ++g) {
        int64_t slot = slotAt(n, blockTable, b, p, g);
        if (slot < 0) continue;
        const double *src = &fresh.data[((b * n.t + i) * n.kv + g) * n.d];
        std::copy(src, src + n.d, &out.data[slot]);
      }
    }
  return out;
}

namespace {

/// kvCacheWriteCodes for codes of type Code: each row in fp32 exactly as
/// the kernels compute it (common/KvCacheCodes.h), kept as the codes'
/// values.
template <typename Code>
std::vector<RefTensor> writeCodes(const RefTensor &codes, const RefTensor &scales,
                                  const RefTensor &fresh, const RefTensor &blockTable,
                                  const RefTensor &positions) {
  PagedDims n = pagedDims(codes, blockTable, positions, "kvCacheWriteCodes");
  require(fresh.shape == std::vector<int64_t>{n.b, n.t, n.kv, n.d}, "kvCacheWriteCodes",
          "new must be [B,T,KV,D]");
  require(scales.shape == std::vector<int64_t>{n.blocks, n.page, n.kv}, "kvCacheWriteCodes",
          "scales must be [NB,P,KV]");
  RefTensor out = codes, outScales = scales;
  for (int64_t b = 0; b < n.b; ++b)
    for (int64_t i = 0; i < n.t; ++i) {
      int64_t p = static_cast<int64_t>(positions.data[b * n.t + i]);
      for (int64_t g = 0; g < n.kv; ++g) {
        int64_t slot = slotAt(n, blockTable, b, p, g);
        if (slot < 0) continue;
        const double *src = &fresh.data[((b * n.t + i) * n.kv + g) * n.d];
        float absmax = 0.0f;
        for (int64_t e = 0; e < n.d; ++e)
          absmax = std::max(absmax, std::fabs(static_cast<float>(src[e])));
        const float scale = kvcache::rowScale<Code>(absmax);
        for (int64_t e = 0; e < n.d; ++e)
          out.data[slot + e] = kvcache::CodeFormat<Code>::value(
              kvcache::encode<Code>(static_cast<float>(src[e]), scale));
        outScales.data[slot / n.d] = scale;
      }
    }
  return {out, outScales};
}

} // namespace

std::vector<RefTensor> kvCacheWriteCodes(const RefTensor &codes, const RefTensor &scales,
                                         const RefTensor &fresh, const RefTensor &blockTable,
                                         const RefTensor &positions, quant::Format format) {
  require(kvcache::isCacheFormat(format), "kvCacheWriteCodes",
          "the codes must be int8 or fp8_e4m3");
  if (format == quant::Format::Fp8E4M3)
    return writeCodes<kvcache::Fp8E4M3Code>(codes, scales, fresh, blockTable, positions);
  return writeCodes<int8_t>(codes, scales, fresh, blockTable, positions);
}

RefTensor dequantizeCache(const RefTensor &codes, const RefTensor &scales) {
  require(codes.shape.size() == 4 &&
              scales.shape == std::vector<int64_t>(codes.shape.begin(), codes.shape.end() - 1),
          "dequantizeCache", "codes must be [NB,P,KV,D] and scales [NB,P,KV]");
  RefTensor out = codes;
  const int64_t d = codes.shape[3];
  // The kernels' fp32 product (a code's value is exact in fp32).
  for (size_t i = 0; i < out.data.size(); ++i)
    out.data[i] = static_cast<float>(out.data[i]) * static_cast<float>(scales.data[i / d]);
  return out;
}

RefTensor pagedAttention(const RefTensor &q, const RefTensor &kCache, const RefTensor &vCache,
                         const RefTensor &blockTable, const RefTensor &positions, double scale,
                         int64_t window, double softcap) {
  PagedDims n = pagedDims(kCache, blockTable, positions, "pagedAttention");
  require(q.shape.size() == 4 && q.shape[0] == n.b && q.shape[1] == n.t && q.shape[3] == n.d,
          "pagedAttention", "q must be [B,T,H,D]");
  require(vCache.shape == kCache.shape, "pagedAttention", "v_cache must have k_cache's shape");
  const int64_t h = q.shape[2];
  require(n.kv > 0 && h % n.kv == 0, "pagedAttention", "H must be a multiple of KV");
  const int64_t group = h / n.kv;
  RefTensor out = like(q);
  std::vector<double> scores;
  std::vector<int64_t> slots;
  for (int64_t b = 0; b < n.b; ++b)
    for (int64_t i = 0; i < n.t; ++i) {
      int64_t p = static_cast<int64_t>(positions.data[b * n.t + i]);
      for (int64_t head = 0; head < h; ++head) {
        int64_t g = head / group;
        // The visible keys, gathered from the pages.
        slots.clear();
        int64_t first = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
        for (int64_t j = first, end = std::min(p + 1, n.maxBlocks * n.page); j < end; ++j) {
          int64_t slot = slotAt(n, blockTable, b, j, g);
          if (slot >= 0) slots.push_back(slot);
        }
        if (slots.empty()) continue; // padding, or nothing addressable: 0
        const double *qRow = &q.data[((b * n.t + i) * h + head) * n.d];
        scores.assign(slots.size(), 0.0);
        double m = -std::numeric_limits<double>::infinity();
        for (size_t j = 0; j < slots.size(); ++j) {
          double dot = 0.0;
          for (int64_t e = 0; e < n.d; ++e) dot += qRow[e] * kCache.data[slots[j] + e];
          scores[j] = softcap > 0 ? softcap * std::tanh(scale * dot / softcap) : scale * dot;
          m = std::max(m, scores[j]);
        }
        double sum = 0.0;
        for (double &s : scores) sum += (s = std::exp(s - m));
        double *o = &out.data[((b * n.t + i) * h + head) * n.d];
        for (size_t j = 0; j < slots.size(); ++j)
          for (int64_t e = 0; e < n.d; ++e) o[e] += scores[j] / sum * vCache.data[slots[j] + e];
      }
    }
  return out;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
// Float caches hold the values as casts do here (exactly); a cache of codes
// holds the codes' values (attribute `format`: which codes), read with
// their scales.
LLMC_REGISTER_EVALUATOR("llm.kv_cache_write", [](const RefCall &c) -> Results {
  if (const RefTensor *scales = c.optional(4))
    return kvCacheWriteCodes(c.in(0), *scales, c.in(1), c.in(2), c.in(3),
                             static_cast<quant::Format>(c.integer("format", 0)));
  return {kvCacheWrite(c.in(0), c.in(1), c.in(2), c.in(3))};
});
LLMC_REGISTER_EVALUATOR("llm.paged_attention", [](const RefCall &c) -> Results {
  double scale = c.real("scale");
  Results scales = c.variadic(5);
  if (scales.empty())
    return {pagedAttention(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), scale,
                           c.integer("window", 0), c.real("softcap", 0.0))};
  return {pagedAttention(c.in(0), dequantizeCache(c.in(1), scales.at(0)),
                         dequantizeCache(c.in(2), scales.at(1)), c.in(3), c.in(4), scale,
                         c.integer("window", 0), c.real("softcap", 0.0))};
});

} // namespace llmc::ref
