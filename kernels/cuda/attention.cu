//===- attention.cu - fused (flash-style) attention and its backward ------===//
//
// softmax(scale·q·kᵀ + mask)·v for q [B,T,H,D], k, v [B,S,KV,D], query head
// h reading kv head h/(H/KV), masked by `causal` (key j visible to query i
// iff j <= i; S == T) and optional segment ids [B,T] (keys of another
// packed sequence are invisible; S == T), with the semantics of
// kernels/cpu/attention.cpp: a query that sees no key gets out = 0 and
// lse = −inf, and the backward reads that lse as +inf (its P is 0). A
// `softcap` c makes each score s into c·tanh(s / c) before the masks, and
// the backward multiplies dS by the slope 1 − tanh² (capScore, capSlope).
// Never is a T×S matrix stored: scores live one tile at a time in registers.
// As on the CPU, a query tile and a key tile whose segment id ranges do not
// meet are skipped in every pass, so packed documents cost Σ s_i².
//
// Geometry, shared by all three kernels: a block of 8 warps owns a tile of
// 32 rows (query rows, or key rows in the dK/dV pass), 4 rows per warp; the
// other operand streams through shared memory in tiles of 32 rows, so that
// in the score phase each lane owns one row of the streamed tile (its dot
// products with the warp's 4 rows run over D with a broadcast read of the
// warp's row and a conflict-free read of the lane's row, padded to D+1
// floats), and in the accumulation phase each lane owns the head-dim
// elements lane, lane+32, … of the warp's 4 accumulator rows, taking the
// per-row weights from the score-phase lanes by shuffles. Everything is
// fp32; bf16 is widened on the way into shared memory and rounded (to
// nearest even) on the way out.
//
// Forward: a block per (b, h, query tile); over key tiles (causal: only up
// to the tile's diagonal) an online softmax per query row: the tile's max
// by a warp reduction, the running max m, the running sum l and the
// accumulator rescaled by exp(m_old − m_new); then out = acc / l and
// lse = m + log l. Causal blocks are issued last tile first, as the later
// query tiles see more keys.
//
// Backward, deterministic (no atomics), in three launches:
//  1. Drow = Σ_e dout·out per (b, h, t), one warp per row, into scratch
//     allocated at bind time;
//  2. dQ: a block per (b, h, query tile), over the visible key tiles:
//     P = exp(scale·q·k − lse), dP = dout·v, dS = P∘(dP − Drow),
//     dq += dS·k; dq = scale·dq;
//  3. dK, dV: a block per (b, kv head g, key tile), over every query head
//     of g and every query tile that can see the keys (causal: from the key
//     tile's own diagonal on): dv += Pᵀ·dout, dk += dSᵀ·q; dk = scale·dk.
//     Every dK/dV row is summed by one thread in a fixed order.
// P and dS are recomputed in both 2 and 3, as on the CPU.
//
// Packed (attention_packed, _grad): q, k, v are column blocks of one qkv
// [B,T,(H+2·KV)·D] and dq, dk, dv those of one dqkv, read and written
// through the rows' stride and the blocks' offsets by the same kernels.
//
// attention_rope (_grad): q and k are rotated as kernels/cuda/rope.cu
// rotates them (its tables, built at bind time by contracts::ropeTables)
// and rounded to the storage type while they are staged; the backward
// stores dq and dk rounded, then each warp rotates its rows back in place
// (the inverse rope, reading what it just stored, as the unfused rope
// would).
//
// Head dims 64 and 128 have their own instantiations (D a compile-time
// constant); any other D up to 256 runs the generic path rounded up to 32,
// 64, 128 or 256 (lanes past D idle). Shared memory is dynamic, sized at
// bind time: 128·(3D+1) bytes forward, about 128·(4D+2) backward (98 KB and
// 131 KB at D = 256, beyond the 48 KB default, so the factories raise each
// kernel's limit with cudaFuncSetAttribute). A larger D is a bind error.
//
// Which implementation an op gets (`llmc-run --attention`): by default
// cuDNN's fused flash attention where it takes the op (AttentionOnCudnn.h),
// else these kernels; with `--attention tensor-cores`, bf16 and f16 at
// D = 64 and 128 run the same three kernels on tensor cores instead
// (AttentionMma.cuh). Every choice is recorded (AttentionChoice.h).
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Attention.h"
#include "kernels/cuda/AttentionChoice.h"
#include "kernels/cuda/AttentionOnCudnn.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"

#include <mma.h>

#include <algorithm>
#include <climits>
#include <tuple>
#include <type_traits>
#include <vector>

namespace llmc::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 4;
constexpr int kTile = kWarps * kRowsPerWarp;
static_assert(kTile == 32, "a streamed tile has one row per lane");
constexpr int kMaxHeadDim = 256;
constexpr unsigned kFullMask = 0xffffffffu;

/// Everything a kernel needs besides its pointers, by value.
struct Params {
  int64_t b = 0, t = 0, h = 0, s = 0, kv = 0, group = 1;
  int64_t queryStride = 0, keyStride = 0; ///< elements between rows (b, t) of q and of k, v
  int d = 0;
  float scale = 1.0f;
  bool causal = false;
  int64_t window = 0;             ///< causal: keys in (i − window, i]; 0: all up to i
  float softcap = 0.0f;           ///< scores capped to c·tanh(s / c); 0: uncapped
  const void *segments = nullptr; ///< [B, T] i32 or i64; null without segment ids
  bool wideSegments = false;      ///< i64 segment ids
  /// attention_rope: cos, sin and the inverse's sin [ropeRows, D/2]; null
  /// without rotation.
  const float *ropeCos = nullptr, *ropeSin = nullptr, *ropeSinInverse = nullptr;
  int64_t ropeRows = 0;
  const void *positions = nullptr; ///< [B, T] i32 or i64; null: position t
  bool widePositions = false;
};

/// Whether key j is inside query i's sliding window (always, without one).
__device__ __forceinline__ bool inWindow(const Params &p, int64_t i, int64_t j) {
  return p.window == 0 || j > i - p.window;
}

/// Gemma 2's soft-cap of a score: c·tanh(s / c) (s without a cap).
__device__ __forceinline__ float capScore(const Params &p, float s) {
  return p.softcap > 0.0f ? p.softcap * tanhf(s / p.softcap) : s;
}
/// The cap's slope at a visible capped score: 1 − tanh² (1 without a cap).
__device__ __forceinline__ float capSlope(const Params &p, float capped) {
  if (p.softcap <= 0.0f)
    return 1.0f;
  const float t = capped / p.softcap;
  return 1.0f - t * t;
}

/// Offsets of query row i of head h in q (dq), in out (dout), and of key
/// row j of kv head g in k, v (dk, dv).
__device__ __forceinline__ int64_t queryOffset(const Params &p, int64_t b, int64_t i, int64_t h) {
  return (b * p.t + i) * p.queryStride + h * p.d;
}
__device__ __forceinline__ int64_t outOffset(const Params &p, int64_t b, int64_t i, int64_t h) {
  return ((b * p.t + i) * p.h + h) * p.d;
}
__device__ __forceinline__ int64_t keyOffset(const Params &p, int64_t b, int64_t j, int64_t g) {
  return (b * p.s + j) * p.keyStride + g * p.d;
}
/// Segment id of position i of batch row b (only called with segment ids).
__device__ __forceinline__ int64_t segmentAt(const Params &p, int64_t b, int64_t i) {
  return p.wideSegments ? static_cast<const int64_t *>(p.segments)[b * p.t + i]
                        : static_cast<const int32_t *>(p.segments)[b * p.t + i];
}

/// The rotation table's row for position i of batch row b (attention_rope),
/// or −1 outside the table.
__device__ __forceinline__ int64_t ropeRow(const Params &p, int64_t b, int64_t i) {
  const int64_t pos = !p.positions     ? i
                      : p.widePositions ? static_cast<const int64_t *>(p.positions)[b * p.t + i]
                                        : static_cast<const int32_t *>(p.positions)[b * p.t + i];
  return pos < 0 || pos >= p.ropeRows ? -1 : pos;
}

/// `v` rounded to T and widened back: what a kernel reads of a value
/// another stored.
template <typename T> __device__ __forceinline__ float roundTo(float v) {
  T t;
  store(&t, 0, v);
  return load(&t, 0);
}

/// Element e of row x (position i of batch row b) as loaded: rotated as
/// the rope kernel rotates it and rounded to T when `rotated`.
template <typename T>
__device__ __forceinline__ float loadAt(const T *x, int e, const Params &p, int64_t b, int64_t i,
                                        bool rotated) {
  if (!rotated) return load(x, e);
  const int half = p.d / 2;
  const int64_t row = ropeRow(p, b, i);
  if (row < 0) return __int_as_float(0x7fc00000);
  const int pair = e < half ? e : e - half;
  const float c = p.ropeCos[row * half + pair], s = p.ropeSin[row * half + pair];
  const float lo = load(x, pair), hi = load(x, pair + half);
  return roundTo<T>(e < half ? lo * c - hi * s : hi * c + lo * s);
}

/// Rotates the row at dst (position i of batch row b), just stored by this
/// warp, back in place as the inverse rope would (attention_rope_grad's dq
/// and dk). All lanes of the warp take part.
template <typename T>
__device__ __forceinline__ void rotateBack(T *dst, const Params &p, int64_t b, int64_t i) {
  const int lane = threadIdx.x & 31, half = p.d / 2;
  const int64_t row = ropeRow(p, b, i);
  __syncwarp();
  for (int pair = lane; pair < half; pair += 32) {
    if (row < 0) {
      store(dst, pair, __int_as_float(0x7fc00000));
      store(dst, pair + half, __int_as_float(0x7fc00000));
      continue;
    }
    const float c = p.ropeCos[row * half + pair], s = p.ropeSinInverse[row * half + pair];
    const float lo = load(dst, pair), hi = load(dst, pair + half);
    store(dst, pair, lo * c - hi * s);
    store(dst, pair + half, hi * c + lo * s);
  }
  __syncwarp();
}

/// Whether the 32-wide query tile at i0 and key tile at j0 of row b share
/// a segment id range (always, without segment ids). Each warp reduces the
/// ranges by shuffles to the same answer, so a block may branch on it; all
/// lanes must be active.
__device__ __forceinline__ bool segmentsMeet(const Params &p, int64_t b, int64_t i0, int64_t j0) {
  if (!p.segments) return true;
  const int lane = threadIdx.x & 31;
  int64_t qLo = segmentAt(p, b, min(i0 + lane, p.t - 1)), qHi = qLo;
  int64_t kLo = segmentAt(p, b, min(j0 + lane, p.t - 1)), kHi = kLo;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    qLo = min(qLo, __shfl_xor_sync(kFullMask, qLo, offset));
    qHi = max(qHi, __shfl_xor_sync(kFullMask, qHi, offset));
    kLo = min(kLo, __shfl_xor_sync(kFullMask, kLo, offset));
    kHi = max(kHi, __shfl_xor_sync(kFullMask, kHi, offset));
  }
  return kLo <= qHi && qLo <= kHi;
}

/// Copies kRows rows of `d` elements from x (row r at x + r·stride, that
/// of position i0 + r of batch row b, rotated when `rotated`; rows at or
/// past `valid` read as 0), times `factor`, into dst (fp32, or the storage
/// type for the tensor-core kernels) with leading dimension `ld`. All
/// kBlockThreads threads of the block take part.
template <int kRows = kTile, int kBlockThreads = kThreads, typename T, typename Out>
__device__ __forceinline__ void stageRows(const T *x, int64_t stride, int64_t valid, int d,
                                          const Params &p, int64_t b, int64_t i0, bool rotated,
                                          float factor, Out *dst, int ld) {
  for (int idx = threadIdx.x; idx < kRows * d; idx += kBlockThreads) {
    const int r = idx / d, e = idx - r * d;
    store(dst, r * ld + e,
          r < valid ? factor * loadAt(x + r * stride, e, p, b, i0 + r, rotated) : 0.0f);
  }
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// Block: (b, h, query tile). Shared: scale·q [32][D], k [32][D+1], v [32][D].
template <typename T, int kMaxD, bool kExact>
__global__ void __launch_bounds__(kThreads)
    attentionForward(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                     T *__restrict__ out, float *__restrict__ lse, Params p) {
  constexpr int kChunks = kMaxD / 32;
  extern __shared__ float smem[];
  const int d = kExact ? kMaxD : p.d;
  float *qs = smem;
  float *ks = qs + kTile * d;
  float *vs = ks + kTile * (d + 1);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  const int64_t tiles = (p.t + kTile - 1) / kTile;
  int64_t tile = blockIdx.x % tiles;
  const int64_t bh = blockIdx.x / tiles, h = bh % p.h, b = bh / p.h, g = h / p.group;
  if (p.causal) tile = tiles - 1 - tile;
  const int64_t i0 = tile * kTile;
  const int64_t firstRow = i0 + warp * kRowsPerWarp; // this warp's rows: firstRow + r

  const bool rope = p.ropeCos != nullptr;
  stageRows(q + queryOffset(p, b, i0, h), p.queryStride, p.t - i0, d, p, b, i0, rope, p.scale, qs,
            d);

  float acc[kRowsPerWarp][kChunks];
  float m[kRowsPerWarp], l[kRowsPerWarp];
  int64_t rowSegment[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    rowSegment[r] = p.segments && firstRow + r < p.t ? segmentAt(p, b, firstRow + r) : 0;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[r][c] = 0.0f;
  }
  const float *qw = qs + warp * kRowsPerWarp * d;

  // Keys [0, keyEnd): causal tiles stop at their diagonal (S == T there).
  const int64_t keyEnd = p.causal ? min(p.s, i0 + kTile) : p.s;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kTile) { // block-uniform bounds
    if (!segmentsMeet(p, b, i0, j0)) continue;
    __syncthreads(); // the previous tile's readers are done (and q is staged)
    for (int idx = threadIdx.x; idx < kTile * d; idx += kThreads) {
      const int c = idx / d, e = idx - c * d;
      const int64_t j = j0 + c;
      float kx = 0.0f, vx = 0.0f;
      if (j < keyEnd) {
        const int64_t at = keyOffset(p, b, j, g);
        kx = loadAt(k + at, e, p, b, j, rope);
        vx = load(v, at + e);
      }
      ks[c * (d + 1) + e] = kx;
      vs[c * d + e] = vx;
    }
    __syncthreads();

    // Scores: lane owns key j of the tile, for the warp's 4 query rows.
    const int64_t j = j0 + lane;
    float s[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = 0.0f;
    const float *krow = ks + lane * (d + 1);
    for (int e = 0; e < d; ++e) {
      const float kx = krow[e];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += qw[r * d + e] * kx;
    }
    const int64_t keySegment = p.segments && j < keyEnd ? segmentAt(p, b, j) : 0;

    // Online softmax per row; s[r] becomes the lane's weight P.
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t i = firstRow + r;
      const bool visible = j < keyEnd && (!p.causal || j <= i) && inWindow(p, i, j) &&
                           (!p.segments || keySegment == rowSegment[r]);
      const float score = visible ? capScore(p, s[r]) : -INFINITY;
      const float mNew = fmaxf(m[r], warpMax(score));
      const float safe = mNew == -INFINITY ? 0.0f : mNew; // nothing visible yet: P = 0, not NaN
      const float alpha = expf(m[r] - safe);
      const float weight = expf(score - safe);
      l[r] = l[r] * alpha + warpSum(weight);
      m[r] = mNew;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) acc[r][c] *= alpha;
      s[r] = weight;
    }

    // acc += P·V: lane owns elements lane + 32c of each row.
    for (int jj = 0; jj < kTile; ++jj) {
      float w[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) w[r] = __shfl_sync(kFullMask, s[r], jj);
      const float *vrow = vs + jj * d;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int e = lane + 32 * c;
        if (kExact || e < d) {
          const float vx = vrow[e];
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) acc[r][c] += w[r] * vx;
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = firstRow + r;
    if (i >= p.t) continue; // warp-uniform; no shuffles below
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    T *dst = out + outOffset(p, b, i, h);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int e = lane + 32 * c;
      if (kExact || e < d) store(dst, e, acc[r][c] * inv);
    }
    if (lane == 0) lse[(b * p.h + h) * p.t + i] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
  }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// Drow[(b·H + h)·T + t] = Σ_e dout·out, one warp per (b, t, h) row.
template <typename T>
__global__ void attentionRowDot(const T *__restrict__ out, const T *__restrict__ dout,
                                float *__restrict__ rowDot, int64_t rows, int d, int64_t t,
                                int64_t h) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  // Warp-uniform loop: every lane of a warp takes the same rows.
  for (int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
       row < rows; row += warps) {
    const int64_t base = row * d;
    float sum = 0.0f;
    for (int e = lane; e < d; e += 32) sum += load(out, base + e) * load(dout, base + e);
    sum = warpSum(sum);
    if (lane == 0) {
      const int64_t bt = row / h, head = row % h, b = bt / t, i = bt % t;
      rowDot[(b * h + head) * t + i] = sum;
    }
  }
}

/// The backward's lse: +inf for a row that saw no key (lse −inf) or lies
/// past T, so that its P = exp(s − lse) is 0.
__device__ __forceinline__ float backwardLse(const float *lse, const Params &p, int64_t b,
                                             int64_t h, int64_t i) {
  if (i >= p.t) return INFINITY;
  const float value = lse[(b * p.h + h) * p.t + i];
  return value == -INFINITY ? INFINITY : value;
}

/// dQ. Block: (b, h, query tile). Shared: scale·q [32][D], dout [32][D],
/// k [32][D+1], v [32][D+1].
template <typename T, int kMaxD, bool kExact>
__global__ void __launch_bounds__(kThreads)
    attentionGradQuery(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                       const T *__restrict__ dout, const float *__restrict__ lse,
                       const float *__restrict__ rowDot, T *__restrict__ dq, Params p) {
  constexpr int kChunks = kMaxD / 32;
  extern __shared__ float smem[];
  const int d = kExact ? kMaxD : p.d;
  float *qs = smem;
  float *dos = qs + kTile * d;
  float *ks = dos + kTile * d;
  float *vs = ks + kTile * (d + 1);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  const int64_t tiles = (p.t + kTile - 1) / kTile;
  int64_t tile = blockIdx.x % tiles;
  const int64_t bh = blockIdx.x / tiles, h = bh % p.h, b = bh / p.h, g = h / p.group;
  if (p.causal) tile = tiles - 1 - tile;
  const int64_t i0 = tile * kTile;
  const int64_t firstRow = i0 + warp * kRowsPerWarp;

  const bool rope = p.ropeCos != nullptr;
  stageRows(q + queryOffset(p, b, i0, h), p.queryStride, p.t - i0, d, p, b, i0, rope, p.scale, qs,
            d);
  stageRows(dout + outOffset(p, b, i0, h), p.h * d, p.t - i0, d, p, b, i0, false, 1.0f, dos, d);

  float acc[kRowsPerWarp][kChunks];
  float rowLse[kRowsPerWarp], rowD[kRowsPerWarp];
  int64_t rowSegment[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = firstRow + r;
    rowLse[r] = backwardLse(lse, p, b, h, i);
    rowD[r] = i < p.t ? rowDot[(b * p.h + h) * p.t + i] : 0.0f;
    rowSegment[r] = p.segments && i < p.t ? segmentAt(p, b, i) : 0;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[r][c] = 0.0f;
  }
  const float *qw = qs + warp * kRowsPerWarp * d;
  const float *dow = dos + warp * kRowsPerWarp * d;

  const int64_t keyEnd = p.causal ? min(p.s, i0 + kTile) : p.s;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kTile) { // block-uniform bounds
    if (!segmentsMeet(p, b, i0, j0)) continue;
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile * d; idx += kThreads) {
      const int c = idx / d, e = idx - c * d;
      const int64_t j = j0 + c;
      float kx = 0.0f, vx = 0.0f;
      if (j < keyEnd) {
        const int64_t at = keyOffset(p, b, j, g);
        kx = loadAt(k + at, e, p, b, j, rope);
        vx = load(v, at + e);
      }
      ks[c * (d + 1) + e] = kx;
      vs[c * (d + 1) + e] = vx;
    }
    __syncthreads();

    // Lane owns key j: S and dP for the warp's 4 query rows.
    const int64_t j = j0 + lane;
    float s[kRowsPerWarp], dp[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = dp[r] = 0.0f;
    const float *krow = ks + lane * (d + 1), *vrow = vs + lane * (d + 1);
    for (int e = 0; e < d; ++e) {
      const float kx = krow[e], vx = vrow[e];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        s[r] += qw[r * d + e] * kx;
        dp[r] += dow[r * d + e] * vx;
      }
    }
    const int64_t keySegment = p.segments && j < keyEnd ? segmentAt(p, b, j) : 0;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t i = firstRow + r;
      const bool visible = j < keyEnd && (!p.causal || j <= i) && inWindow(p, i, j) &&
                           (!p.segments || keySegment == rowSegment[r]);
      const float score = capScore(p, s[r]);
      const float weight = visible ? expf(score - rowLse[r]) : 0.0f;
      s[r] = visible ? weight * (dp[r] - rowD[r]) * capSlope(p, score) : 0.0f; // dS
    }

    // dq += dS·K: lane owns elements lane + 32c.
    for (int jj = 0; jj < kTile; ++jj) {
      float ds[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) ds[r] = __shfl_sync(kFullMask, s[r], jj);
      const float *kr = ks + jj * (d + 1);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int e = lane + 32 * c;
        if (kExact || e < d) {
          const float kx = kr[e];
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) acc[r][c] += ds[r] * kx;
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = firstRow + r;
    if (i >= p.t) continue;
    T *dst = dq + queryOffset(p, b, i, h);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int e = lane + 32 * c;
      if (kExact || e < d) store(dst, e, p.scale * acc[r][c]);
    }
    if (rope) rotateBack(dst, p, b, i);
  }
}

/// dK, dV. Block: (b, kv head g, key tile). Shared: scale·k [32][D],
/// v [32][D], q [32][D+1], dout [32][D+1], lse [32], Drow [32].
template <typename T, int kMaxD, bool kExact>
__global__ void __launch_bounds__(kThreads)
    attentionGradKeyValue(const T *__restrict__ q, const T *__restrict__ k,
                          const T *__restrict__ v, const T *__restrict__ dout,
                          const float *__restrict__ lse, const float *__restrict__ rowDot,
                          T *__restrict__ dk, T *__restrict__ dv, Params p) {
  constexpr int kChunks = kMaxD / 32;
  extern __shared__ float smem[];
  const int d = kExact ? kMaxD : p.d;
  float *ks = smem;
  float *vs = ks + kTile * d;
  float *qs = vs + kTile * d;
  float *dos = qs + kTile * (d + 1);
  float *lses = dos + kTile * (d + 1);
  float *dots = lses + kTile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  const int64_t tiles = (p.s + kTile - 1) / kTile;
  const int64_t tile = blockIdx.x % tiles;
  const int64_t bg = blockIdx.x / tiles, g = bg % p.kv, b = bg / p.kv;
  const int64_t j0 = tile * kTile;
  const int64_t firstKey = j0 + warp * kRowsPerWarp; // this warp's keys: firstKey + c

  const bool rope = p.ropeCos != nullptr;
  stageRows(k + keyOffset(p, b, j0, g), p.keyStride, p.s - j0, d, p, b, j0, rope, p.scale, ks, d);
  stageRows(v + keyOffset(p, b, j0, g), p.keyStride, p.s - j0, d, p, b, j0, false, 1.0f, vs, d);

  float accK[kRowsPerWarp][kChunks], accV[kRowsPerWarp][kChunks];
  int64_t keySegment[kRowsPerWarp];
#pragma unroll
  for (int c = 0; c < kRowsPerWarp; ++c) {
    keySegment[c] = p.segments && firstKey + c < p.s ? segmentAt(p, b, firstKey + c) : 0;
#pragma unroll
    for (int x = 0; x < kChunks; ++x) accK[c][x] = accV[c][x] = 0.0f;
  }
  const float *kw = ks + warp * kRowsPerWarp * d, *vw = vs + warp * kRowsPerWarp * d;

  // Causal: queries before j0 see none of these keys (query and key tiles
  // are both 32 wide and aligned, S == T).
  const int64_t firstQuery = p.causal ? j0 : 0;
  for (int64_t h = g * p.group; h < (g + 1) * p.group; ++h) // block-uniform bounds
    for (int64_t i0 = firstQuery; i0 < p.t; i0 += kTile) {
      if (!segmentsMeet(p, b, i0, j0)) continue;
      __syncthreads(); // the previous query tile's readers are done
      stageRows(q + queryOffset(p, b, i0, h), p.queryStride, p.t - i0, d, p, b, i0, rope, 1.0f, qs,
                d + 1);
      stageRows(dout + outOffset(p, b, i0, h), p.h * d, p.t - i0, d, p, b, i0, false, 1.0f, dos,
                d + 1);
      if (threadIdx.x < kTile) {
        const int64_t i = i0 + threadIdx.x;
        lses[threadIdx.x] = backwardLse(lse, p, b, h, i);
        dots[threadIdx.x] = i < p.t ? rowDot[(b * p.h + h) * p.t + i] : 0.0f;
      }
      __syncthreads();

      // Lane owns query i: S and dP against the warp's 4 keys.
      const int64_t i = i0 + lane;
      float s[kRowsPerWarp], dp[kRowsPerWarp];
#pragma unroll
      for (int c = 0; c < kRowsPerWarp; ++c) s[c] = dp[c] = 0.0f;
      const float *qrow = qs + lane * (d + 1), *dorow = dos + lane * (d + 1);
      for (int e = 0; e < d; ++e) {
        const float qx = qrow[e], dox = dorow[e];
#pragma unroll
        for (int c = 0; c < kRowsPerWarp; ++c) {
          s[c] += qx * kw[c * d + e];
          dp[c] += dox * vw[c * d + e];
        }
      }
      const float queryLse = lses[lane], queryD = dots[lane];
      const int64_t querySegment = p.segments && i < p.t ? segmentAt(p, b, i) : 0;
#pragma unroll
      for (int c = 0; c < kRowsPerWarp; ++c) {
        const int64_t j = firstKey + c;
        const bool visible = i < p.t && j < p.s && (!p.causal || j <= i) && inWindow(p, i, j) &&
                             (!p.segments || querySegment == keySegment[c]);
        const float score = capScore(p, s[c]);
        const float weight = visible ? expf(score - queryLse) : 0.0f;
        s[c] = weight; // P
        dp[c] = visible ? weight * (dp[c] - queryD) * capSlope(p, score) : 0.0f; // dS
      }

      // dv += Pᵀ·dout, dk += dSᵀ·q: lane owns elements lane + 32x.
      for (int ii = 0; ii < kTile; ++ii) {
        float pw[kRowsPerWarp], ds[kRowsPerWarp];
#pragma unroll
        for (int c = 0; c < kRowsPerWarp; ++c) {
          pw[c] = __shfl_sync(kFullMask, s[c], ii);
          ds[c] = __shfl_sync(kFullMask, dp[c], ii);
        }
        const float *qr = qs + ii * (d + 1), *dor = dos + ii * (d + 1);
#pragma unroll
        for (int x = 0; x < kChunks; ++x) {
          const int e = lane + 32 * x;
          if (kExact || e < d) {
            const float qx = qr[e], dox = dor[e];
#pragma unroll
            for (int c = 0; c < kRowsPerWarp; ++c) {
              accV[c][x] += pw[c] * dox;
              accK[c][x] += ds[c] * qx;
            }
          }
        }
      }
    }

#pragma unroll
  for (int c = 0; c < kRowsPerWarp; ++c) {
    const int64_t j = firstKey + c;
    if (j >= p.s) continue;
    T *dkRow = dk + keyOffset(p, b, j, g), *dvRow = dv + keyOffset(p, b, j, g);
#pragma unroll
    for (int x = 0; x < kChunks; ++x) {
      const int e = lane + 32 * x;
      if (kExact || e < d) {
        store(dkRow, e, p.scale * accK[c][x]);
        store(dvRow, e, accV[c][x]);
      }
    }
    if (rope) rotateBack(dkRow, p, b, j);
  }
}

//===----------------------------------------------------------------------===//
// Kernel selection and launch
//===----------------------------------------------------------------------===//

#include "kernels/cuda/AttentionMma.cuh"

/// One implementation's three kernels and their launch geometry.
template <typename T> struct AttentionFns {
  void (*forward)(const T *, const T *, const T *, T *, float *, Params) = nullptr;
  void (*gradQuery)(const T *, const T *, const T *, const T *, const float *, const float *, T *,
                    Params) = nullptr;
  void (*gradKeyValue)(const T *, const T *, const T *, const T *, const float *, const float *,
                       T *, T *, Params) = nullptr;
  int threads = kThreads; ///< per block
  int tile = kTile;       ///< rows a block owns
  const char *impl = "cuda-cores"; ///< as `llmc-run --attention` names it
  size_t forwardSmem = 0, gradQuerySmem = 0, gradKeyValueSmem = 0; ///< dynamic shared bytes
};

size_t forwardSmem(int64_t d) { return sizeof(float) * kTile * (3 * d + 1); }
size_t gradQuerySmem(int64_t d) { return sizeof(float) * kTile * (4 * d + 2); }
size_t gradKeyValueSmem(int64_t d) { return sizeof(float) * (kTile * (4 * d + 2) + 2 * kTile); }

template <typename T, int kMaxD, bool kExact> AttentionFns<T> fnsFor(int d) {
  AttentionFns<T> f;
  f.forward = attentionForward<T, kMaxD, kExact>;
  f.gradQuery = attentionGradQuery<T, kMaxD, kExact>;
  f.gradKeyValue = attentionGradKeyValue<T, kMaxD, kExact>;
  f.forwardSmem = forwardSmem(d);
  f.gradQuerySmem = gradQuerySmem(d);
  f.gradKeyValueSmem = gradKeyValueSmem(d);
  return f;
}

template <typename T, int D> AttentionFns<T> mmaFnsFor() {
  AttentionFns<T> f;
  f.forward = attentionForwardMma<T, D>;
  f.gradQuery = attentionGradQueryMma<T, D>;
  f.gradKeyValue = attentionGradKeyValueMma<T, D>;
  f.threads = kMmaThreads;
  f.tile = kMmaTile;
  f.impl = "tensor-cores";
  f.forwardSmem = mmaForwardSmem<D>();
  f.gradQuerySmem = f.gradKeyValueSmem = mmaBackwardSmem<D>();
  return f;
}

/// "" when the current device runs the tensor-core kernels of head dim D —
/// bf16/f16 tensor cores WMMA can use (compute capability 8.0 or more) and
/// shared memory for both directions (sm_86 and sm_89 allow a block 99 KiB,
/// less than D = 128's forward or either backward needs) — else why not.
template <int D> std::string mmaRefusal() {
  int device = 0, major = 0, optin = 0;
  LLMC_CUDA_CHECK(cudaGetDevice(&device));
  LLMC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  LLMC_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (major < 8)
    return "tensor cores need sm_80 or later";
  const size_t need = std::max(mmaForwardSmem<D>(), mmaBackwardSmem<D>());
  if (need > static_cast<size_t>(optin))
    return "tensor cores at head dim " + std::to_string(D) + " need " + std::to_string(need) +
           " bytes of shared memory a block, the device allows " + std::to_string(optin);
  return "";
}

/// The implementation for head dim d (1 ≤ d ≤ kMaxHeadDim); `why` says why
/// tensor cores, when asked for, do not take it.
template <typename T> AttentionFns<T> selectFns(int d, std::string &why) {
  if (attentionImpl() == AttentionImpl::TensorCores) {
    why = "tensor cores take bf16 and f16 at head dim 64 or 128";
    if constexpr (!std::is_same_v<T, float>) {
      if (d == 64 && (why = mmaRefusal<64>()).empty())
        return mmaFnsFor<T, 64>();
      if (d == 128 && (why = mmaRefusal<128>()).empty())
        return mmaFnsFor<T, 128>();
    }
  }
  if (d == 64) return fnsFor<T, 64, true>(d);
  if (d == 128) return fnsFor<T, 128, true>(d);
  if (d <= 32) return fnsFor<T, 32, false>(d);
  if (d <= 64) return fnsFor<T, 64, false>(d);
  if (d <= 128) return fnsFor<T, 128, false>(d);
  return fnsFor<T, 256, false>(d);
}

/// Blocks of a launch over `rows` rows in tiles of `tile` for `outer`
/// (b, head) pairs: 0 when there is nothing to do.
int64_t tileBlocks(int64_t outer, int64_t rows, int64_t tile = kTile) {
  return outer * ((rows + tile - 1) / tile);
}

/// attention_rope's tables on the device — cos, sin and the inverse's sin,
/// each [T, D/2], rope's own (contracts::ropeTables) — and the positions
/// input, entered into `p`; nothing without rotation.
class RopeTables {
public:
  RopeTables(const KernelArgs &args, const contracts::AttentionBinding &b, Params &p) {
    if (!b.rope) return;
    const int64_t half = b.d / 2, n = b.rotation.rows * half;
    std::vector<float> host(static_cast<size_t>(3 * n));
    contracts::RopeBinding inverse = b.rotation;
    inverse.inverse = true;
    contracts::ropeTables(b.rotation, b.d, host.data(), host.data() + n);
    contracts::ropeTables(inverse, b.d, host.data(), host.data() + 2 * n);
    table_ = BindScratch(host.size() * sizeof(float));
    if (n > 0) copyToDevice(table_.as<void>(), host.data(), host.size() * sizeof(float));
    p.ropeCos = table_.as<float>(), p.ropeSin = p.ropeCos + n, p.ropeSinInverse = p.ropeSin + n;
    p.ropeRows = b.rotation.rows;
    if (b.rotation.positions) {
      p.positions = args.inputs[b.positionIndex].data;
      p.widePositions = args.inputs[b.positionIndex].dtype == DType::I64;
    }
  }

private:
  BindScratch table_;
};

template <typename T> class AttentionKernel final : public Kernel {
public:
  AttentionKernel(const KernelArgs &args, const contracts::AttentionBinding &b, const Params &p,
                  AttentionFns<T> fns)
      : out_(args.outputs[0].as<T>()), lse_(args.outputs[1].as<float>()), p_(p),
        rope_(args, b, p_), fns_(fns), blocks_(tileBlocks(p.b * p.h, p.t, fns.tile)) {
    std::tie(q_, k_, v_) = contracts::qkvOf<const T>(args.inputs, b);
  }

  void run(const StepContext &ctx) override {
    if (blocks_ == 0) return;
    fns_.forward<<<static_cast<unsigned>(blocks_), fns_.threads, fns_.forwardSmem,
                   streamOf(ctx)>>>(q_, k_, v_, out_, lse_, p_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *q_, *k_, *v_;
  T *out_;
  float *lse_;
  Params p_;
  RopeTables rope_;
  AttentionFns<T> fns_;
  int64_t blocks_;
};

template <typename T> class AttentionGradKernel final : public Kernel {
public:
  AttentionGradKernel(const KernelArgs &args, const contracts::AttentionBinding &b,
                      const Params &p, AttentionFns<T> fns)
      : out_(args.inputs[contracts::inputsAfterQkv(b)].as<T>()),
        lse_(args.inputs[contracts::inputsAfterQkv(b) + 1].as<float>()),
        dout_(args.inputs[contracts::inputsAfterQkv(b) + 2].as<T>()), p_(p), rope_(args, b, p_),
        fns_(fns),
        queryBlocks_(tileBlocks(p.b * p.h, p.t, fns.tile)),
        keyBlocks_(tileBlocks(p.b * p.kv, p.s, fns.tile)),
        rowDot_(sizeof(float) * static_cast<size_t>(p.b * p.h * p.t)) {
    std::tie(q_, k_, v_) = contracts::qkvOf<const T>(args.inputs, b);
    std::tie(dq_, dk_, dv_) = contracts::qkvOf<T>(args.outputs, b);
  }

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    const int64_t rows = p_.b * p_.t * p_.h;
    if (rows > 0) {
      attentionRowDot<<<gridFor(rows * 32), kBlock, 0, stream>>>(out_, dout_, rowDot_.as<float>(),
                                                                  rows, p_.d, p_.t, p_.h);
      LLMC_CUDA_CHECK_LAUNCH();
    }
    if (queryBlocks_ > 0) {
      fns_.gradQuery<<<static_cast<unsigned>(queryBlocks_), fns_.threads, fns_.gradQuerySmem,
                       stream>>>(q_, k_, v_, dout_, lse_, rowDot_.as<float>(), dq_, p_);
      LLMC_CUDA_CHECK_LAUNCH();
    }
    if (keyBlocks_ > 0) {
      fns_.gradKeyValue<<<static_cast<unsigned>(keyBlocks_), fns_.threads,
                          fns_.gradKeyValueSmem, stream>>>(q_, k_, v_, dout_, lse_,
                                                           rowDot_.as<float>(), dk_, dv_, p_);
      LLMC_CUDA_CHECK_LAUNCH();
    }
  }

private:
  const T *q_, *k_, *v_, *out_;
  const float *lse_;
  const T *dout_;
  T *dq_, *dk_, *dv_;
  Params p_;
  RopeTables rope_;
  AttentionFns<T> fns_;
  int64_t queryBlocks_, keyBlocks_;
  BindScratch rowDot_; ///< rowsum(dout ∘ out) [B, H, T]
};

//===----------------------------------------------------------------------===//
// Factories: the contract's checks, then the CUDA limits
//===----------------------------------------------------------------------===//

/// The kernels' parameters of a binding, all but the rotation's tables.
Params paramsOf(const contracts::AttentionBinding &b, const KernelArgs &args) {
  Params p;
  p.b = b.b, p.t = b.t, p.h = b.h, p.s = b.s, p.kv = b.kv, p.group = b.group;
  p.queryStride = b.queryStride(), p.keyStride = b.keyStride();
  p.d = static_cast<int>(b.d);
  p.scale = b.scale;
  p.causal = b.causal;
  p.window = b.window;
  p.softcap = b.softcap;
  if (b.segments) {
    p.segments = args.inputs[b.segmentIndex].data;
    p.wideSegments = b.segmentDType == DType::I64;
  }
  return p;
}

/// What only the CUDA kernels limit: the head dim and the grid size.
bool checkCudaLimits(Validator &v, const contracts::AttentionBinding &b) {
  const std::string q = (b.packed ? "qkv " : "q ") + v.in(0).describe();
  if (b.d < 1 || b.d > kMaxHeadDim)
    return v.fail("head dim D = " + std::to_string(b.d) +
                  " is outside the CUDA kernels' range [1, " + std::to_string(kMaxHeadDim) +
                  "]: " + (b.packed ? "qkv is " : "q is ") + v.in(0).describe());
  if (tileBlocks(b.b * b.h, b.t) > INT_MAX || tileBlocks(b.b * b.kv, b.s) > INT_MAX)
    return v.fail(q + " needs more thread blocks than one launch allows");
  return true;
}

/// llmc's forward kernel for `name`, its choice recorded with `why` (why
/// not on the implementation asked for; "" when it is).
template <typename T>
std::unique_ptr<Kernel> bindForward(Validator &v, const char *name, const KernelArgs &args,
                                    const contracts::AttentionBinding &b, std::string why) {
  Params p = paramsOf(b, args);
  AttentionFns<T> fns = selectFns<T>(p.d, why);
  if (!allowSmem(v, reinterpret_cast<const void *>(fns.forward), fns.forwardSmem))
    return nullptr;
  noteAttention(name, fns.impl, why);
  return std::make_unique<AttentionKernel<T>>(args, b, p, fns);
}

/// llmc's backward kernels for `name`, as bindForward.
template <typename T>
std::unique_ptr<Kernel> bindBackward(Validator &v, const char *name, const KernelArgs &args,
                                     const contracts::AttentionBinding &b, std::string why) {
  Params p = paramsOf(b, args);
  AttentionFns<T> fns = selectFns<T>(p.d, why);
  if (!allowSmem(v, reinterpret_cast<const void *>(fns.gradQuery), fns.gradQuerySmem) ||
      !allowSmem(v, reinterpret_cast<const void *>(fns.gradKeyValue), fns.gradKeyValueSmem))
    return nullptr;
  noteAttention(name, fns.impl, why);
  return std::make_unique<AttentionGradKernel<T>>(args, b, p, fns);
}

using Bind = bool (*)(const KernelArgs &, std::string &, contracts::AttentionBinding *);

/// The contract's checks, the CUDA limits, then cuDNN when it is wanted and
/// takes the op, else llmc's forward or backward kernels for the dtype.
template <bool kBackward>
std::unique_ptr<Kernel> make(const char *name, Bind bind, const KernelArgs &args,
                             std::string &error) {
  contracts::AttentionBinding b;
  if (!bind(args, error, &b)) return nullptr;
  Validator v(name, args, error);
  if (!checkCudaLimits(v, b)) return nullptr;
  std::string why;
  const AttentionImpl impl = attentionImpl();
  if (impl == AttentionImpl::Auto || impl == AttentionImpl::Cudnn) {
    if (std::unique_ptr<Kernel> kernel = bindAttentionOnCudnn(args, b, kBackward, why)) {
      noteAttention(name, "cudnn", "");
      return kernel;
    }
    why = "cuDNN: " + why;
  }
  return dispatchFloat<FloatTypes>(b.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return kBackward ? bindBackward<T>(v, name, args, b, why)
                     : bindForward<T>(v, name, args, b, why);
  });
}

std::unique_ptr<Kernel> makeCudaAttention(const KernelArgs &args, std::string &error) {
  return make<false>("attention", contracts::bindAttention, args, error);
}
std::unique_ptr<Kernel> makeCudaAttentionGrad(const KernelArgs &args, std::string &error) {
  return make<true>("attention_grad", contracts::bindAttentionGrad, args, error);
}
std::unique_ptr<Kernel> makeCudaAttentionPacked(const KernelArgs &args, std::string &error) {
  return make<false>("attention_packed", contracts::bindAttentionPacked, args, error);
}
std::unique_ptr<Kernel> makeCudaAttentionPackedGrad(const KernelArgs &args, std::string &error) {
  return make<true>("attention_packed_grad", contracts::bindAttentionPackedGrad, args, error);
}
std::unique_ptr<Kernel> makeCudaAttentionRope(const KernelArgs &args, std::string &error) {
  return make<false>("attention_rope", contracts::bindAttentionRope, args, error);
}
std::unique_ptr<Kernel> makeCudaAttentionRopeGrad(const KernelArgs &args, std::string &error) {
  return make<true>("attention_rope_grad", contracts::bindAttentionRopeGrad, args, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "attention", makeCudaAttention);
LLMC_REGISTER_KERNEL(CUDA, "attention_grad", makeCudaAttentionGrad);
LLMC_REGISTER_KERNEL(CUDA, "attention_packed", makeCudaAttentionPacked);
LLMC_REGISTER_KERNEL(CUDA, "attention_packed_grad", makeCudaAttentionPackedGrad);
LLMC_REGISTER_KERNEL(CUDA, "attention_rope", makeCudaAttentionRope);
LLMC_REGISTER_KERNEL(CUDA, "attention_rope_grad", makeCudaAttentionRopeGrad);

} // namespace llmc::cuda
