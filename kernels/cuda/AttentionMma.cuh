//===- AttentionMma.cuh - attention's three kernels on tensor cores -------===//
//
// The forward, dQ and dK/dV kernels of attention.cu for bf16 and f16 with
// head dims 64 and 128, their products on tensor cores (WMMA m16n16k16,
// fp32 accumulation) instead of CUDA cores. Included by attention.cu inside
// its anonymous namespace, after Params and the staging helpers, which
// these kernels share: same masks (causal, segment ids, rows past T), same
// rope staging and rotation back, same lse conventions, same block-uniform
// skipping of tiles whose segment ranges do not meet, same deterministic
// ownership (every output row is written by one warp, no atomics).
//
// Geometry: a block of 4 warps owns a tile of 64 rows (query rows, or key
// rows in the dK/dV pass), 16 per warp (one fragment's height); the other
// operand streams through shared memory in tiles of 64 rows. Operands are
// staged in the storage type, each row padded by 8 elements; score tiles
// are fp32 [64][68]. Per streamed tile a warp computes its [16][64] scores
// with WMMA, then its lanes apply scale, mask and softmax (the forward's
// online max and sum, or the backward's P and dS) element by element and
// store P or dS in the storage type for the next product:
//   forward: S = q·kᵀ, online softmax, O = α·O + P·v, O kept in shared
//            memory in fp32 (a per-row rescale needs element access);
//   dQ:      S = q·kᵀ, dP = dout·vᵀ, dS = P∘(dP − Drow), dq += dS·k in
//            fragments;
//   dK, dV:  Sᵀ = k·qᵀ, dPᵀ = v·doutᵀ, dv += Pᵀ·dout, dk += dSᵀ·q in
//            fragments, over every query head of the kv group.
// The scale multiplies the fp32 scores (the CUDA-core kernels scale q as it
// is staged), and P and dS are rounded to the storage type before their
// products: what FlashAttention does, within the 1e-2 of the bf16/f16
// conformance tests.
//
// Selected at bind time when `cuda::attentionImpl()` is TensorCores
// (`llmc-run --attention tensor-cores`), the dtype is bf16 or f16, D is 64
// or 128 and the device has compute capability 8.0 or more; everything else
// runs the CUDA-core kernels.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_ATTENTIONMMA_CUH
#define LLMC_KERNELS_CUDA_ATTENTIONMMA_CUH

// <mma.h> (WMMA) is included by attention.cu, outside its namespaces.

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kMmaTile = 64;     ///< rows of a block's tile and of a streamed tile
constexpr int kMmaWarpRows = 16; ///< rows per warp: one fragment's height
static_assert(kMmaWarps * kMmaWarpRows == kMmaTile, "the warps cover the tile");

/// Leading dimensions (elements) of the shared tiles: multiples of 8 for
/// 16-bit types and of 4 for fp32, as WMMA requires, padded against bank
/// conflicts.
template <int D> struct MmaLayout {
  static constexpr int ldT = D + 8;         ///< [64][D] of the storage type
  static constexpr int ldS = kMmaTile + 4;  ///< [64][64] fp32 scores
  static constexpr int ldP = kMmaTile + 8;  ///< [64][64] of the storage type (P, dS)
  static constexpr int ldO = D + 4;         ///< [64][D] fp32 (O, or an output's staging)
};

/// Every shared array starts 128-byte aligned (WMMA needs 32).
constexpr size_t mmaAlign(size_t bytes) { return (bytes + 127) / 128 * 128; }
template <int D> constexpr size_t mmaTileBytes() {
  return mmaAlign(2 * kMmaTile * MmaLayout<D>::ldT);
}
constexpr size_t mmaScoreBytes() { return mmaAlign(4 * kMmaTile * MmaLayout<64>::ldS); }
constexpr size_t mmaWeightBytes() { return mmaAlign(2 * kMmaTile * MmaLayout<64>::ldP); }
template <int D> constexpr size_t mmaOutBytes() {
  return mmaAlign(4 * kMmaTile * MmaLayout<D>::ldO);
}
constexpr size_t mmaRowBytes() { return mmaAlign(8 * kMmaTile); } ///< 64 floats or int64s

template <int D> constexpr size_t mmaForwardSmem() {
  return 3 * mmaTileBytes<D>() + mmaScoreBytes() + mmaWeightBytes() + mmaOutBytes<D>() +
         4 * mmaRowBytes();
}
/// Both backward kernels' (MmaBackwardShared).
template <int D> constexpr size_t mmaBackwardSmem() {
  return 4 * mmaTileBytes<D>() + 2 * mmaScoreBytes() + 2 * mmaWeightBytes() + mmaOutBytes<D>() +
         4 * mmaRowBytes();
}

/// Takes the next `bytes` (rounded up to 128) of shared memory at `at`.
template <typename X> __device__ __forceinline__ X *mmaCarve(unsigned char *&at, size_t bytes) {
  X *x = reinterpret_cast<X *>(at);
  at += mmaAlign(bytes);
  return x;
}

/// Rows [i0, i0 + 64) of x into a [64][ldT] tile of T: stageRows for the
/// tensor-core geometry (rows at or past `valid` are 0). All threads.
template <typename T, int D>
__device__ __forceinline__ void mmaStage(const T *x, int64_t stride, int64_t valid,
                                         const Params &p, int64_t b, int64_t i0, bool rotated,
                                         T *dst) {
  stageRows<kMmaTile, kMmaThreads>(x, stride, valid, D, p, b, i0, rotated, 1.0f, dst,
                                   MmaLayout<D>::ldT);
}

/// The backward kernels' shared memory, one layout for both: the two tiles
/// the block owns (dQ: q, dout; dK/dV: k, v), the two streamed past them
/// (k, v; q, dout), two fp32 score tiles (S and dP, or their transposes),
/// two weight tiles of T (dS; Pᵀ and dSᵀ), the fp32 staging of a warp's
/// output rows, and per query row lse, Drow and segment id, per key row
/// segment id.
template <typename T, int D> struct MmaBackwardShared {
  T *own[2], *streamed[2];
  float *scores[2];
  T *weights[2];
  float *out, *lses, *dots;
  int64_t *querySegments, *keySegments;

  __device__ explicit MmaBackwardShared(unsigned char *at) {
    for (T *&tile : own) tile = mmaCarve<T>(at, mmaTileBytes<D>());
    for (T *&tile : streamed) tile = mmaCarve<T>(at, mmaTileBytes<D>());
    for (float *&tile : scores) tile = mmaCarve<float>(at, mmaScoreBytes());
    for (T *&tile : weights) tile = mmaCarve<T>(at, mmaWeightBytes());
    out = mmaCarve<float>(at, mmaOutBytes<D>());
    lses = mmaCarve<float>(at, mmaRowBytes());
    dots = mmaCarve<float>(at, mmaRowBytes());
    querySegments = mmaCarve<int64_t>(at, mmaRowBytes());
    keySegments = mmaCarve<int64_t>(at, mmaRowBytes());
  }
};

/// Segment ids of positions [i0, i0 + 64) of batch row b (0 past `valid` or
/// without segment ids) into ids[64]. Threads 0..63.
__device__ __forceinline__ void mmaStageSegments(const Params &p, int64_t b, int64_t i0,
                                                 int64_t valid, int64_t *ids) {
  if (threadIdx.x < kMmaTile)
    ids[threadIdx.x] = p.segments && threadIdx.x < valid ? segmentAt(p, b, i0 + threadIdx.x) : 0;
}

/// Whether the 64-wide tiles at i0 and j0 of row b share a segment id range
/// (always without segment ids): segmentsMeet on each pair of their 32-wide
/// halves. Block-uniform; all lanes must be active.
__device__ __forceinline__ bool mmaSegmentsMeet(const Params &p, int64_t b, int64_t i0,
                                                int64_t j0) {
  if (!p.segments) return true;
  bool meet = false;
  for (int qi = 0; qi < 2; ++qi)
    for (int kj = 0; kj < 2; ++kj) {
      const int64_t qa = i0 + 32 * qi, ka = j0 + 32 * kj;
      if (qa < p.t && ka < p.t) meet = meet || segmentsMeet(p, b, qa, ka);
    }
  return meet;
}

namespace wmma = nvcuda::wmma;
using MmaAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

/// out[16][64] (fp32, leading dim ldS) = a[16][D] · bᵀ, b being [64][D]; a
/// and b are tiles of T with leading dim ldT. One warp.
template <typename T, int D>
__device__ __forceinline__ void mmaScores(const T *a, const T *bt, float *out) {
  constexpr int ldT = MmaLayout<D>::ldT;
#pragma unroll
  for (int nb = 0; nb < kMmaTile / 16; ++nb) {
    MmaAcc c;
    wmma::fill_fragment(c, 0.0f);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, a + kk * 16, ldT);
      wmma::load_matrix_sync(fb, bt + nb * 16 * ldT + kk * 16, ldT);
      wmma::mma_sync(c, fa, fb, c);
    }
    wmma::store_matrix_sync(out + nb * 16, c, MmaLayout<D>::ldS, wmma::mem_row_major);
  }
}

/// A warp's [16][D] fp32 accumulator in fragments: acc += w·m, w a [16][64]
/// tile of T (leading dim ldP), m a [64][D] tile of T (leading dim ldT).
template <typename T, int D> struct MmaRows {
  MmaAcc c[D / 16];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int db = 0; db < D / 16; ++db) wmma::fill_fragment(c[db], 0.0f);
  }
  __device__ __forceinline__ void add(const T *w, const T *m) {
#pragma unroll
    for (int kk = 0; kk < kMmaTile / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, w + kk * 16, MmaLayout<D>::ldP);
#pragma unroll
      for (int db = 0; db < D / 16; ++db) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fb, m + kk * 16 * MmaLayout<D>::ldT + db * 16, MmaLayout<D>::ldT);
        wmma::mma_sync(c[db], fa, fb, c[db]);
      }
    }
  }
  /// Into dst[16][D] (fp32, leading dim ldO).
  __device__ __forceinline__ void storeTo(float *dst) const {
#pragma unroll
    for (int db = 0; db < D / 16; ++db)
      wmma::store_matrix_sync(dst + db * 16, c[db], MmaLayout<D>::ldO, wmma::mem_row_major);
  }
};

/// O[16][D] (fp32 in shared memory, leading dim ldO) += w·m as in MmaRows.
template <typename T, int D>
__device__ __forceinline__ void mmaAccumulateShared(const T *w, const T *m, float *o) {
  constexpr int ldO = MmaLayout<D>::ldO, ldT = MmaLayout<D>::ldT, ldP = MmaLayout<D>::ldP;
#pragma unroll
  for (int db = 0; db < D / 16; ++db) {
    MmaAcc c;
    wmma::load_matrix_sync(c, o + db * 16, ldO, wmma::mem_row_major);
#pragma unroll
    for (int kk = 0; kk < kMmaTile / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, w + kk * 16, ldP);
      wmma::load_matrix_sync(fb, m + kk * 16 * ldT + db * 16, ldT);
      wmma::mma_sync(c, fa, fb, c);
    }
    wmma::store_matrix_sync(o + db * 16, c, ldO, wmma::mem_row_major);
  }
}

/// Whether key j is visible to query i (S == T under causal or segments);
/// segment ids already staged.
__device__ __forceinline__ bool mmaVisible(const Params &p, int64_t i, int64_t j, int64_t keyEnd,
                                           int64_t querySegment, int64_t keySegment) {
  return j < keyEnd && (!p.causal || j <= i) && inWindow(p, i, j) &&
         (!p.segments || querySegment == keySegment);
}

/// The backward's lse (backwardLse) and Drow of query rows [i0, i0 + 64)
/// of head h into lses[64], dots[64]. Threads 0..63.
__device__ __forceinline__ void mmaStageRowStats(const float *lse, const float *rowDot,
                                                 const Params &p, int64_t b, int64_t h,
                                                 int64_t i0, float *lses, float *dots) {
  if (threadIdx.x < kMmaTile) {
    const int64_t i = i0 + threadIdx.x;
    lses[threadIdx.x] = backwardLse(lse, p, b, h, i);
    dots[threadIdx.x] = i < p.t ? rowDot[(b * p.h + h) * p.t + i] : 0.0f;
  }
}

/// Stores a warp's 16 rows staged in `os` (fp32, leading dim ldO) times
/// `factor` as rows first + r (while < limit) of x: query rows of head
/// `head` (queryOffset) when `queries`, else key rows of kv head `head`
/// (keyOffset); each rotated back as the inverse rope would when `rotate`.
template <typename T, int D>
__device__ __forceinline__ void mmaStoreRows(const float *os, T *x, const Params &p, int64_t b,
                                             int64_t head, int64_t first, int64_t limit,
                                             bool queries, float factor, bool rotate) {
  const int lane = threadIdx.x & 31;
  for (int r = 0; r < kMmaWarpRows; ++r) {
    const int64_t i = first + r;
    if (i >= limit) break; // warp-uniform
    T *dst = x + (queries ? queryOffset(p, b, i, head) : keyOffset(p, b, i, head));
    for (int e = lane; e < D; e += 32) store(dst, e, factor * os[r * MmaLayout<D>::ldO + e]);
    if (rotate) rotateBack(dst, p, b, i);
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define LLMC_MMA_UNSUPPORTED() __trap() // never selected below sm_80 (see selectFns)
#endif

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// Block: (b, h, 64-query tile).
template <typename T, int D>
__global__ void __launch_bounds__(kMmaThreads)
    attentionForwardMma(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                        T *__restrict__ out, float *__restrict__ lse, Params p) {
#ifdef LLMC_MMA_UNSUPPORTED
  LLMC_MMA_UNSUPPORTED();
#else
  using L = MmaLayout<D>;
  extern __shared__ __align__(128) unsigned char mmaSmem[];
  unsigned char *at = mmaSmem;
  T *qs = mmaCarve<T>(at, mmaTileBytes<D>());
  T *ks = mmaCarve<T>(at, mmaTileBytes<D>());
  T *vs = mmaCarve<T>(at, mmaTileBytes<D>());
  float *ss = mmaCarve<float>(at, mmaScoreBytes());
  T *ps = mmaCarve<T>(at, mmaWeightBytes());
  float *os = mmaCarve<float>(at, mmaOutBytes<D>());
  float *rowMax = mmaCarve<float>(at, mmaRowBytes());
  float *rowSum = mmaCarve<float>(at, mmaRowBytes());
  int64_t *querySegments = mmaCarve<int64_t>(at, mmaRowBytes());
  int64_t *keySegments = mmaCarve<int64_t>(at, mmaRowBytes());
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wr = warp * kMmaWarpRows;

  const int64_t tiles = (p.t + kMmaTile - 1) / kMmaTile;
  int64_t tile = blockIdx.x % tiles;
  const int64_t bh = blockIdx.x / tiles, h = bh % p.h, b = bh / p.h, g = h / p.group;
  if (p.causal) tile = tiles - 1 - tile; // later query tiles see more keys: issued first
  const int64_t i0 = tile * kMmaTile;
  const bool rope = p.ropeCos != nullptr;

  mmaStage<T, D>(q + queryOffset(p, b, i0, h), p.queryStride, p.t - i0, p, b, i0, rope, qs);
  mmaStageSegments(p, b, i0, p.t - i0, querySegments);
  for (int idx = threadIdx.x; idx < kMmaTile * L::ldO; idx += kMmaThreads) os[idx] = 0.0f;
  if (threadIdx.x < kMmaTile) rowMax[threadIdx.x] = -INFINITY, rowSum[threadIdx.x] = 0.0f;
  __syncthreads();

  const int64_t keyEnd = p.causal ? min(p.s, i0 + kMmaTile) : p.s;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kMmaTile) { // block-uniform bounds
    if (!mmaSegmentsMeet(p, b, i0, j0)) continue;
    __syncthreads(); // the previous tile's readers are done
    mmaStage<T, D>(k + keyOffset(p, b, j0, g), p.keyStride, keyEnd - j0, p, b, j0, rope, ks);
    mmaStage<T, D>(v + keyOffset(p, b, j0, g), p.keyStride, keyEnd - j0, p, b, j0, false, vs);
    mmaStageSegments(p, b, j0, keyEnd - j0, keySegments);
    __syncthreads();

    mmaScores<T, D>(qs + wr * L::ldT, ks, ss + wr * L::ldS);
    __syncwarp();
    // Online softmax, one row at a time by the whole warp (lane: keys lane
    // and lane + 32); P rounded to T, and l summed from the rounded P.
    for (int r = 0; r < kMmaWarpRows; ++r) {
      const int row = wr + r;
      const int64_t i = i0 + row;
      float score[2], tileMax = -INFINITY;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int c = lane + 32 * half;
        const bool visible =
            mmaVisible(p, i, j0 + c, keyEnd, querySegments[row], keySegments[c]);
        score[half] = visible ? capScore(p, p.scale * ss[row * L::ldS + c]) : -INFINITY;
        tileMax = fmaxf(tileMax, score[half]);
      }
      const float mOld = rowMax[row];
      const float mNew = fmaxf(mOld, warpMax(tileMax));
      const float safe = mNew == -INFINITY ? 0.0f : mNew; // nothing visible yet: P = 0, not NaN
      const float alpha = expf(mOld - safe);
      float sum = 0.0f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float weight = roundTo<T>(expf(score[half] - safe));
        store(ps, row * L::ldP + lane + 32 * half, weight);
        sum += weight;
      }
      sum = warpSum(sum);
      for (int e = lane; e < D; e += 32) os[row * L::ldO + e] *= alpha;
      __syncwarp(); // every lane read rowMax and rowSum before lane 0 writes
      if (lane == 0) rowMax[row] = mNew, rowSum[row] = rowSum[row] * alpha + sum;
      __syncwarp();
    }
    mmaAccumulateShared<T, D>(ps + wr * L::ldP, vs, os + wr * L::ldO);
    __syncwarp();
  }

  for (int r = 0; r < kMmaWarpRows; ++r) {
    const int row = wr + r;
    const int64_t i = i0 + row;
    if (i >= p.t) break; // warp-uniform
    const float l = rowSum[row];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    T *dst = out + outOffset(p, b, i, h);
    for (int e = lane; e < D; e += 32) store(dst, e, os[row * L::ldO + e] * inv);
    if (lane == 0) lse[(b * p.h + h) * p.t + i] = l > 0.0f ? rowMax[row] + logf(l) : -INFINITY;
  }
#endif
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// dQ. Block: (b, h, 64-query tile).
template <typename T, int D>
__global__ void __launch_bounds__(kMmaThreads)
    attentionGradQueryMma(const T *__restrict__ q, const T *__restrict__ k,
                          const T *__restrict__ v, const T *__restrict__ dout,
                          const float *__restrict__ lse, const float *__restrict__ rowDot,
                          T *__restrict__ dq, Params p) {
#ifdef LLMC_MMA_UNSUPPORTED
  LLMC_MMA_UNSUPPORTED();
#else
  using L = MmaLayout<D>;
  extern __shared__ __align__(128) unsigned char mmaSmem[];
  const MmaBackwardShared<T, D> sh(mmaSmem);
  T *qs = sh.own[0], *dos = sh.own[1], *ks = sh.streamed[0], *vs = sh.streamed[1];
  float *ss = sh.scores[0], *dps = sh.scores[1], *os = sh.out, *lses = sh.lses, *dots = sh.dots;
  T *dss = sh.weights[0];
  int64_t *querySegments = sh.querySegments, *keySegments = sh.keySegments;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wr = warp * kMmaWarpRows;

  const int64_t tiles = (p.t + kMmaTile - 1) / kMmaTile;
  int64_t tile = blockIdx.x % tiles;
  const int64_t bh = blockIdx.x / tiles, h = bh % p.h, b = bh / p.h, g = h / p.group;
  if (p.causal) tile = tiles - 1 - tile;
  const int64_t i0 = tile * kMmaTile;
  const bool rope = p.ropeCos != nullptr;

  mmaStage<T, D>(q + queryOffset(p, b, i0, h), p.queryStride, p.t - i0, p, b, i0, rope, qs);
  mmaStage<T, D>(dout + outOffset(p, b, i0, h), p.h * D, p.t - i0, p, b, i0, false, dos);
  mmaStageSegments(p, b, i0, p.t - i0, querySegments);
  mmaStageRowStats(lse, rowDot, p, b, h, i0, lses, dots);
  MmaRows<T, D> acc;
  acc.zero();
  __syncthreads();

  const int64_t keyEnd = p.causal ? min(p.s, i0 + kMmaTile) : p.s;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kMmaTile) { // block-uniform bounds
    if (!mmaSegmentsMeet(p, b, i0, j0)) continue;
    __syncthreads();
    mmaStage<T, D>(k + keyOffset(p, b, j0, g), p.keyStride, keyEnd - j0, p, b, j0, rope, ks);
    mmaStage<T, D>(v + keyOffset(p, b, j0, g), p.keyStride, keyEnd - j0, p, b, j0, false, vs);
    mmaStageSegments(p, b, j0, keyEnd - j0, keySegments);
    __syncthreads();

    mmaScores<T, D>(qs + wr * L::ldT, ks, ss + wr * L::ldS);   // S
    mmaScores<T, D>(dos + wr * L::ldT, vs, dps + wr * L::ldS); // dP = dout·vᵀ
    __syncwarp();
    for (int idx = lane; idx < kMmaWarpRows * kMmaTile; idx += 32) {
      const int row = wr + idx / kMmaTile, c = idx % kMmaTile;
      const bool visible =
          mmaVisible(p, i0 + row, j0 + c, keyEnd, querySegments[row], keySegments[c]);
      const float score = capScore(p, p.scale * ss[row * L::ldS + c]);
      const float weight = visible ? expf(score - lses[row]) : 0.0f;
      const float slope = visible ? capSlope(p, score) : 0.0f;
      store(dss, row * L::ldP + c, weight * (dps[row * L::ldS + c] - dots[row]) * slope); // dS
    }
    __syncwarp();
    acc.add(dss + wr * L::ldP, ks); // dq += dS·k
  }

  acc.storeTo(os + wr * L::ldO);
  __syncwarp();
  mmaStoreRows<T, D>(os + wr * L::ldO, dq, p, b, h, i0 + wr, p.t, true, p.scale, rope);
#endif
}

/// dK, dV. Block: (b, kv head g, 64-key tile), over every query head of g.
template <typename T, int D>
__global__ void __launch_bounds__(kMmaThreads)
    attentionGradKeyValueMma(const T *__restrict__ q, const T *__restrict__ k,
                             const T *__restrict__ v, const T *__restrict__ dout,
                             const float *__restrict__ lse, const float *__restrict__ rowDot,
                             T *__restrict__ dk, T *__restrict__ dv, Params p) {
#ifdef LLMC_MMA_UNSUPPORTED
  LLMC_MMA_UNSUPPORTED();
#else
  using L = MmaLayout<D>;
  extern __shared__ __align__(128) unsigned char mmaSmem[];
  const MmaBackwardShared<T, D> sh(mmaSmem);
  T *ks = sh.own[0], *vs = sh.own[1], *qs = sh.streamed[0], *dos = sh.streamed[1];
  float *sts = sh.scores[0], *dpts = sh.scores[1]; // Sᵀ ([keys][queries]), dPᵀ
  T *pts = sh.weights[0], *dsts = sh.weights[1];   // Pᵀ, dSᵀ
  float *os = sh.out, *lses = sh.lses, *dots = sh.dots;
  int64_t *querySegments = sh.querySegments, *keySegments = sh.keySegments;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wr = warp * kMmaWarpRows;

  const int64_t tiles = (p.s + kMmaTile - 1) / kMmaTile;
  const int64_t tile = blockIdx.x % tiles;
  const int64_t bg = blockIdx.x / tiles, g = bg % p.kv, b = bg / p.kv;
  const int64_t j0 = tile * kMmaTile;
  const bool rope = p.ropeCos != nullptr;

  mmaStage<T, D>(k + keyOffset(p, b, j0, g), p.keyStride, p.s - j0, p, b, j0, rope, ks);
  mmaStage<T, D>(v + keyOffset(p, b, j0, g), p.keyStride, p.s - j0, p, b, j0, false, vs);
  mmaStageSegments(p, b, j0, p.s - j0, keySegments);
  MmaRows<T, D> accK, accV;
  accK.zero();
  accV.zero();

  // Causal: queries before j0 see none of these keys (query and key tiles
  // are both 64 wide and aligned, S == T).
  const int64_t firstQuery = p.causal ? j0 : 0;
  for (int64_t h = g * p.group; h < (g + 1) * p.group; ++h) // block-uniform bounds
    for (int64_t i0 = firstQuery; i0 < p.t; i0 += kMmaTile) {
      if (!mmaSegmentsMeet(p, b, i0, j0)) continue;
      __syncthreads(); // the previous query tile's readers are done (and k, v are staged)
      mmaStage<T, D>(q + queryOffset(p, b, i0, h), p.queryStride, p.t - i0, p, b, i0, rope, qs);
      mmaStage<T, D>(dout + outOffset(p, b, i0, h), p.h * D, p.t - i0, p, b, i0, false, dos);
      mmaStageSegments(p, b, i0, p.t - i0, querySegments);
      mmaStageRowStats(lse, rowDot, p, b, h, i0, lses, dots);
      __syncthreads();

      mmaScores<T, D>(ks + wr * L::ldT, qs, sts + wr * L::ldS);   // Sᵀ = k·qᵀ
      mmaScores<T, D>(vs + wr * L::ldT, dos, dpts + wr * L::ldS); // dPᵀ = v·doutᵀ
      __syncwarp();
      for (int idx = lane; idx < kMmaWarpRows * kMmaTile; idx += 32) {
        const int key = wr + idx / kMmaTile, c = idx % kMmaTile;
        const int64_t i = i0 + c;
        const bool visible = i < p.t && mmaVisible(p, i, j0 + key, p.s, querySegments[c],
                                                   keySegments[key]);
        const float score = capScore(p, p.scale * sts[key * L::ldS + c]);
        const float weight = visible ? expf(score - lses[c]) : 0.0f;
        const float slope = visible ? capSlope(p, score) : 0.0f;
        store(pts, key * L::ldP + c, weight);
        store(dsts, key * L::ldP + c, weight * (dpts[key * L::ldS + c] - dots[c]) * slope);
      }
      __syncwarp();
      accV.add(pts + wr * L::ldP, dos); // dv += Pᵀ·dout
      accK.add(dsts + wr * L::ldP, qs); // dk += dSᵀ·q
    }

  accK.storeTo(os + wr * L::ldO);
  __syncwarp();
  mmaStoreRows<T, D>(os + wr * L::ldO, dk, p, b, g, j0 + wr, p.s, false, p.scale, rope);
  __syncwarp(); // dk's staging is read before dv's overwrites it
  accV.storeTo(os + wr * L::ldO);
  __syncwarp();
  mmaStoreRows<T, D>(os + wr * L::ldO, dv, p, b, g, j0 + wr, p.s, false, 1.0f, false);
#endif
}

#ifdef LLMC_MMA_UNSUPPORTED
#undef LLMC_MMA_UNSUPPORTED
#endif

#endif // LLMC_KERNELS_CUDA_ATTENTIONMMA_CUH
