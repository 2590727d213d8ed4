//===- attention.cpp - fused (flash-style) attention and its backward -----===//
//
// softmax(scale·q·kᵀ + mask)·v for q [B,T,H,D], k, v [B,S,KV,D], where
// query head h reads kv head h/(H/KV) (multi-head, grouped-query and
// multi-query alike), masked by `causal` (key j visible to query i iff
// j <= i) and optional segment ids (keys of another packed sequence are
// invisible). Besides the output, the per-row log-sum-exp [B,H,T] is kept
// for the backward.
//
// Forward: one task per (b, h, tile of kBr queries). The task walks key
// tiles of kBc with an online softmax — running max m and sum l per row, the
// partial output rescaled by exp(m_old − m_new) — so the T×S score matrix
// never exists; only tiles of it, in per-thread scratch. Causal tasks stop
// at the diagonal. q is pre-multiplied by `scale` when its tile is loaded.
//
// Backward, with P = exp(scale·q·kᵀ − lse) recomputed per tile and
// Dᵢ = rowsum(dout ∘ out) precomputed:
//   dV += Pᵀ·dO,  dS = P ∘ (dO·Vᵀ − D),  dK += scale·dSᵀ·Q,  dQ += scale·dS·K.
// To avoid atomics (and keep results deterministic) it runs two passes:
// pass A owns a kv tile per task and loops over every query head of its
// group and every query tile, accumulating dK and dV in registers' reach;
// pass B owns a query tile and loops over key tiles for dQ. P and dS are
// recomputed in both (7 tile GEMMs instead of 5), which costs less than
// synchronising dQ.
//
// Tile GEMMs use TileGemm.h; everything is fp32 inside, for f32 or bf16
// storage. All scratch is allocated at bind time.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Common.h"
#include "kernels/cpu/TileGemm.h"

namespace llmc::cpu {
namespace {

constexpr int64_t kBr = 64; // query rows per tile (multiple of 4)
constexpr int64_t kBc = 64; // keys per tile (multiple of 16)
static_assert(kBr <= kBc, "pass B keeps dQ [kBr x D] in a [kBc x D] buffer");

struct AttentionDims {
  int64_t b = 0, t = 0, h = 0, d = 0, s = 0, kv = 0, group = 1;
  float scale = 1.0f;
  bool causal = false;
  bool segments = false;
};

/// Tile loading and masking shared by the forward and both backward passes.
template <typename T> struct AttentionTiles {
  AttentionDims n;
  IdView segmentIds;

  /// rows × D query-shaped rows (q, out, dout) of (b, h) starting at i0,
  /// multiplied by `factor`, into dst [rows × D].
  void loadQueryRows(const T *x, int64_t b, int64_t h, int64_t i0, int64_t rows, float factor,
                     float *dst) const {
    for (int64_t r = 0; r < rows; ++r) {
      const T *src = x + ((b * n.t + i0 + r) * n.h + h) * n.d;
      float *row = dst + r * n.d;
#pragma omp simd
      for (int64_t e = 0; e < n.d; ++e) row[e] = factor * load(src, e);
    }
  }

  /// cols key rows of kv head g starting at j0 into dst [cols × D].
  void loadKeyRows(const T *x, int64_t b, int64_t g, int64_t j0, int64_t cols, float *dst) const {
    for (int64_t c = 0; c < cols; ++c) {
      const T *src = x + ((b * n.s + j0 + c) * n.kv + g) * n.d;
      float *row = dst + c * n.d;
#pragma omp simd
      for (int64_t e = 0; e < n.d; ++e) row[e] = load(src, e);
    }
  }

  /// The same rows transposed: dst [D × kBc], column c = key j0 + c.
  void loadKeyColumns(const T *x, int64_t b, int64_t g, int64_t j0, int64_t cols,
                      float *dst) const {
    for (int64_t c = 0; c < cols; ++c) {
      const T *src = x + ((b * n.s + j0 + c) * n.kv + g) * n.d;
      for (int64_t e = 0; e < n.d; ++e) dst[e * kBc + c] = load(src, e);
    }
  }

  /// Whether any key of [j0, j0+cols) can be hidden from a query of
  /// [i0, i0+rows) by the causal mask.
  bool tileNeedsCausalMask(int64_t i0, int64_t j0, int64_t cols) const {
    return n.causal && j0 + cols - 1 > i0;
  }

  /// Sets hidden scores of the rows × cols tile s (ld kBc) to −inf.
  void mask(float *s, int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t cols) const {
    if (tileNeedsCausalMask(i0, j0, cols))
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = std::max<int64_t>(0, i0 + r + 1 - j0); c < cols; ++c)
          s[r * kBc + c] = kNegInf;
    if (n.segments)
      for (int64_t r = 0; r < rows; ++r) {
        int64_t segment = segmentIds[b * n.t + i0 + r];
        for (int64_t c = 0; c < cols; ++c)
          if (segmentIds[b * n.t + j0 + c] != segment) s[r * kBc + c] = kNegInf;
      }
  }

  /// Exclusive end of the keys any query of [i0, i0+rows) may see.
  int64_t keyEnd(int64_t i0, int64_t rows) const { return n.causal ? i0 + rows : n.s; }
};

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <typename T> class AttentionKernel final : public Kernel {
public:
  AttentionKernel(const KernelArgs &args, const AttentionDims &dims)
      : q_(args.inputs[0].as<T>()), k_(args.inputs[1].as<T>()), v_(args.inputs[2].as<T>()),
        out_(args.outputs[0].as<T>()), lse_(args.outputs[1].as<float>()), threads_(bindThreads()),
        scratch_(threads_, 2 * kBr * dims.d + 2 * dims.d * kBc + kBr * kBc + 2 * kBr) {
    tiles_.n = dims;
    if (dims.segments) tiles_.segmentIds = IdView(args.inputs[3]);
  }

  void run(const StepContext &) override {
    const AttentionDims &n = tiles_.n;
    int64_t queryTiles = (n.t + kBr - 1) / kBr, tasks = n.b * n.h * queryTiles;
#pragma omp parallel num_threads(threads_)
    {
      float *base = scratch_.at(omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        int64_t b = task / (n.h * queryTiles), h = task / queryTiles % n.h;
        int64_t i0 = task % queryTiles * kBr;
        forwardTile(b, h, i0, std::min(kBr, n.t - i0), base);
      }
    }
  }

private:
  void forwardTile(int64_t b, int64_t h, int64_t i0, int64_t rows, float *base) const {
    const AttentionDims &n = tiles_.n;
    const int64_t d = n.d, g = h / n.group;
    float *qs = base, *o = qs + kBr * d, *kt = o + kBr * d, *vb = kt + d * kBc;
    float *s = vb + kBc * d, *m = s + kBr * kBc, *l = m + kBr;

    tiles_.loadQueryRows(q_, b, h, i0, rows, n.scale, qs);
    std::fill(o, o + rows * d, 0.0f);
    std::fill(m, m + rows, kNegInf);
    std::fill(l, l + rows, 0.0f);

    int64_t keyEnd = tiles_.keyEnd(i0, rows);
    for (int64_t j0 = 0; j0 < keyEnd; j0 += kBc) {
      int64_t cols = std::min(kBc, keyEnd - j0);
      tiles_.loadKeyColumns(k_, b, g, j0, cols, kt);
      tiles_.loadKeyRows(v_, b, g, j0, cols, vb);
      tileGemm(rows, cols, d, qs, d, kt, kBc, s, kBc, false); // S = (scale·Q)·Kᵀ
      tiles_.mask(s, b, i0, rows, j0, cols);

      for (int64_t r = 0; r < rows; ++r) { // online softmax, S ← P
        float *sr = s + r * kBc;
        float rowMax = kNegInf;
        for (int64_t c = 0; c < cols; ++c) rowMax = std::max(rowMax, sr[c]);
        float mNew = std::max(m[r], rowMax);
        if (mNew == kNegInf) { // nothing visible yet: contributes nothing
          std::fill(sr, sr + cols, 0.0f);
          continue;
        }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < cols; ++c) {
          float p = expFast(sr[c] - mNew);
          sr[c] = p;
          sum += p;
        }
        float alpha = expFast(m[r] - mNew);
        l[r] = l[r] * alpha + sum;
        m[r] = mNew;
        if (alpha != 1.0f) {
          float *orow = o + r * d;
#pragma omp simd
          for (int64_t e = 0; e < d; ++e) orow[e] *= alpha;
        }
      }
      tileGemm(rows, d, cols, s, kBc, vb, d, o, d, true); // O += P·V
    }

    for (int64_t r = 0; r < rows; ++r) {
      float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
      T *dst = out_ + ((b * n.t + i0 + r) * n.h + h) * d;
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
  ThreadScratch scratch_; // Q·scale, O, Kᵀ, V, S/P tiles; m, l
};

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

template <typename T> class AttentionGradKernel final : public Kernel {
public:
  AttentionGradKernel(const KernelArgs &args, const AttentionDims &dims)
      : q_(args.inputs[0].as<T>()), k_(args.inputs[1].as<T>()), v_(args.inputs[2].as<T>()),
        out_(args.inputs[3].as<T>()), lse_(args.inputs[4].as<float>()),
        dout_(args.inputs[5].as<T>()), dq_(args.outputs[0].as<T>()),
        dk_(args.outputs[1].as<T>()), dv_(args.outputs[2].as<T>()), threads_(bindThreads()),
        rowDot_(dims.b * dims.h * dims.t),
        scratch_(threads_, 2 * kBr * dims.d + 3 * dims.d * kBc + 2 * kBc * dims.d +
                               2 * kBr * kBc + 2 * kBc * kBr + 2 * kBr) {
    tiles_.n = dims;
    if (dims.segments) tiles_.segmentIds = IdView(args.inputs[6]);
  }

  void run(const StepContext &) override {
    const AttentionDims &n = tiles_.n;
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
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < kvTasks; ++task) {
        int64_t b = task / (n.kv * keyTiles), g = task / keyTiles % n.kv;
        int64_t j0 = task % keyTiles * kBc;
        keyValueTile(b, g, j0, std::min(kBc, n.s - j0), base);
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < qTasks; ++task) {
        int64_t b = task / (n.h * queryTiles), h = task / queryTiles % n.h;
        int64_t i0 = task % queryTiles * kBr;
        queryTile(b, h, i0, std::min(kBr, n.t - i0), base);
      }
    }
  }

private:
  /// Per-thread scratch, carved from one slice.
  struct Buffers {
    float *qs, *dO;          // [kBr × D]: scale·Q, dO
    float *kt, *vt, *kb;     // [D × kBc] Kᵀ, Vᵀ; [kBc × D] K
    float *accK, *accV;      // [kBc × D] dK, dV (pass A); accK is dQ [kBr × D] in pass B
    float *p, *ds;           // [kBr × kBc]
    float *pt, *dst;         // [kBc × kBr]
    float *lse, *rowDot;     // [kBr]
  };

  Buffers carve(float *base) const {
    const int64_t d = tiles_.n.d;
    Buffers buf;
    buf.qs = base;
    buf.dO = buf.qs + kBr * d;
    buf.kt = buf.dO + kBr * d;
    buf.vt = buf.kt + d * kBc;
    buf.kb = buf.vt + d * kBc;
    buf.accK = buf.kb + d * kBc;
    buf.accV = buf.accK + kBc * d;
    buf.p = buf.accV + kBc * d;
    buf.ds = buf.p + kBr * kBc;
    buf.pt = buf.ds + kBr * kBc;
    buf.dst = buf.pt + kBc * kBr;
    buf.lse = buf.dst + kBc * kBr;
    buf.rowDot = buf.lse + kBr;
    return buf;
  }

  /// Loads the query-side tile of (b, h, i0): scale·Q, dO, lse and D.
  void loadQueryTile(const Buffers &buf, int64_t b, int64_t h, int64_t i0, int64_t rows) const {
    const AttentionDims &n = tiles_.n;
    tiles_.loadQueryRows(q_, b, h, i0, rows, n.scale, buf.qs);
    tiles_.loadQueryRows(dout_, b, h, i0, rows, 1.0f, buf.dO);
    for (int64_t r = 0; r < rows; ++r) {
      float lse = lse_[(b * n.h + h) * n.t + i0 + r];
      // A row with no visible key (lse = −inf) has P = 0: +inf makes exp(s − lse) = 0.
      buf.lse[r] = lse == kNegInf ? std::numeric_limits<float>::infinity() : lse;
      buf.rowDot[r] = rowDot_[(b * n.h + h) * n.t + i0 + r];
    }
  }

  /// P and dS of one (query tile, key tile) pair, from loaded Q, dO, Kᵀ, Vᵀ.
  void probabilities(const Buffers &buf, int64_t b, int64_t i0, int64_t rows, int64_t j0,
                     int64_t cols) const {
    const int64_t d = tiles_.n.d;
    tileGemm(rows, cols, d, buf.qs, d, buf.kt, kBc, buf.p, kBc, false);  // scale·Q·Kᵀ
    tiles_.mask(buf.p, b, i0, rows, j0, cols);
    tileGemm(rows, cols, d, buf.dO, d, buf.vt, kBc, buf.ds, kBc, false); // dP = dO·Vᵀ
    for (int64_t r = 0; r < rows; ++r) {
      float *pr = buf.p + r * kBc, *dsr = buf.ds + r * kBc;
      float lse = buf.lse[r], rowDot = buf.rowDot[r];
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        float p = expFast(pr[c] - lse);
        pr[c] = p;
        dsr[c] = p * (dsr[c] - rowDot);
      }
    }
  }

  /// Pass A: dK, dV of kv head g, keys [j0, j0+cols), over all its query heads.
  void keyValueTile(int64_t b, int64_t g, int64_t j0, int64_t cols, float *base) const {
    const AttentionDims &n = tiles_.n;
    const int64_t d = n.d;
    Buffers buf = carve(base);
    tiles_.loadKeyColumns(k_, b, g, j0, cols, buf.kt);
    tiles_.loadKeyColumns(v_, b, g, j0, cols, buf.vt);
    std::fill(buf.accK, buf.accK + cols * d, 0.0f);
    std::fill(buf.accV, buf.accV + cols * d, 0.0f);
    int64_t firstQuery = n.causal ? j0 / kBr * kBr : 0; // earlier queries see none of these keys
    for (int64_t h = g * n.group; h < (g + 1) * n.group; ++h)
      for (int64_t i0 = firstQuery; i0 < n.t; i0 += kBr) {
        int64_t rows = std::min(kBr, n.t - i0);
        loadQueryTile(buf, b, h, i0, rows);
        probabilities(buf, b, i0, rows, j0, cols);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            buf.pt[c * kBr + r] = buf.p[r * kBc + c];
            buf.dst[c * kBr + r] = buf.ds[r * kBc + c];
          }
        tileGemm(cols, d, rows, buf.pt, kBr, buf.dO, d, buf.accV, d, true);  // dV += Pᵀ·dO
        tileGemm(cols, d, rows, buf.dst, kBr, buf.qs, d, buf.accK, d, true); // dK += dSᵀ·(scale·Q)
      }
    for (int64_t c = 0; c < cols; ++c) {
      T *dk = dk_ + ((b * n.s + j0 + c) * n.kv + g) * d;
      T *dv = dv_ + ((b * n.s + j0 + c) * n.kv + g) * d;
#pragma omp simd
      for (int64_t e = 0; e < d; ++e) {
        store(dk, e, buf.accK[c * d + e]);
        store(dv, e, buf.accV[c * d + e]);
      }
    }
  }

  /// Pass B: dQ of head h, queries [i0, i0+rows), over the visible key tiles.
  void queryTile(int64_t b, int64_t h, int64_t i0, int64_t rows, float *base) const {
    const AttentionDims &n = tiles_.n;
    const int64_t d = n.d, g = h / n.group;
    Buffers buf = carve(base);
    float *dq = buf.accK;
    loadQueryTile(buf, b, h, i0, rows);
    std::fill(dq, dq + rows * d, 0.0f);
    int64_t keyEnd = tiles_.keyEnd(i0, rows);
    for (int64_t j0 = 0; j0 < keyEnd; j0 += kBc) {
      int64_t cols = std::min(kBc, keyEnd - j0);
      tiles_.loadKeyColumns(k_, b, g, j0, cols, buf.kt);
      tiles_.loadKeyColumns(v_, b, g, j0, cols, buf.vt);
      tiles_.loadKeyRows(k_, b, g, j0, cols, buf.kb);
      probabilities(buf, b, i0, rows, j0, cols);
      tileGemm(rows, d, cols, buf.ds, kBc, buf.kb, d, dq, d, true); // dQ += dS·K
    }
    for (int64_t r = 0; r < rows; ++r) {
      T *dst = dq_ + ((b * n.t + i0 + r) * n.h + h) * d;
#pragma omp simd
      for (int64_t e = 0; e < d; ++e) store(dst, e, n.scale * dq[r * d + e]);
    }
  }

  const T *q_, *k_, *v_, *out_;
  const float *lse_;
  const T *dout_;
  T *dq_, *dk_, *dv_;
  AttentionTiles<T> tiles_;
  int threads_;
  std::vector<float> rowDot_; // rowsum(dout ∘ out) [B, H, T]
  ThreadScratch scratch_;
};

//===----------------------------------------------------------------------===//
// Factories
//===----------------------------------------------------------------------===//

/// Checks q, k, v and the attributes; fills `dims`.
bool checkAttention(Validator &v, AttentionDims *dims) {
  double scale;
  if (!v.floatAttr("scale", &scale) || !v.flagAttr("causal", &dims->causal)) return false;
  dims->scale = static_cast<float>(scale);
  const TensorView &q = v.in(0), &k = v.in(1), &val = v.in(2);
  if (!v.isFloat(q, "q") || !v.hasRank(q, "q", 4) || !v.hasDType(k, "k", q.dtype) ||
      !v.hasRank(k, "k", 4) || !v.hasType(val, "v", q.dtype, k.shape))
    return false;
  dims->b = q.dim(0), dims->t = q.dim(1), dims->h = q.dim(2), dims->d = q.dim(3);
  dims->s = k.dim(1), dims->kv = k.dim(2);
  if (k.dim(0) != dims->b || k.dim(3) != dims->d)
    return v.fail("k must be [B, S, KV, D] with q's B and D: q is " + q.describe() + ", k is " +
                  k.describe());
  if (dims->kv <= 0 || dims->h % dims->kv != 0)
    return v.fail("query heads H = " + std::to_string(dims->h) +
                  " must be a multiple of kv heads KV = " + std::to_string(dims->kv));
  dims->group = dims->h / dims->kv;
  if (dims->causal && dims->s != dims->t)
    return v.fail("causal attention needs S == T: q is " + q.describe() + ", k is " +
                  k.describe());
  return true;
}

/// Checks the optional segment ids, input `segmentIndex` when present.
bool checkSegments(Validator &v, const KernelArgs &args, size_t segmentIndex,
                   AttentionDims *dims) {
  dims->segments = args.inputs.size() > segmentIndex;
  if (!dims->segments) return true;
  const TensorView &segments = v.in(segmentIndex);
  if (!v.isIndex(segments, "segment_ids") ||
      !v.hasType(segments, "segment_ids", segments.dtype, {dims->b, dims->t}))
    return false;
  if (dims->s != dims->t)
    return v.fail("segment ids need S == T, got T = " + std::to_string(dims->t) + ", S = " +
                  std::to_string(dims->s));
  return true;
}

std::unique_ptr<Kernel> makeAttention(const KernelArgs &args, std::string &error) {
  Validator v("attention", args, error);
  AttentionDims dims;
  if (!v.arity(3, 4, 2) || !checkAttention(v, &dims) || !checkSegments(v, args, 3, &dims))
    return nullptr;
  const TensorView &q = v.in(0);
  if (!v.hasType(v.out(0), "out", q.dtype, q.shape) ||
      !v.hasType(v.out(1), "lse", DType::F32, {dims.b, dims.h, dims.t}))
    return nullptr;
  return makeFloatKernel<AttentionKernel>(q.dtype, args, dims);
}

std::unique_ptr<Kernel> makeAttentionGrad(const KernelArgs &args, std::string &error) {
  Validator v("attention_grad", args, error);
  AttentionDims dims;
  if (!v.arity(6, 7, 3) || !checkAttention(v, &dims) || !checkSegments(v, args, 6, &dims))
    return nullptr;
  const TensorView &q = v.in(0), &k = v.in(1);
  if (!v.hasType(v.in(3), "out", q.dtype, q.shape) ||
      !v.hasType(v.in(4), "lse", DType::F32, {dims.b, dims.h, dims.t}) ||
      !v.hasType(v.in(5), "dout", q.dtype, q.shape) ||
      !v.hasType(v.out(0), "dq", q.dtype, q.shape) ||
      !v.hasType(v.out(1), "dk", q.dtype, k.shape) || !v.hasType(v.out(2), "dv", q.dtype, k.shape))
    return nullptr;
  return makeFloatKernel<AttentionGradKernel>(q.dtype, args, dims);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "attention", makeAttention);
LLMC_REGISTER_KERNEL(CPU, "attention_grad", makeAttentionGrad);

} // namespace llmc::cpu
