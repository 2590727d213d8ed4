//===- GroupedMma.cuh - the grouped products' tiles on tensor cores -*- CUDA -*-===//
//
// GroupedTiles.cuh's two tile loops with their products on tensor cores
// (WMMA m16n16k16, fp32 accumulation), for 16-bit operands and fp8 codes:
// bf16 and f16 operands are staged in shared memory as they are stored,
// fp8 codes as bf16, which holds every E4M3 and E5M2 value exactly (3 and
// 2 mantissa bits, exponents within bf16's). Each product of two staged
// values is exact in fp32, so the sums differ from the CUDA-core loops'
// only in their order. fp32 operands stay on CUDA cores (tensor cores
// would round them to tf32).
//
// Geometry: the block's 8 warps share its 64 × 64 output tile, warp w
// owning rows 16 (w mod 4) .. +16 and columns 32 (w div 4) .. +32 (two
// accumulator fragments); K advances 32 at a time through shared tiles
// padded 8 elements a row. The sums go through shared memory in fp32, so
// the store keeps GroupedTiles.cuh's row masks and scale.
//
// Speed: plain loads staged by every thread and no double buffering: the
// tensor cores' rate without the copy engine's overlap.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_GROUPEDMMA_CUH
#define LLMC_KERNELS_CUDA_GROUPEDMMA_CUH

#include "kernels/cuda/GroupedTiles.cuh"

#include <mma.h>

#include <type_traits>

namespace llmc::cuda::grouped {

/// The type an operand is staged in for tensor cores (void: none).
template <typename Operand> struct MmaStaged {
  using type = void;
};
template <> struct MmaStaged<FloatOperand<bf16>> {
  using type = bf16;
};
template <> struct MmaStaged<FloatOperand<f16>> {
  using type = f16;
};
template <> struct MmaStaged<Fp8Operand> {
  using type = bf16;
};

/// Whether a product of operands A and B runs on tensor cores.
template <typename A, typename B>
constexpr bool kOnTensorCores =
    !std::is_void_v<typename MmaStaged<A>::type> &&
    std::is_same_v<typename MmaStaged<A>::type, typename MmaStaged<B>::type>;

constexpr int kMmaK = 32;              ///< K per shared stage
constexpr int kLdRows = kMmaK + 8;     ///< a [64][40]: rows of the output, K along
constexpr int kLdCols = kTileN + 8;    ///< [32][72]: K down, 64 columns along
constexpr int kLdSums = kTileN + 4;    ///< sums [64][68] in fp32
static_assert(kThreads == 8 * 32, "8 warps share a 64 x 64 tile");
static_assert(kTileM * kLdRows >= kMmaK * kLdCols, "a K-major a fits the row-major one's room");

/// Shared memory of a tensor-core tile: operands staged in S, sums in fp32.
/// a is [64][kLdRows] row-major (the forward's x rows) or [32][kLdCols]
/// K-major (the weight gradient's aᵀ); b is [32][kLdCols].
template <typename S> struct MmaTiles {
  alignas(128) S a[kTileM * kLdRows];
  alignas(128) S b[kMmaK * kLdCols];
  alignas(128) float sums[kTileM * kLdSums];
};

/// v (a value of the operand's own type, or an fp8 code's) as staged.
template <typename S> __device__ __forceinline__ S staged(float v);
template <> __device__ __forceinline__ bf16 staged<bf16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ f16 staged<f16>(float v) { return __float2half_rn(v); }

using MmaSums = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;

/// The warp's two fragments += a · b over one stage of kMmaK; ALayout
/// row_major reads a as [64][kLdRows], col_major as [32][kLdCols].
template <typename S, typename ALayout>
__device__ __forceinline__ void multiplyStage(const MmaTiles<S> &t, MmaSums (&sums)[2]) {
  namespace wmma = nvcuda::wmma;
  constexpr bool kRowMajor = std::is_same_v<ALayout, wmma::row_major>;
  const int warp = threadIdx.x / 32, wr = warp % 4, wc = warp / 4;
#pragma unroll
  for (int kk = 0; kk < kMmaK; kk += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, S, ALayout> fa;
    if constexpr (kRowMajor)
      wmma::load_matrix_sync(fa, t.a + wr * 16 * kLdRows + kk, kLdRows);
    else
      wmma::load_matrix_sync(fa, t.a + kk * kLdCols + wr * 16, kLdCols);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, S, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, t.b + kk * kLdCols + wc * 32 + j * 16, kLdCols);
      wmma::mma_sync(sums[j], fa, fb, sums[j]);
    }
  }
}

/// Stores the tile's sums · scale over rows [lo, hi) of the tile at
/// (r0, c0) of a [rows, cols] output, through t.sums.
template <typename S, typename T>
__device__ void storeSums(const MmaSums (&sums)[2], MmaTiles<S> &t, T *out, int64_t r0, int64_t c0,
                          int64_t lo, int64_t hi, int64_t cols, float scale) {
  namespace wmma = nvcuda::wmma;
  const int warp = threadIdx.x / 32, wr = warp % 4, wc = warp / 4;
#pragma unroll
  for (int j = 0; j < 2; ++j)
    wmma::store_matrix_sync(t.sums + wr * 16 * kLdSums + wc * 32 + j * 16, sums[j], kLdSums,
                            wmma::mem_row_major);
  __syncthreads();
  for (int e = threadIdx.x; e < kTileM * kTileN; e += kThreads) {
    const int64_t r = r0 + e / kTileN, c = c0 + e % kTileN;
    if (r >= lo && r < hi && c < cols)
      store(out, r * cols + c, t.sums[(e / kTileN) * kLdSums + e % kTileN] * scale);
  }
  __syncthreads(); // t is the next tile's
}

/// groupTile on tensor cores: y's rows [lo, hi) within the tile at (r0,
/// c0) = (x's rows · w) · scale, w [K, F] (or [F, K] transposed).
template <typename X, typename W, typename T, typename S>
__device__ void groupTileMma(X x, W w, T *y, int64_t r0, int64_t c0, int64_t lo, int64_t hi,
                             int64_t k, int64_t f, bool transposeB, float scale, MmaTiles<S> &t) {
  MmaSums sums[2];
  for (MmaSums &s : sums) nvcuda::wmma::fill_fragment(s, 0.0f);
  for (int64_t k0 = 0; k0 < k; k0 += kMmaK) {
    for (int e = threadIdx.x; e < kTileM * kMmaK; e += kThreads) {
      const int r = e / kMmaK, kk = e % kMmaK; // along K: x's contiguous dim
      const int64_t row = r0 + r, col = k0 + kk;
      t.a[r * kLdRows + kk] = staged<S>(row >= lo && row < hi && col < k ? x(row * k + col) : 0.0f);
    }
    for (int e = threadIdx.x; e < kMmaK * kTileN; e += kThreads) {
      // Along w's contiguous dim: F, or K when transposed.
      const int kk = transposeB ? e % kMmaK : e / kTileN;
      const int n = transposeB ? e / kMmaK : e % kTileN;
      const int64_t row = k0 + kk, col = c0 + n;
      t.b[kk * kLdCols + n] =
          staged<S>(row < k && col < f ? w(transposeB ? col * k + row : row * f + col) : 0.0f);
    }
    __syncthreads();
    multiplyStage<S, nvcuda::wmma::row_major>(t, sums);
    __syncthreads();
  }
  storeSums(sums, t, y, r0, c0, lo, hi, f, scale);
}

/// The weight gradient's tile on tensor cores: dw [p, q]'s tile at (p0,
/// q0) = Σ over rows [lo, hi) of aᵀ·b · scale, a [rows, p] and b [rows, q].
template <typename A, typename B, typename T, typename S>
__device__ void weightGradTileMma(A a, int64_t p, B b, int64_t q, int64_t lo, int64_t hi,
                                  int64_t p0, int64_t q0, float scale, T *dw, MmaTiles<S> &t) {
  MmaSums sums[2];
  for (MmaSums &s : sums) nvcuda::wmma::fill_fragment(s, 0.0f);
  for (int64_t r0 = lo; r0 < hi; r0 += kMmaK) {
    for (int e = threadIdx.x; e < kMmaK * kTileM; e += kThreads) {
      const int kk = e / kTileM, i = e % kTileM; // along p and q: contiguous
      const int64_t row = r0 + kk;
      t.a[kk * kLdCols + i] = staged<S>(row < hi && p0 + i < p ? a(row * p + p0 + i) : 0.0f);
      t.b[kk * kLdCols + i] = staged<S>(row < hi && q0 + i < q ? b(row * q + q0 + i) : 0.0f);
    }
    __syncthreads();
    multiplyStage<S, nvcuda::wmma::col_major>(t, sums);
    __syncthreads();
  }
  storeSums(sums, t, dw, p0, q0, 0, p, q, scale);
}

} // namespace llmc::cuda::grouped

#endif
