//===- PagedAttention.h - binding contract of the paged KV cache -*- C++ -*-===//
//
// The checks and derived dimensions of kv_cache_write (new keys or values
// [B, T, KV, D] scattered into a pool of pages [NB, P, KV, D] through a
// block table [B, M] at token positions [B, T]) and of paged_attention
// (q [B, T, H, D] attending causally to the keys of its own sequence held
// in such a pool), shared by the CPU factories (kernels/cpu/
// paged_attention.cpp) and the CUDA ones (kernels/cuda/paged_attention.cu,
// which add their head-dim and grid limits).
//
// A pool holds the compute type (new's, q's), a 16-bit float under f32, or
// one-byte codes (u8 buffers) with a scale pool [NB, P, KV] f32 per pool:
// kv_cache_write(codes, new, block_table, positions, scales) ->
// (codes', scales') and paged_attention(q, k_codes, v_codes, block_table,
// positions, k_scales, v_scales) -> out. Attribute `format` says what the
// codes are (common/QuantScheme.h's numbers, common/KvCacheCodes.h's
// arithmetic): 0 int8 (two's complement; also when absent), 2 fp8_e4m3.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_PAGEDATTENTION_H
#define LLMC_KERNELS_CONTRACTS_PAGEDATTENTION_H

#include "common/QuantScheme.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"
#include "kernels/contracts/Attention.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

/// kv_cache_write(cache, new, block_table, positions) -> cache' and
/// paged_attention(q, k_cache, v_cache, block_table, positions) -> out.
struct PagedCacheBinding {
  DType dtype = DType::F32;      ///< the compute type: new's (kv_cache_write), q's
  DType cacheDType = DType::F32; ///< the pools': dtype, BF16/F16 under F32, or U8 (codes)
  bool quantized = false;        ///< one-byte codes with scale pools
  /// The codes' format (attribute `format`): Int8 or Fp8E4M3.
  quant::Format codes = quant::Format::Int8;
  int64_t b = 0, t = 0;     ///< batch rows and tokens per row
  int64_t h = 0;            ///< query heads (paged_attention; KV for kv_cache_write)
  int64_t kv = 0, d = 0;
  int64_t group = 1;     ///< query heads per kv head, H / KV
  int64_t blocks = 0;    ///< NB, pages in the pool
  int64_t page = 0;      ///< P, tokens per page
  int64_t maxBlocks = 0; ///< M, pages a sequence may address
  float scale = 1.0f;
  /// paged_attention's sliding window (attribute `window`): position p
  /// sees positions (p − window, p]; 0: all of 0..p.
  int64_t window = 0;
  /// paged_attention's score soft-cap (attribute `softcap`; 0: none), as
  /// attention's.
  float softcap = 0.0f;
  DType tableDType = DType::I32;    ///< block_table's (i32 or i64)
  DType positionDType = DType::I32; ///< positions' (i32 or i64)
};
inline bool bindKvCacheWrite(const KernelArgs &args, std::string &error, PagedCacheBinding *out);
inline bool bindPagedAttention(const KernelArgs &args, std::string &error, PagedCacheBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace paged_attention_impl {

/// Whether a pool of `cache` may hold values computed in `compute`: the
/// compute type, a 16-bit float under f32, or codes (u8).
inline bool cacheTypeAllowed(DType compute, DType cache) {
  return cache == compute || cache == DType::U8 ||
         (compute == DType::F32 && (cache == DType::BF16 || cache == DType::F16));
}

/// Checks that a cache pool named `what` may serve `compute` (named
/// `computeName`); sets dims->cacheDType and dims->quantized.
inline bool checkCacheType(Validator &v, const TensorView &cache, const char *what, DType compute,
                           const char *computeName, PagedCacheBinding *dims) {
  if (!cacheTypeAllowed(compute, cache.dtype)) {
    std::string allowed = std::string(dtypeName(compute)) + " (" + computeName + "'s type)" +
                          (compute == DType::F32 ? ", bf16, f16" : "") + " or u8 (codes)";
    return v.fail(std::string(what) + " must be " + allowed + ", got " + cache.describe());
  }
  dims->cacheDType = cache.dtype;
  dims->quantized = cache.dtype == DType::U8;
  return true;
}

/// Reads attribute `format`, the codes' format of a u8 pool: int8 (0, or
/// absent) or fp8_e4m3 (2); a float pool takes none.
inline bool checkCodeFormat(Validator &v, PagedCacheBinding *dims) {
  int64_t format = -1;
  if (!v.intAttr("format", &format, -1))
    return false;
  if (!dims->quantized) {
    if (format != -1)
      return v.fail(std::string("attribute 'format' applies to caches of codes (u8), got a "
                                "cache of ") +
                    dtypeName(dims->cacheDType));
    return true;
  }
  if (format == -1)
    format = static_cast<int64_t>(quant::Format::Int8);
  if (format != static_cast<int64_t>(quant::Format::Int8) &&
      format != static_cast<int64_t>(quant::Format::Fp8E4M3))
    return v.fail("attribute 'format' of a u8 cache must be 0 (int8) or 2 (fp8_e4m3), got " +
                  std::to_string(format));
  dims->codes = static_cast<quant::Format>(format);
  return true;
}

/// Checks a scale pool [NB, P, KV] f32 of a code pool `cache`.
inline bool checkScales(Validator &v, const TensorView &scales, const char *what,
                        const TensorView &cache) {
  return v.hasType(scales, what, DType::F32, {cache.dim(0), cache.dim(1), cache.dim(2)});
}

/// Checks a cache pool [NB, P, KV, D] named `what`; fills the pool's dims.
inline bool checkCache(Validator &v, const TensorView &cache, const char *what,
                       PagedCacheBinding *dims) {
  if (cache.dtype != DType::U8 && !v.isFloat(cache, what))
    return false;
  if (!v.hasRank(cache, what, 4))
    return false;
  dims->blocks = cache.dim(0), dims->page = cache.dim(1);
  dims->kv = cache.dim(2), dims->d = cache.dim(3);
  if (dims->page < 1)
    return v.fail(std::string(what) + " must be [NB, P, KV, D] with a page size P >= 1, got " +
                  cache.describe());
  return true;
}

/// Checks block_table [B, M] and positions [B, T] (inputs `index`,
/// `index` + 1) against dims->b and dims->t; fills M and the index dtypes.
inline bool checkPages(Validator &v, size_t index, PagedCacheBinding *dims) {
  const TensorView &table = v.in(index), &positions = v.in(index + 1);
  if (!v.isIndex(table, "block_table") || !v.hasRank(table, "block_table", 2))
    return false;
  if (table.dim(0) != dims->b)
    return v.fail("block_table must be [B, M] with B = " + std::to_string(dims->b) + ", got " +
                  table.describe());
  if (!v.isIndex(positions, "positions") ||
      !v.hasType(positions, "positions", positions.dtype, {dims->b, dims->t}))
    return false;
  dims->maxBlocks = table.dim(1);
  dims->tableDType = table.dtype;
  dims->positionDType = positions.dtype;
  return true;
}

} // namespace paged_attention_impl
using namespace paged_attention_impl;

inline bool bindKvCacheWrite(const KernelArgs &args, std::string &error, PagedCacheBinding *out) {
  Validator v("kv_cache_write", args, error);
  PagedCacheBinding dims;
  // A cache of codes (u8) comes with its scale pool, in and out.
  const bool quantized = !args.inputs.empty() && args.inputs[0].dtype == DType::U8;
  if (quantized && args.inputs.size() != 5)
    return v.fail("a cache of codes (u8) takes its scale pool [NB, P, KV] f32 as input 5 "
                  "and output 2: expected 5 inputs, got " +
                  std::to_string(args.inputs.size()));
  if (!v.arity(quantized ? 5 : 4, quantized ? 2 : 1))
    return false;
  const TensorView &cache = v.in(0), &fresh = v.in(1);
  if (!checkCache(v, cache, "cache", &dims) || !v.isFloat(fresh, "new") ||
      !v.hasRank(fresh, "new", 4) ||
      !checkCacheType(v, cache, "cache", fresh.dtype, "new", &dims) || !checkCodeFormat(v, &dims))
    return false;
  if (fresh.dim(2) != dims.kv || fresh.dim(3) != dims.d)
    return v.fail("new must be [B, T, KV, D] with cache's KV and D: cache is " + cache.describe() +
                  ", new is " + fresh.describe());
  dims.dtype = fresh.dtype;
  dims.b = fresh.dim(0), dims.t = fresh.dim(1), dims.h = dims.kv;
  if (!checkPages(v, 2, &dims) || !v.hasType(v.out(0), "out", cache.dtype, cache.shape))
    return false;
  if (quantized &&
      (!checkScales(v, v.in(4), "scales", cache) || !checkScales(v, v.out(1), "out scales", cache)))
    return false;
  *out = dims;
  return true;
}

inline bool bindPagedAttention(const KernelArgs &args, std::string &error, PagedCacheBinding *out) {
  Validator v("paged_attention", args, error);
  PagedCacheBinding dims;
  double scale;
  // Pools of codes (u8) come with their scale pools, the keys' then the
  // values'.
  const bool quantized = args.inputs.size() > 1 && args.inputs[1].dtype == DType::U8;
  if (quantized && args.inputs.size() != 7)
    return v.fail("caches of codes (u8) take their scale pools [NB, P, KV] f32 as inputs 6 "
                  "and 7: expected 7 inputs, got " +
                  std::to_string(args.inputs.size()));
  if (!v.arity(quantized ? 7 : 5, 1) || !v.floatAttr("scale", &scale) ||
      !v.intAttr("window", &dims.window, 0) || !checkSoftcap(v, &dims.softcap))
    return false;
  if (dims.window < 0)
    return v.fail("attribute 'window' must be >= 0, got " + std::to_string(dims.window));
  dims.scale = static_cast<float>(scale);
  const TensorView &q = v.in(0), &k = v.in(1), &val = v.in(2);
  if (!v.isFloat(q, "q") || !v.hasRank(q, "q", 4) || !checkCache(v, k, "k_cache", &dims) ||
      !checkCacheType(v, k, "k_cache", q.dtype, "q", &dims) || !checkCodeFormat(v, &dims) ||
      !v.hasType(val, "v_cache", k.dtype, k.shape))
    return false;
  if (quantized &&
      (!checkScales(v, v.in(5), "k_scales", k) || !checkScales(v, v.in(6), "v_scales", k)))
    return false;
  dims.dtype = q.dtype;
  dims.b = q.dim(0), dims.t = q.dim(1), dims.h = q.dim(2);
  if (q.dim(3) != dims.d)
    return v.fail("k_cache must be [NB, P, KV, D] with q's D: q is " + q.describe() +
                  ", k_cache is " + k.describe());
  if (dims.kv <= 0 || dims.h % dims.kv != 0)
    return v.fail("query heads H = " + std::to_string(dims.h) +
                  " must be a multiple of kv heads KV = " + std::to_string(dims.kv));
  dims.group = dims.h / dims.kv;
  if (!checkPages(v, 3, &dims) || !v.hasType(v.out(0), "out", q.dtype, q.shape))
    return false;
  *out = dims;
  return true;
}

} // namespace llmc::contracts

#endif
