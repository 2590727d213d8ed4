//===- paged_attention.cpp - paged KV cache: write and attention ----------===//
//
// Inference keeps keys and values in pools of pages [NB, P, KV, D] instead
// of one [B, S, KV, D] tensor per batch, so sequences grow a page at a time
// and share nothing but the pool. A block table [B, M] names each
// sequence's pages; token position p of sequence b lives at page
// block_table[b, p/P], slot p % P. Positions [B, T] say where each token of
// this call sits (negative: padding). Positions that are unaddressable
// (p/P >= M, or a page id outside [0, NB)) are skipped by both kernels: the
// caller validates the table, the kernels only never touch memory outside
// their operands.
//
// kv_cache_write copies each token's [KV, D] row into its slot. It runs in
// place (out is the cache); bound to another buffer it copies the cache
// first.
//
// A cache narrower than the compute type is converted on the way in and
// widened on the way out, in the tile loads attention already does: bf16 or
// f16 under f32 (rounded to nearest even), or one-byte codes (int8 or fp8
// E4M3) with one fp32 scale per (token slot, kv head): s = absmax / 127 or
// / 448 over the head's D values, each code the rounding of x / s
// (common/KvCacheCodes.h). Attention multiplies each code's value by its
// slot's scale as it widens a key or value tile, so no dequantized copy of
// the cache exists beyond the 64-key tile. The f32 cache keeps its
// byte-copy write and its load loop unchanged.
//
// paged_attention is the decode hot path and memory bound: every key and
// value of a sequence's pages is read once per (sequence, kv head, chunk
// of up to 64 query rows), the rows being the chunk's tokens times the
// query heads that share the kv head. Decode (T = 1) thus reads each page
// once for all its GQA heads; a prefill chunk (T > 1) once for up to
// 64/group tokens. A task walks key tiles of 64 (gathered from however many
// pages they span, widened to contiguous fp32 rows), scores them against
// every row with a 4-key dot-product micro-kernel, masks keys past each
// row's own position (causal), and keeps an online softmax per row (running
// max m and sum l, the output rescaled by exp(m_old − m_new)); O += P·V is
// a tile GEMM. When (sequence, kv head, chunk) tasks are fewer than threads
// (one long decode), each task's keys are split into ranges whose partial
// m, l and O are merged afterwards (flash-decoding), so long contexts still
// use every core. All scratch is allocated at bind time.
//
//===----------------------------------------------------------------------===//

#include "common/KvCacheCodes.h"
#include "kernels/contracts/PagedAttention.h"
#include "kernels/cpu/Common.h"
#include "kernels/cpu/TileGemm.h"

#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace llmc::cpu {
namespace {

constexpr int64_t kRows = 64; // query rows (token × head) a task shares its key tiles across
constexpr int64_t kKeys = 64; // keys per tile

struct PagedDims {
  int64_t b = 0, t = 0, h = 0, kv = 0, d = 0, group = 1, blocks = 0, page = 1, maxBlocks = 0;
  float scale = 1.0f;
  int64_t window = 0; ///< position p sees (p − window, p]; 0: 0..p
  float softcap = 0.0f; ///< scores capped to c·tanh(s / c); 0: uncapped
};

PagedDims dimsOf(const contracts::PagedCacheBinding &b) {
  PagedDims n;
  n.b = b.b, n.t = b.t, n.h = b.h, n.kv = b.kv, n.d = b.d, n.group = b.group;
  n.blocks = b.blocks, n.page = b.page, n.maxBlocks = b.maxBlocks;
  n.scale = b.scale;
  n.window = b.window;
  n.softcap = b.softcap;
  return n;
}

/// The pool page holding position p of sequence b, or −1 when p is padding
/// or unaddressable.
inline int64_t pageOf(const PagedDims &n, const IdView &table, int64_t b, int64_t p) {
  if (p < 0 || p / n.page >= n.maxBlocks) return -1;
  int64_t page = table[b * n.maxBlocks + p / n.page];
  return page >= 0 && page < n.blocks ? page : -1;
}

//===----------------------------------------------------------------------===//
// kv_cache_write
//===----------------------------------------------------------------------===//

/// Dtype-blind: a token's [KV, D] row is copied as bytes.
class KvCacheWriteKernel final : public Kernel {
public:
  KvCacheWriteKernel(const KernelArgs &args, const PagedDims &dims)
      : cache_(args.inputs[0].data), fresh_(static_cast<const char *>(args.inputs[1].data)),
        out_(static_cast<char *>(args.outputs[0].data)), table_(args.inputs[2]),
        positions_(args.inputs[3]), n_(dims), cacheBytes_(args.inputs[0].bytes()),
        rowBytes_(static_cast<size_t>(dims.kv * dims.d) * dtypeSize(args.inputs[0].dtype)) {}

  void run(const StepContext &) override {
    if (out_ != cache_) copyBytes(out_, cache_, cacheBytes_);
    const int64_t rows = n_.b * n_.t;
    const bool parallel = rows * static_cast<int64_t>(rowBytes_) > 4 * kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t row = 0; row < rows; ++row) {
      int64_t b = row / n_.t, p = positions_[row], page = pageOf(n_, table_, b, p);
      if (page < 0) continue;
      std::memcpy(out_ + (page * n_.page + p % n_.page) * rowBytes_, fresh_ + row * rowBytes_,
                  rowBytes_);
    }
  }

private:
  const void *cache_;
  const char *fresh_;
  char *out_;
  IdView table_, positions_;
  PagedDims n_;
  size_t cacheBytes_, rowBytes_;
};

using kvcache::Fp8E4M3Code;

/// One token's D values of one kv head as codes and their scale
/// (common/KvCacheCodes.h, as ref::kvCacheWriteCodes computes them); an
/// all-zero row stores s = 0, codes 0.
template <typename Code, typename T>
inline void quantizeRow(const T *x, int64_t d, Code *codes, float *scale) {
  float absmax = 0.0f;
#pragma omp simd reduction(max : absmax)
  for (int64_t e = 0; e < d; ++e) absmax = std::max(absmax, std::fabs(load(x, e)));
  const float s = kvcache::rowScale<Code>(absmax);
  *scale = s;
  if (!(s > 0.0f)) {
    std::fill(codes, codes + d, Code{0});
    return;
  }
  for (int64_t e = 0; e < d; ++e) codes[e] = kvcache::CodeFormat<Code>::encode(load(x, e), s);
}

/// new [B, T, KV, D] of T into a cache of C (a narrower float, or codes
/// with a scale pool): each token's row converted into its slot.
template <typename T, typename C> class KvCacheConvertKernel final : public Kernel {
public:
  static constexpr bool kCodes = kvcache::kIsCode<C>;

  KvCacheConvertKernel(const KernelArgs &args, const PagedDims &dims)
      : cache_(args.inputs[0]), fresh_(args.inputs[1].as<T>()),
        out_(static_cast<C *>(args.outputs[0].data)), table_(args.inputs[2]),
        positions_(args.inputs[3]), n_(dims) {
    if constexpr (kCodes) {
      scales_ = args.inputs[4];
      outScales_ = args.outputs[1].as<float>();
    }
  }

  void run(const StepContext &) override {
    if (out_ != cache_.data) copyBytes(out_, cache_.data, cache_.bytes());
    if constexpr (kCodes)
      if (outScales_ != scales_.data) copyBytes(outScales_, scales_.data, scales_.bytes());
    const int64_t rows = n_.b * n_.t, rowElems = n_.kv * n_.d;
    const bool parallel = rows * rowElems * static_cast<int64_t>(sizeof(T)) > 4 * kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t row = 0; row < rows; ++row) {
      int64_t b = row / n_.t, p = positions_[row], page = pageOf(n_, table_, b, p);
      if (page < 0) continue;
      const int64_t slot = page * n_.page + p % n_.page;
      const T *src = fresh_ + row * rowElems;
      C *dst = out_ + slot * rowElems;
      if constexpr (kCodes) {
        for (int64_t g = 0; g < n_.kv; ++g)
          quantizeRow(src + g * n_.d, n_.d, dst + g * n_.d, outScales_ + slot * n_.kv + g);
      } else {
#pragma omp simd
        for (int64_t e = 0; e < rowElems; ++e) store(dst, e, load(src, e));
      }
    }
  }

private:
  TensorView cache_, scales_;
  const T *fresh_;
  C *out_;
  float *outScales_ = nullptr;
  IdView table_, positions_;
  PagedDims n_;
};

//===----------------------------------------------------------------------===//
// paged_attention
//===----------------------------------------------------------------------===//

/// s[r·lds + c] = q_r · k_c for `rows` query rows and `cols` key rows, both
/// contiguous fp32 rows of d. Four keys at a time share each query load and
/// keep four independent accumulators (a single dot product is latency
/// bound); K stays in L1 across the rows.
inline void scoreTile(int64_t rows, int64_t cols, int64_t d, const float *q, const float *k,
                      float *s, int64_t lds) {
  int64_t c4 = 0;
#if defined(__AVX2__) && defined(__FMA__)
  const int64_t d8 = d / 8 * 8;
  c4 = cols / 4 * 4;
  for (int64_t c = 0; c < c4; c += 4) {
    const float *k0 = k + c * d, *k1 = k0 + d, *k2 = k1 + d, *k3 = k2 + d;
    for (int64_t r = 0; r < rows; ++r) {
      const float *qr = q + r * d;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t e = 0; e < d8; e += 8) {
        __m256 x = _mm256_loadu_ps(qr + e);
        a0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k0 + e), a0);
        a1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k1 + e), a1);
        a2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k2 + e), a2);
        a3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k3 + e), a3);
      }
      // [Σa0, Σa1, Σa2, Σa3]: pairwise within 128-bit lanes, then across.
      __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
      __m128 sums = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
      float out[4];
      _mm_storeu_ps(out, sums);
      for (int64_t e = d8; e < d; ++e) {
        out[0] += qr[e] * k0[e], out[1] += qr[e] * k1[e];
        out[2] += qr[e] * k2[e], out[3] += qr[e] * k3[e];
      }
      std::memcpy(s + r * lds + c, out, sizeof(out));
    }
  }
#endif
  for (int64_t c = c4; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) {
      const float *qr = q + r * d, *kc = k + c * d;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t e = 0; e < d; ++e) sum += qr[e] * kc[e];
      s[r * lds + c] = sum;
    }
}

/// out[e] = codes[e]'s value · scale (common/KvCacheCodes.h): one key or
/// value row of codes widened to fp32, several codes per instruction: fp8
/// sixteen at a time through f16 (fp8::decodeE4M3x16), int8 eight at a
/// time, sign-extended, converted and scaled.
inline void widenCodes(const Fp8E4M3Code *codes, float scale, float *out, int64_t d) {
  int64_t e = 0;
#if defined(__AVX2__) && defined(__F16C__)
  const uint8_t *bytes = reinterpret_cast<const uint8_t *>(codes);
  for (; e + 16 <= d; e += 16) fp8::decodeE4M3x16(bytes + e, scale, out + e);
#endif
  for (; e < d; ++e) out[e] = kvcache::valueOf(codes[e], scale);
}
inline void widenCodes(const int8_t *codes, float scale, float *out, int64_t d) {
  int64_t e = 0;
#if defined(__AVX2__)
  const __m256 s = _mm256_set1_ps(scale);
  for (; e + 8 <= d; e += 8) {
    __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(codes + e));
    _mm256_storeu_ps(out + e, _mm256_mul_ps(s, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes))));
  }
#endif
  for (; e < d; ++e) out[e] = kvcache::valueOf(codes[e], scale);
}

/// q and out of T; the pools of C: T itself, a 16-bit float under an f32
/// T, or codes (with scale pools).
template <typename T, typename C> class PagedAttentionKernel final : public Kernel {
public:
  static constexpr bool kCodes = kvcache::kIsCode<C>;

  PagedAttentionKernel(const KernelArgs &args, const PagedDims &dims)
      : q_(args.inputs[0].as<T>()), k_(static_cast<const C *>(args.inputs[1].data)),
        v_(static_cast<const C *>(args.inputs[2].data)),
        kScales_(kCodes ? args.inputs[5].as<float>() : nullptr),
        vScales_(kCodes ? args.inputs[6].as<float>() : nullptr), out_(args.outputs[0].as<T>()),
        table_(args.inputs[3]), positions_(args.inputs[4]), n_(dims),
        tokens_(std::max<int64_t>(1, kRows / dims.group)), rows_(tokens_ * dims.group),
        chunks_((dims.t + tokens_ - 1) / tokens_), threads_(bindThreads()), splits_(chooseSplits()),
        scratch_(threads_, 2 * rows_ * dims.d + 2 * kKeys * dims.d + rows_ * kKeys + 2 * rows_),
        partial_(splits_ > 1 ? tasks() * splits_ * partialSize() : 0) {}

  void run(const StepContext &) override {
    const int64_t tasks = this->tasks(), splits = splits_;
    if (tasks == 0) return;
#pragma omp parallel num_threads(threads_)
    {
      float *scratch = scratch_.at(omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks * splits; ++task)
        chunk(task / splits, task % splits, scratch);
      if (splits > 1) {
#pragma omp for schedule(static)
        for (int64_t row = 0; row < tasks * rows_; ++row) merge(row / rows_, row % rows_);
      }
    }
  }

private:
  /// (sequence, kv head, chunk of tokens) triples.
  int64_t tasks() const { return n_.b * n_.kv * chunks_; }
  /// Floats of one task's partial result: m, l [rows] and O [rows × D].
  int64_t partialSize() const { return rows_ * (n_.d + 2); }

  /// Key ranges per task: 1 when the tasks alone fill the threads, else
  /// enough for every thread to have one (never more than the key tiles a
  /// sequence can have).
  int64_t chooseSplits() const {
    const int64_t tasks = this->tasks();
    if (tasks == 0 || tasks >= threads_) return 1;
    const int64_t maxTiles = (n_.maxBlocks * n_.page + kKeys - 1) / kKeys;
    return std::max<int64_t>(1, std::min((threads_ + tasks - 1) / tasks, maxTiles));
  }

  /// Where a task's tokens start and how many it has.
  struct Chunk {
    int64_t b, g, t0, tokens;
  };
  Chunk chunkOf(int64_t task) const {
    Chunk c;
    c.b = task / (n_.kv * chunks_);
    c.g = task / chunks_ % n_.kv;
    c.t0 = task % chunks_ * tokens_;
    c.tokens = std::min(tokens_, n_.t - c.t0);
    return c;
  }
  /// Offset of query row r (token r / group, head r % group of kv head g).
  int64_t queryAt(const Chunk &c, int64_t r) const {
    return ((c.b * n_.t + c.t0 + r / n_.group) * n_.h + c.g * n_.group + r % n_.group) * n_.d;
  }

  /// Keys j0 .. j0+cols of kv head g of sequence b, widened to contiguous
  /// rows; unaddressable keys read as 0 and are flagged in `valid`.
  void loadKeys(const Chunk &c, int64_t j0, int64_t cols, float *kw, float *vw, bool *valid) const {
    const int64_t d = n_.d;
    for (int64_t col = 0; col < cols; ++col) {
      int64_t j = j0 + col, page = pageOf(n_, table_, c.b, j);
      float *kRow = kw + col * d, *vRow = vw + col * d;
      valid[col] = page >= 0;
      if (page < 0) {
        std::fill(kRow, kRow + d, 0.0f);
        std::fill(vRow, vRow + d, 0.0f);
        continue;
      }
      const int64_t head = (page * n_.page + j % n_.page) * n_.kv + c.g, at = head * d;
      const C *kSrc = k_ + at, *vSrc = v_ + at;
      if constexpr (kCodes) {
        widenCodes(kSrc, kScales_[head], kRow, d);
        widenCodes(vSrc, vScales_[head], vRow, d);
      } else {
#pragma omp simd
        for (int64_t e = 0; e < d; ++e) {
          kRow[e] = load(kSrc, e);
          vRow[e] = load(vSrc, e);
        }
      }
    }
  }

  /// Task `task`'s key range `split`: its output rows, or with several
  /// ranges its partial m, l and O.
  void chunk(int64_t task, int64_t split, float *base) {
    const Chunk c = chunkOf(task);
    const int64_t d = n_.d, rows = c.tokens * n_.group;
    float *qs = base, *o = qs + rows_ * d, *kw = o + rows_ * d, *vw = kw + kKeys * d;
    float *s = vw + kKeys * d, *m = s + rows_ * kKeys, *l = m + rows_;

    // Each token's keys [keyBegin, keyEnd) (the window's start, its
    // position + 1); the chunk's keys span the smallest to the largest.
    std::array<int64_t, kRows> keyBegin, keyEnd;
    int64_t begin = std::numeric_limits<int64_t>::max(), end = 0;
    for (int64_t i = 0; i < c.tokens; ++i) {
      int64_t p = positions_[c.b * n_.t + c.t0 + i];
      keyEnd[i] = p < 0 ? 0 : std::min(p + 1, n_.maxBlocks * n_.page);
      keyBegin[i] = n_.window > 0 ? std::max<int64_t>(0, p - n_.window + 1) : 0;
      if (keyEnd[i] > keyBegin[i])
        begin = std::min(begin, keyBegin[i]);
      end = std::max(end, keyEnd[i]);
    }
    const int64_t startTile = end > 0 ? begin / kKeys : 0;
    const int64_t tiles = (end + kKeys - 1) / kKeys - startTile;
    const int64_t firstTile = startTile + tiles * split / splits_,
                  lastTile = startTile + tiles * (split + 1) / splits_;

    for (int64_t r = 0; r < rows; ++r) {
      const T *src = q_ + queryAt(c, r);
      float *dst = qs + r * d;
#pragma omp simd
      for (int64_t e = 0; e < d; ++e) dst[e] = n_.scale * load(src, e);
    }
    std::fill(o, o + rows * d, 0.0f);
    std::fill(m, m + rows, kNegInf);
    std::fill(l, l + rows, 0.0f);

    bool valid[kKeys];
    for (int64_t tile = firstTile; tile < lastTile; ++tile) {
      const int64_t j0 = tile * kKeys, cols = std::min(kKeys, end - j0);
      loadKeys(c, j0, cols, kw, vw, valid);
      const bool allValid = std::all_of(valid, valid + cols, [](bool x) { return x; });
      scoreTile(rows, cols, d, qs, kw, s, kKeys);
      for (int64_t r = 0; r < rows; ++r) {
        float *sr = s + r * kKeys;
        const int64_t visible = std::min(cols, keyEnd[r / n_.group] - j0);
        if (visible <= 0) { // past this row's position: P = 0, nothing to update
          std::fill(sr, sr + cols, 0.0f);
          continue;
        }
        if (n_.softcap > 0.0f) // attention's soft-cap, before the masks
          for (int64_t col = 0; col < cols; ++col)
            sr[col] = n_.softcap * std::tanh(sr[col] / n_.softcap);
        for (int64_t col = visible; col < cols; ++col) sr[col] = kNegInf;
        for (int64_t col = 0; col < std::min(cols, keyBegin[r / n_.group] - j0); ++col)
          sr[col] = kNegInf; // behind the row's window
        if (!allValid)
          for (int64_t col = 0; col < visible; ++col)
            if (!valid[col]) sr[col] = kNegInf;
        float tileMax = kNegInf;
#pragma omp simd reduction(max : tileMax)
        for (int64_t col = 0; col < cols; ++col) tileMax = std::max(tileMax, sr[col]);
        const float mNew = std::max(m[r], tileMax);
        const float safe = mNew == kNegInf ? 0.0f : mNew; // nothing visible yet: P = 0, not NaN
        const float alpha = expFast(m[r] - safe);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t col = 0; col < cols; ++col) {
          float p = expFast(sr[col] - safe);
          sr[col] = p;
          sum += p;
        }
        l[r] = l[r] * alpha + sum;
        m[r] = mNew;
        if (alpha != 1.0f) {
          float *orow = o + r * d;
#pragma omp simd
          for (int64_t e = 0; e < d; ++e) orow[e] *= alpha;
        }
      }
      tileGemm(rows, d, cols, s, kKeys, vw, d, o, d, true); // O += P·V
    }

    if (splits_ == 1) {
      for (int64_t r = 0; r < rows; ++r) finishRow(out_ + queryAt(c, r), o + r * d, l[r]);
      return;
    }
    float *partial = partial_.data() + (task * splits_ + split) * partialSize();
    std::copy(m, m + rows, partial);
    std::copy(l, l + rows, partial + rows_);
    std::copy(o, o + rows * d, partial + 2 * rows_);
  }

  /// Row r of task `task` from its key ranges' partial results.
  void merge(int64_t task, int64_t r) {
    const Chunk c = chunkOf(task);
    if (r >= c.tokens * n_.group) return;
    const int64_t d = n_.d;
    float *first = partial_.data() + task * splits_ * partialSize();
    float mMax = kNegInf;
    for (int64_t split = 0; split < splits_; ++split)
      mMax = std::max(mMax, first[split * partialSize() + r]);
    float *o = first + 2 * rows_ + r * d; // range 0's O becomes the sum
    float l = 0.0f;
    if (mMax != kNegInf)
      for (int64_t split = 0; split < splits_; ++split) {
        const float *part = first + split * partialSize();
        const float weight = expFast(part[r] - mMax); // 0 for a range that saw no key
        l += weight * part[rows_ + r];
        if (split == 0) {
#pragma omp simd
          for (int64_t e = 0; e < d; ++e) o[e] *= weight;
          continue;
        }
        const float *po = part + 2 * rows_ + r * d;
#pragma omp simd
        for (int64_t e = 0; e < d; ++e) o[e] += weight * po[e];
      }
    finishRow(out_ + queryAt(c, r), o, l);
  }

  /// out = O / l, or 0 for a row that saw no key.
  void finishRow(T *dst, const float *o, float l) const {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma omp simd
    for (int64_t e = 0; e < n_.d; ++e) store(dst, e, o[e] * inv);
  }

  const T *q_;
  const C *k_, *v_;
  const float *kScales_, *vScales_; ///< code pools' [NB, P, KV] scales
  T *out_;
  IdView table_, positions_;
  PagedDims n_;
  int64_t tokens_; ///< tokens per chunk
  int64_t rows_;   ///< query rows per chunk, tokens × group
  int64_t chunks_; ///< chunks per (sequence, kv head)
  int threads_;
  int64_t splits_;             ///< key ranges per task
  ThreadScratch scratch_;      // scaled Q, O, widened K and V tiles, scores, m, l
  std::vector<float> partial_; // [task, split] → m, l [rows], O [rows × D]
};

//===----------------------------------------------------------------------===//
// Factories
//===----------------------------------------------------------------------===//

/// K<T, C> for the compute type T and the cache type the contract allowed:
/// T itself, bf16 or f16 under f32, or int8 or fp8 E4M3 codes.
template <template <typename, typename> class K, typename T>
std::unique_ptr<Kernel> makeForCache(const contracts::PagedCacheBinding &b,
                                     const KernelArgs &args) {
  const PagedDims dims = dimsOf(b);
  if (b.quantized && b.codes == quant::Format::Fp8E4M3)
    return std::make_unique<K<T, Fp8E4M3Code>>(args, dims);
  if (b.quantized)
    return std::make_unique<K<T, int8_t>>(args, dims);
  if constexpr (std::is_same_v<T, float>) {
    if (b.cacheDType == DType::BF16)
      return std::make_unique<K<float, bf16>>(args, dims);
    if (b.cacheDType == DType::F16)
      return std::make_unique<K<float, f16>>(args, dims);
  }
  return std::make_unique<K<T, T>>(args, dims);
}

template <template <typename, typename> class K>
std::unique_ptr<Kernel> makeFor(const contracts::PagedCacheBinding &b, const KernelArgs &args) {
  return dispatchFloat<FloatTypes>(b.dtype, [&](auto compute) {
    return makeForCache<K, typename decltype(compute)::type>(b, args);
  });
}

std::unique_ptr<Kernel> makeKvCacheWrite(const KernelArgs &args, std::string &error) {
  contracts::PagedCacheBinding b;
  if (!contracts::bindKvCacheWrite(args, error, &b)) return nullptr;
  // A cache of new's type takes its rows as bytes.
  if (b.cacheDType == b.dtype) return std::make_unique<KvCacheWriteKernel>(args, dimsOf(b));
  return makeFor<KvCacheConvertKernel>(b, args);
}

std::unique_ptr<Kernel> makePagedAttention(const KernelArgs &args, std::string &error) {
  contracts::PagedCacheBinding b;
  if (!contracts::bindPagedAttention(args, error, &b)) return nullptr;
  return makeFor<PagedAttentionKernel>(b, args);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "kv_cache_write", makeKvCacheWrite);
LLMC_REGISTER_KERNEL(CPU, "paged_attention", makePagedAttention);

} // namespace llmc::cpu
