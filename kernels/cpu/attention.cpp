//===- attention.cpp - fused (flash-style) attention and its backward -----===//
//
// softmax(scale·q·kᵀ + mask)·v for q [B,T,H,D], k, v [B,S,KV,D], where
// query head h reads kv head h/(H/KV) (multi-head, grouped-query and
// multi-query alike), masked by `causal` (key j visible to query i iff
// j <= i; with a sliding `window`, iff i − window < j <= i) and optional
// segment ids (keys of another packed sequence are
// invisible). A `softcap` c replaces each score s by c·tanh(s / c) before
// the masks (Gemma 2). Besides the output, the per-row log-sum-exp [B,H,T]
// is kept for the backward.
//
// Forward: one task per (b, h, tile of kBr queries). The task walks key
// tiles of kBc with an online softmax — running max m and sum l per query,
// the partial output rescaled by exp(m_old − m_new) — so the T×S score
// matrix never exists, only one tile of it in per-thread scratch. Causal
// tasks stop at the diagonal, windowed ones start at the window, and every
// pass skips the tiles that segment ids hide entirely (SegmentTiles.h), so packed documents cost Σ
// s_i².
//
// Backward, with P = exp(scale·q·kᵀ − lse) recomputed per tile and
// Dᵢ = rowsum(dout ∘ out) precomputed:
//   dV += Pᵀ·dO,  dS = P ∘ (dO·Vᵀ − D),  dK += scale·dSᵀ·Q,  dQ += scale·dS·K,
// where under a soft-cap P comes from the capped scores and dS is further
// multiplied by the cap's slope 1 − tanh² = 1 − (capped / c)².
// To avoid atomics (and keep results deterministic) it runs two passes:
// pass A owns one kv tile per task and loops over every query head of its
// group and every query tile, accumulating dK and dV; pass B owns a query
// tile and loops over key tiles for dQ. P and dS are recomputed in both (7
// tile GEMMs instead of 5), which costs less than synchronising dQ.
//
// Layout: each task transposes its *own* operand once (q/dout tiles for the
// forward and pass B, k/v tiles for pass A) and copies the tiles it iterates
// over as plain contiguous rows. Scores are
// therefore computed key-major (Sᵀ = K·Qᵀ, softmax vectorised across
// queries) in the forward and pass B, query-major in pass A, and the
// products that need the other orientation use TileGemm's transposed-A
// form — no per-tile transposes. Everything is fp32 inside, for f32 or
// bf16 storage, and all scratch is allocated at bind time.
//
// Packed (attention_packed, _grad): q, k and v are column blocks of one
// qkv [B,T,(H+2·KV)·D] (GPT-2's c_attn output) and dq, dk, dv those of one
// dqkv. Since every tile is copied into scratch anyway, only the rows'
// stride and the blocks' offsets change; the arithmetic is the same
// instruction for instruction, so the packed kernels' results are the
// unpacked ones bit for bit, without slicing qkv or padding and summing
// the three gradients.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Attention.h"
#include "kernels/cpu/Common.h"
#include "kernels/cpu/RopeRotate.h"
#include "kernels/cpu/SegmentTiles.h"
#include "kernels/cpu/TileGemm.h"

#include <tuple>

namespace llmc::cpu {
namespace {

constexpr int64_t kBr = 64; // query rows per tile (multiple of 4)
constexpr int64_t kBc = 64; // keys per tile (multiple of 16)
static_assert(kBr == kBc, "the backward carves one scratch layout for both passes");

struct AttentionDims {
  int64_t b = 0, t = 0, h = 0, d = 0, s = 0, kv = 0, group = 1;
  int64_t queryStride = 0, keyStride = 0; ///< elements between rows (b, t) of q and of k, v
  float scale = 1.0f;
  bool causal = false;
  int64_t window = 0; ///< causal: keys in (i − window, i]; 0: all up to i
  float softcap = 0.0f; ///< scores capped to c·tanh(s / c); 0: uncapped
  bool segments = false;
  bool rope = false; ///< attention_rope: q and k (dq, dk) rotated
};

/// The kernels' dimensions of a binding.
AttentionDims dimsOf(const contracts::AttentionBinding &b) {
  AttentionDims dims;
  dims.b = b.b, dims.t = b.t, dims.h = b.h, dims.d = b.d, dims.s = b.s, dims.kv = b.kv;
  dims.group = b.group;
  dims.queryStride = b.queryStride(), dims.keyStride = b.keyStride();
  dims.scale = b.scale;
  dims.causal = b.causal;
  dims.window = b.window;
  dims.softcap = b.softcap;
  dims.segments = b.segments;
  dims.rope = b.rope;
  return dims;
}

/// attention_rope's rotation: rope's cos/sin tables for positions 0..T−1
/// (the same contracts::ropeTables rope builds), forward and inverse, and
/// the positions input if any.
struct Rotation {
  IdView positions; // null data: position t
  int64_t t = 0, rows = 0, half = 0;
  std::vector<float> cos, sin, sinInverse;

  void bind(const KernelArgs &args, const contracts::AttentionBinding &b) {
    if (!b.rope) return;
    if (b.rotation.positions) positions = IdView(args.inputs[b.positionIndex]);
    t = b.t, rows = b.rotation.rows, half = b.d / 2;
    cos.resize(rows * half), sin.resize(rows * half), sinInverse.resize(rows * half);
    contracts::RopeBinding inverse = b.rotation;
    inverse.inverse = true;
    contracts::ropeTables(b.rotation, b.d, cos.data(), sin.data());
    contracts::ropeTables(inverse, b.d, cos.data(), sinInverse.data());
  }
  /// The table row of (b, i), or −1 outside the table.
  int64_t row(int64_t b, int64_t i) const {
    int64_t p = positions.data ? positions[b * t + i] : i;
    return p < 0 || p >= rows ? -1 : p;
  }
};

/// Under a causal mask later query tiles see more keys: handing them out
/// first balances the dynamic schedule.
inline int64_t lastTilesFirst(int64_t tile, int64_t tiles, bool causal) {
  return causal ? tiles - 1 - tile : tile;
}

/// Tile loading and masking shared by the forward and both backward passes.
template <typename T> struct AttentionTiles {
  AttentionDims n;
  IdView segmentIds;
  SegmentTiles segmentTiles;
  Rotation rotation;

  /// Binds the segment ids, if any, and sizes their tile ranges.
  void bindSegments(const KernelArgs &args, size_t index) {
    if (!n.segments) return;
    segmentIds = IdView(args.inputs[index]);
    segmentTiles.resize(n.b, n.t, kBr);
  }
  /// Reads this step's segment ids; run() calls it before any tile.
  void readSegments() {
    if (n.segments) segmentTiles.update(segmentIds);
  }
  /// Whether segments or the window hide every score of query tile i0
  /// from key tile j0 (the window: its last key is at or before i0 − window,
  /// out of reach of the tile's first and so of every query).
  bool hidden(int64_t b, int64_t i0, int64_t j0) const {
    return (n.window > 0 && j0 + kBc - 1 <= i0 - n.window) ||
           (n.segments && !segmentTiles.meet(b, i0, j0));
  }

  /// Offset of query row i of head h in q (dq), in out (dout), and of key
  /// row j of kv head g in k, v (dk, dv).
  int64_t queryAt(int64_t b, int64_t i, int64_t h) const {
    return (b * n.t + i) * n.queryStride + h * n.d;
  }
  int64_t outAt(int64_t b, int64_t i, int64_t h) const { return ((b * n.t + i) * n.h + h) * n.d; }
  int64_t keyAt(int64_t b, int64_t j, int64_t g) const {
    return (b * n.s + j) * n.keyStride + g * n.d;
  }

  /// Row (b, i) of D elements at src in fp32: as stored or, for q and k of
  /// attention_rope (`rotated`), rotated and rounded to T as rope stores it
  /// (NaN at a position outside the table, as rope writes).
  void loadRow(const T *src, int64_t b, int64_t i, bool rotated, float *dst) const {
    if (!rotated) {
#pragma omp simd
      for (int64_t e = 0; e < n.d; ++e) dst[e] = load(src, e);
      return;
    }
    const int64_t half = rotation.half, p = rotation.row(b, i);
    if (p < 0) {
      std::fill(dst, dst + n.d, kNaN);
      return;
    }
    rotatePairs(src, rotation.cos.data() + p * half, rotation.sin.data() + p * half, half,
                [&](int64_t e, float lo, float hi) {
                  dst[e] = roundTo<T>(lo);
                  dst[e + half] = roundTo<T>(hi);
                });
  }

  /// Stores factor·values, the gradient row (b, i), to dst rounded to T;
  /// for dq and dk of attention_rope (`rotated`) then rotated back and
  /// rounded again, as the inverse rope after attention_grad stores it.
  /// `row` is D floats of scratch.
  void storeRow(T *dst, const float *values, float factor, int64_t b, int64_t i, bool rotated,
                float *row) const {
    if (!rotated) {
#pragma omp simd
      for (int64_t e = 0; e < n.d; ++e) store(dst, e, factor * values[e]);
      return;
    }
    const int64_t half = rotation.half, p = rotation.row(b, i);
    for (int64_t e = 0; e < n.d; ++e) row[e] = p < 0 ? kNaN : roundTo<T>(factor * values[e]);
    rotatePairs(row, rotation.cos.data() + std::max<int64_t>(p, 0) * half,
                rotation.sinInverse.data() + std::max<int64_t>(p, 0) * half, half,
                [&](int64_t e, float lo, float hi) {
                  store(dst, e, lo);
                  store(dst, e + half, hi);
                });
  }

  /// `count` rows of D elements `stride` apart, from row (b, i0) on, copied
  /// to dst [count × D] in fp32. Even for f32 the contiguous copy pays for
  /// itself: the rows sit H·D (packed: (H+2·KV)·D) apart, and the tile
  /// GEMMs then stream from L1.
  const float *rows(const T *x, int64_t stride, int64_t b, int64_t i0, int64_t count,
                    bool rotated, float *dst) const {
    for (int64_t r = 0; r < count; ++r) loadRow(x + r * stride, b, i0 + r, rotated, dst + r * n.d);
    return dst;
  }
  /// Query rows of q (rotated under attention_rope) and of dout.
  const float *queryRows(const T *x, int64_t b, int64_t h, int64_t i0, int64_t count,
                         float *dst) const {
    return rows(x + queryAt(b, i0, h), n.queryStride, b, i0, count, n.rope, dst);
  }
  const float *outRows(const T *x, int64_t b, int64_t h, int64_t i0, int64_t count,
                       float *dst) const {
    return rows(x + outAt(b, i0, h), n.h * n.d, b, i0, count, false, dst);
  }
  /// Key rows of k (`rotated` under attention_rope) or v.
  const float *keyRows(const T *x, int64_t b, int64_t g, int64_t j0, int64_t count, bool rotated,
                       float *dst) const {
    return rows(x + keyAt(b, j0, g), n.keyStride, b, j0, count, rotated, dst);
  }

  /// The same rows transposed and scaled: dst[e·ld + r] = factor·x[r][e];
  /// `row` is D floats of scratch.
  void transposed(const T *x, int64_t stride, int64_t b, int64_t i0, int64_t count, bool rotated,
                  float factor, float *dst, int64_t ld, float *row) const {
    for (int64_t r = 0; r < count; ++r) {
      loadRow(x + r * stride, b, i0 + r, rotated, row);
      for (int64_t e = 0; e < n.d; ++e) dst[e * ld + r] = factor * row[e];
    }
  }

  /// The soft-cap, if any, on an outer × inner tile s[o·ld + i]:
  /// s ← c·tanh(s / c). Runs before mask(), so every score is finite.
  void capScores(float *s, int64_t ld, int64_t outer, int64_t inner) const {
    if (n.softcap <= 0.0f)
      return;
    const float cap = n.softcap, inverse = 1.0f / n.softcap;
    for (int64_t o = 0; o < outer; ++o) {
      float *line = s + o * ld;
      for (int64_t i = 0; i < inner; ++i) line[i] = cap * std::tanh(line[i] * inverse);
    }
  }
  /// d capped / d score at a capped score: 1 − tanh² (1 without a cap). A
  /// masked score (−inf) has P = 0; its slope is taken as 1 so 0·slope
  /// stays 0.
  float capSlope(float capped, float p) const {
    if (n.softcap <= 0.0f || p == 0.0f)
      return 1.0f;
    const float t = capped / n.softcap;
    return 1.0f - t * t;
  }

  /// Exclusive end of the keys any query of [i0, i0+rows) may see.
  int64_t keyEnd(int64_t i0, int64_t rows) const { return n.causal ? i0 + rows : n.s; }

  /// Sets the hidden scores of a rows × cols tile to −inf; the tile is
  /// s[r·ld + c], or s[c·ld + r] when `keyMajor`.
  void mask(float *s, int64_t ld, bool keyMajor, int64_t b, int64_t i0, int64_t rows, int64_t j0,
            int64_t cols) const {
    auto at = [&](int64_t r, int64_t c) -> float & {
      return keyMajor ? s[c * ld + r] : s[r * ld + c];
    };
    if (n.causal && j0 + cols - 1 > i0) // the tile reaches past the diagonal
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = std::max<int64_t>(0, i0 + r + 1 - j0); c < cols; ++c) at(r, c) = kNegInf;
    if (n.window > 0 && j0 <= i0 + rows - 1 - n.window) // the tile reaches behind a window
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < std::min(cols, i0 + r - n.window + 1 - j0); ++c) at(r, c) = kNegInf;
    if (!n.segments) return;
    int64_t rowSegment[kBr], colSegment[kBc];
    for (int64_t r = 0; r < rows; ++r) rowSegment[r] = segmentIds[b * n.t + i0 + r];
    for (int64_t c = 0; c < cols; ++c) colSegment[c] = segmentIds[b * n.t + j0 + c];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        if (rowSegment[r] != colSegment[c]) at(r, c) = kNegInf;
  }
};

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <typename T> class AttentionKernel final : public Kernel {
public:
  AttentionKernel(const KernelArgs &args, const contracts::AttentionBinding &b)
      : out_(args.outputs[0].as<T>()), lse_(args.outputs[1].as<float>()), threads_(bindThreads()),
        scratch_(threads_, 2 * kBr * b.d + kBc * kBr + 2 * kBc * b.d + 5 * kBr + b.d) {
    std::tie(q_, k_, v_) = contracts::qkvOf<const T>(args.inputs, b);
    tiles_.n = dimsOf(b);
    tiles_.bindSegments(args, b.segmentIndex);
    tiles_.rotation.bind(args, b);
  }

  void run(const StepContext &) override {
    const AttentionDims &n = tiles_.n;
    tiles_.readSegments();
    int64_t queryTiles = (n.t + kBr - 1) / kBr, tasks = n.b * n.h * queryTiles;
#pragma omp parallel num_threads(threads_)
    {
      float *base = scratch_.at(omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        int64_t b = task / (n.h * queryTiles), h = task / queryTiles % n.h;
        int64_t i0 = lastTilesFirst(task % queryTiles, queryTiles, n.causal) * kBr;
        forwardTile(b, h, i0, std::min(kBr, n.t - i0), base);
      }
    }
  }

private:
  void forwardTile(int64_t b, int64_t h, int64_t i0, int64_t rows, float *base) const {
    const AttentionDims &n = tiles_.n;
    const int64_t d = n.d, g = h / n.group;
    float *qt = base, *o = qt + d * kBr, *st = o + kBr * d, *kw = st + kBc * kBr;
    float *vw = kw + kBc * d, *m = vw + kBc * d, *l = m + kBr, *mUse = l + kBr;
    float *alpha = mUse + kBr, *sum = alpha + kBr, *row = sum + kBr;

    tiles_.transposed(q_ + tiles_.queryAt(b, i0, h), n.queryStride, b, i0, rows, n.rope, n.scale,
                      qt, kBr, row);
    std::fill(o, o + rows * d, 0.0f);
    std::fill(m, m + rows, kNegInf);
    std::fill(l, l + rows, 0.0f);

    int64_t keyEnd = tiles_.keyEnd(i0, rows);
    for (int64_t j0 = 0; j0 < keyEnd; j0 += kBc) {
      if (tiles_.hidden(b, i0, j0)) continue;
      int64_t cols = std::min(kBc, keyEnd - j0);
      const float *kr = tiles_.keyRows(k_, b, g, j0, cols, n.rope, kw);
      const float *vr = tiles_.keyRows(v_, b, g, j0, cols, false, vw);
      tileGemm(cols, rows, d, kr, d, qt, kBr, st, kBr, false); // Sᵀ = K·(scale·Q)ᵀ
      tiles_.capScores(st, kBr, cols, rows);
      tiles_.mask(st, kBr, true, b, i0, rows, j0, cols);

      // Online softmax, vectorised across the queries of the tile: Sᵀ ← Pᵀ.
      std::fill(mUse, mUse + rows, kNegInf);
      for (int64_t c = 0; c < cols; ++c) {
        const float *sc = st + c * kBr;
#pragma omp simd
        for (int64_t r = 0; r < rows; ++r) mUse[r] = std::max(mUse[r], sc[r]);
      }
#pragma omp simd
      for (int64_t r = 0; r < rows; ++r) {
        float mNew = std::max(m[r], mUse[r]);
        float safe = mNew == kNegInf ? 0.0f : mNew; // nothing visible yet: P = 0, not NaN
        alpha[r] = expFast(m[r] - safe);
        m[r] = mNew;
        mUse[r] = safe;
        sum[r] = 0.0f;
      }
      for (int64_t c = 0; c < cols; ++c) {
        float *sc = st + c * kBr;
#pragma omp simd
        for (int64_t r = 0; r < rows; ++r) {
          float p = expFast(sc[r] - mUse[r]);
          sc[r] = p;
          sum[r] += p;
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        l[r] = l[r] * alpha[r] + sum[r];
        if (alpha[r] != 1.0f) {
          float *orow = o + r * d, a = alpha[r];
#pragma omp simd
          for (int64_t e = 0; e < d; ++e) orow[e] *= a;
        }
      }
      tileGemm<true>(rows, d, cols, st, kBr, vr, d, o, d, true); // O += P·V
    }

    for (int64_t r = 0; r < rows; ++r) {
      float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
      T *dst = out_ + tiles_.outAt(b, i0 + r, h);
      const float *orow = o + r * d;
#pragma omp simd
      for (int64_t e = 0; e < d; ++e) store(dst, e, orow[e] * inv);
      lse_[(b * n.h + h) * n.t + i0 + r] = l[r] > 0.0f ? m[r] + std::log(l[r]) : kNegInf;
    }
  }

  const T *q_, *k_, *v_;
  T *out_;
  float *lse_;
  AttentionTiles<T> tiles_;
  int threads_;
  ThreadScratch scratch_; // (scale·Q)ᵀ, O, Sᵀ, widened K and V tiles; m, l, …; a row
};

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

template <typename T> class AttentionGradKernel final : public Kernel {
public:
  AttentionGradKernel(const KernelArgs &args, const contracts::AttentionBinding &b)
      : out_(args.inputs[contracts::inputsAfterQkv(b)].as<T>()),
        lse_(args.inputs[contracts::inputsAfterQkv(b) + 1].as<float>()),
        dout_(args.inputs[contracts::inputsAfterQkv(b) + 2].as<T>()), threads_(bindThreads()),
        rowDot_(b.b * b.h * b.t),
        scratch_(threads_, 6 * kBc * b.d + 2 * kBr * kBc + 2 * kBr + b.d) {
    std::tie(q_, k_, v_) = contracts::qkvOf<const T>(args.inputs, b);
    std::tie(dq_, dk_, dv_) = contracts::qkvOf<T>(args.outputs, b);
    tiles_.n = dimsOf(b);
    tiles_.bindSegments(args, b.segmentIndex);
    tiles_.rotation.bind(args, b);
  }

  void run(const StepContext &) override {
    const AttentionDims &n = tiles_.n;
    tiles_.readSegments();
    // D = rowsum(dout ∘ out), laid out like lse: [B, H, T].
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t bt = 0; bt < n.b * n.t; ++bt) {
      int64_t b = bt / n.t, i = bt % n.t;
      for (int64_t h = 0; h < n.h; ++h) {
        const T *o = out_ + (bt * n.h + h) * n.d, *dO = dout_ + (bt * n.h + h) * n.d;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t e = 0; e < n.d; ++e) sum += load(o, e) * load(dO, e);
        rowDot_[(b * n.h + h) * n.t + i] = sum;
      }
    }

    int64_t keyTiles = (n.s + kBc - 1) / kBc, queryTiles = (n.t + kBr - 1) / kBr;
    int64_t kvTasks = n.b * n.kv * keyTiles, qTasks = n.b * n.h * queryTiles;
#pragma omp parallel num_threads(threads_)
    {
      float *base = scratch_.at(omp_get_thread_num());
#pragma omp for schedule(dynamic, 1) nowait
      for (int64_t task = 0; task < kvTasks; ++task) {
        int64_t b = task / (n.kv * keyTiles), g = task / keyTiles % n.kv;
        int64_t j0 = task % keyTiles * kBc;
        keyValueTile(b, g, j0, std::min(kBc, n.s - j0), base);
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < qTasks; ++task) {
        int64_t b = task / (n.h * queryTiles), h = task / queryTiles % n.h;
        int64_t i0 = lastTilesFirst(task % queryTiles, queryTiles, n.causal) * kBr;
        queryTile(b, h, i0, std::min(kBr, n.t - i0), base);
      }
    }
  }

private:
  /// lse (+inf for a row with no visible key, so its P is 0) and D of the
  /// queries [i0, i0+rows) of head h.
  void loadRowStats(int64_t b, int64_t h, int64_t i0, int64_t rows, float *lse,
                    float *rowDot) const {
    const AttentionDims &n = tiles_.n;
    for (int64_t r = 0; r < rows; ++r) {
      float value = lse_[(b * n.h + h) * n.t + i0 + r];
      lse[r] = value == kNegInf ? std::numeric_limits<float>::infinity() : value;
      rowDot[r] = rowDot_[(b * n.h + h) * n.t + i0 + r];
    }
  }

  /// Pass A: dK, dV of kv head g, keys [j0, j0+cols), over all its query
  /// heads. Scores are query-major here: S = Q·(scale·K)ᵀ, dP = dO·Vᵀ.
  void keyValueTile(int64_t b, int64_t g, int64_t j0, int64_t cols, float *base) const {
    const AttentionDims &n = tiles_.n;
    const int64_t d = n.d;
    float *kt = base, *vt = kt + d * kBc, *accK = vt + d * kBc, *accV = accK + kBc * d;
    float *qw = accV + kBc * d, *dow = qw + kBr * d, *s = dow + kBr * d, *dp = s + kBr * kBc;
    float *lse = dp + kBr * kBc, *rowDot = lse + kBr, *row = rowDot + kBr;

    tiles_.transposed(k_ + tiles_.keyAt(b, j0, g), n.keyStride, b, j0, cols, n.rope, n.scale, kt,
                      kBc, row);
    tiles_.transposed(v_ + tiles_.keyAt(b, j0, g), n.keyStride, b, j0, cols, false, 1.0f, vt, kBc,
                      row);
    std::fill(accK, accK + cols * d, 0.0f);
    std::fill(accV, accV + cols * d, 0.0f);
    int64_t firstQuery = n.causal ? j0 / kBr * kBr : 0; // earlier queries see none of these keys
    for (int64_t h = g * n.group; h < (g + 1) * n.group; ++h)
      for (int64_t i0 = firstQuery; i0 < n.t; i0 += kBr) {
        if (tiles_.hidden(b, i0, j0)) continue;
        int64_t rows = std::min(kBr, n.t - i0);
        const float *qr = tiles_.queryRows(q_, b, h, i0, rows, qw);
        const float *dor = tiles_.outRows(dout_, b, h, i0, rows, dow);
        loadRowStats(b, h, i0, rows, lse, rowDot);
        tileGemm(rows, cols, d, qr, d, kt, kBc, s, kBc, false); // S
        tiles_.capScores(s, kBc, rows, cols);
        tiles_.mask(s, kBc, false, b, i0, rows, j0, cols);
        tileGemm(rows, cols, d, dor, d, vt, kBc, dp, kBc, false); // dP
        for (int64_t r = 0; r < rows; ++r) {
          float *sr = s + r * kBc, *dpr = dp + r * kBc, l = lse[r], dot = rowDot[r];
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) {
            float p = expFast(sr[c] - l);
            float slope = tiles_.capSlope(sr[c], p);
            sr[c] = p;
            dpr[c] = p * (dpr[c] - dot) * slope; // dS
          }
        }
        tileGemm<true>(cols, d, rows, s, kBc, dor, d, accV, d, true); // dV += Pᵀ·dO
        tileGemm<true>(cols, d, rows, dp, kBc, qr, d, accK, d, true); // dK += dSᵀ·Q
      }
    for (int64_t c = 0; c < cols; ++c) {
      tiles_.storeRow(dk_ + tiles_.keyAt(b, j0 + c, g), accK + c * d, n.scale, b, j0 + c, n.rope,
                      row);
      tiles_.storeRow(dv_ + tiles_.keyAt(b, j0 + c, g), accV + c * d, 1.0f, b, j0 + c, false, row);
    }
  }

  /// Pass B: dQ of head h, queries [i0, i0+rows), over the visible key
  /// tiles. Scores are key-major here: Sᵀ = K·(scale·Q)ᵀ, dPᵀ = V·dOᵀ.
  void queryTile(int64_t b, int64_t h, int64_t i0, int64_t rows, float *base) const {
    const AttentionDims &n = tiles_.n;
    const int64_t d = n.d, g = h / n.group;
    float *qt = base, *dot = qt + d * kBr, *dq = dot + d * kBr, *kw = dq + kBr * d;
    float *vw = kw + kBc * d, *st = vw + kBc * d, *dpt = st + kBc * kBr;
    float *lse = dpt + kBc * kBr, *rowDot = lse + kBr, *row = rowDot + kBr;

    tiles_.transposed(q_ + tiles_.queryAt(b, i0, h), n.queryStride, b, i0, rows, n.rope, n.scale,
                      qt, kBr, row);
    tiles_.transposed(dout_ + tiles_.outAt(b, i0, h), n.h * d, b, i0, rows, false, 1.0f, dot, kBr,
                      row);
    loadRowStats(b, h, i0, rows, lse, rowDot);
    std::fill(dq, dq + rows * d, 0.0f);
    int64_t keyEnd = tiles_.keyEnd(i0, rows);
    for (int64_t j0 = 0; j0 < keyEnd; j0 += kBc) {
      if (tiles_.hidden(b, i0, j0)) continue;
      int64_t cols = std::min(kBc, keyEnd - j0);
      const float *kr = tiles_.keyRows(k_, b, g, j0, cols, n.rope, kw);
      const float *vr = tiles_.keyRows(v_, b, g, j0, cols, false, vw);
      tileGemm(cols, rows, d, kr, d, qt, kBr, st, kBr, false); // Sᵀ
      tiles_.capScores(st, kBr, cols, rows);
      tiles_.mask(st, kBr, true, b, i0, rows, j0, cols);
      tileGemm(cols, rows, d, vr, d, dot, kBr, dpt, kBr, false); // dPᵀ
      for (int64_t c = 0; c < cols; ++c) {
        float *sc = st + c * kBr, *dpc = dpt + c * kBr;
#pragma omp simd
        for (int64_t r = 0; r < rows; ++r) {
          float p = expFast(sc[r] - lse[r]);
          dpc[r] = p * (dpc[r] - rowDot[r]) * tiles_.capSlope(sc[r], p); // dSᵀ
        }
      }
      tileGemm<true>(rows, d, cols, dpt, kBr, kr, d, dq, d, true); // dQ += dS·K
    }
    for (int64_t r = 0; r < rows; ++r)
      tiles_.storeRow(dq_ + tiles_.queryAt(b, i0 + r, h), dq + r * d, n.scale, b, i0 + r, n.rope,
                      row);
  }

  const T *q_, *k_, *v_, *out_;
  const float *lse_;
  const T *dout_;
  T *dq_, *dk_, *dv_;
  AttentionTiles<T> tiles_;
  int threads_;
  std::vector<float> rowDot_; // rowsum(dout ∘ out) [B, H, T]
  ThreadScratch scratch_;     // per pass: transposed own tile, accumulators, score tiles
};

//===----------------------------------------------------------------------===//
// Factories
//===----------------------------------------------------------------------===//

using Bind = bool (*)(const KernelArgs &, std::string &, contracts::AttentionBinding *);

/// The contract's checks, then kernel K for the bound dtype.
template <template <typename> class K>
std::unique_ptr<Kernel> make(Bind bind, const KernelArgs &args, std::string &error) {
  contracts::AttentionBinding b;
  if (!bind(args, error, &b)) return nullptr;
  return makeFloatKernel<K>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeAttention(const KernelArgs &args, std::string &error) {
  return make<AttentionKernel>(contracts::bindAttention, args, error);
}
std::unique_ptr<Kernel> makeAttentionGrad(const KernelArgs &args, std::string &error) {
  return make<AttentionGradKernel>(contracts::bindAttentionGrad, args, error);
}
std::unique_ptr<Kernel> makeAttentionPacked(const KernelArgs &args, std::string &error) {
  return make<AttentionKernel>(contracts::bindAttentionPacked, args, error);
}
std::unique_ptr<Kernel> makeAttentionPackedGrad(const KernelArgs &args, std::string &error) {
  return make<AttentionGradKernel>(contracts::bindAttentionPackedGrad, args, error);
}
std::unique_ptr<Kernel> makeAttentionRope(const KernelArgs &args, std::string &error) {
  return make<AttentionKernel>(contracts::bindAttentionRope, args, error);
}
std::unique_ptr<Kernel> makeAttentionRopeGrad(const KernelArgs &args, std::string &error) {
  return make<AttentionGradKernel>(contracts::bindAttentionRopeGrad, args, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "attention", makeAttention);
LLMC_REGISTER_KERNEL(CPU, "attention_grad", makeAttentionGrad);
LLMC_REGISTER_KERNEL(CPU, "attention_packed", makeAttentionPacked);
LLMC_REGISTER_KERNEL(CPU, "attention_packed_grad", makeAttentionPackedGrad);
LLMC_REGISTER_KERNEL(CPU, "attention_rope", makeAttentionRope);
LLMC_REGISTER_KERNEL(CPU, "attention_rope_grad", makeAttentionRopeGrad);

} // namespace llmc::cpu
