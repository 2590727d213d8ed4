//===- PagedAttention.cpp - binding contract of the paged KV cache --------===//
//
// Part of llmc: see PagedAttention.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/PagedAttention.h"
#include "kernels/Validator.h"

namespace llmc::contracts {
namespace {

/// Checks a cache pool [NB, P, KV, D] named `what`; fills the pool's dims.
bool checkCache(Validator &v, const TensorView &cache, const char *what, PagedCacheBinding *dims) {
  if (!v.isFloat(cache, what) || !v.hasRank(cache, what, 4)) return false;
  dims->blocks = cache.dim(0), dims->page = cache.dim(1);
  dims->kv = cache.dim(2), dims->d = cache.dim(3);
  if (dims->page < 1)
    return v.fail(std::string(what) + " must be [NB, P, KV, D] with a page size P >= 1, got " +
                  cache.describe());
  return true;
}

/// Checks block_table [B, M] and positions [B, T] (inputs `index`,
/// `index` + 1) against dims->b and dims->t; fills M and the index dtypes.
bool checkPages(Validator &v, size_t index, PagedCacheBinding *dims) {
  const TensorView &table = v.in(index), &positions = v.in(index + 1);
  if (!v.isIndex(table, "block_table") || !v.hasRank(table, "block_table", 2)) return false;
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

} // namespace

bool bindKvCacheWrite(const KernelArgs &args, std::string &error, PagedCacheBinding *out) {
  Validator v("kv_cache_write", args, error);
  PagedCacheBinding dims;
  if (!v.arity(4, 1)) return false;
  const TensorView &cache = v.in(0), &fresh = v.in(1);
  if (!checkCache(v, cache, "cache", &dims) || !v.hasDType(fresh, "new", cache.dtype) ||
      !v.hasRank(fresh, "new", 4))
    return false;
  if (fresh.dim(2) != dims.kv || fresh.dim(3) != dims.d)
    return v.fail("new must be [B, T, KV, D] with cache's KV and D: cache is " + cache.describe() +
                  ", new is " + fresh.describe());
  dims.dtype = cache.dtype;
  dims.b = fresh.dim(0), dims.t = fresh.dim(1), dims.h = dims.kv;
  if (!checkPages(v, 2, &dims) || !v.hasType(v.out(0), "out", cache.dtype, cache.shape))
    return false;
  *out = dims;
  return true;
}

bool bindPagedAttention(const KernelArgs &args, std::string &error, PagedCacheBinding *out) {
  Validator v("paged_attention", args, error);
  PagedCacheBinding dims;
  double scale;
  if (!v.arity(5, 1) || !v.floatAttr("scale", &scale)) return false;
  dims.scale = static_cast<float>(scale);
  const TensorView &q = v.in(0), &k = v.in(1), &val = v.in(2);
  if (!v.isFloat(q, "q") || !v.hasRank(q, "q", 4) || !v.hasDType(k, "k_cache", q.dtype) ||
      !checkCache(v, k, "k_cache", &dims) || !v.hasType(val, "v_cache", q.dtype, k.shape))
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
  if (!checkPages(v, 3, &dims) || !v.hasType(v.out(0), "out", q.dtype, q.shape)) return false;
  *out = dims;
  return true;
}

} // namespace llmc::contracts
