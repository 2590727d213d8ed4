//===- GroupedMma.cuh - the grouped products' tiles on tensor cores -*- CUDA -*-===//
//
// The grouped products' tiles on tensor cores (WMMA m16n16k16, fp32
// accumulation), for 16-bit operands and fp8 codes:
// bf16 and f16 operands are staged in shared memory as they are stored,
// fp8 codes as bf16, which holds every E4M3 and E5M2 value exactly (3 and
// 2 mantissa bits, exponents within bf16's). Each product of two staged
// values is exact in fp32; the sums differ from the CUDA-core loops' in
// their order and in the tensor cores' own accumulation, whose additions
// need not round to nearest as an fp32 FMA does, so results agree within
// the conformance tolerances, not bit for bit. fp32 operands stay on CUDA
// cores (tensor cores would round them to tf32).
//
// MmaTile is FmaTile's interface, so GroupedTiles.cuh's groupTile and
// weightGradTile run on either. Geometry: the block's 8 warps share its
// 64 × 64 output tile, warp w owning rows 16 (w mod 4) .. +16 and columns
// 32 (w div 4) .. +32 (two accumulator fragments); K advances 32 at a
// time through shared tiles padded 8 elements a row, a staged row-major
// (the weight gradient's aᵀ too). The sums go through shared memory in
// fp32, so the store keeps FmaTile's row masks and scale.
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

constexpr int kMmaK = 32;           ///< K per shared stage
constexpr int kLdA = kMmaK + 8;     ///< a [64][40]: output rows, K along
constexpr int kLdB = kTileN + 8;    ///< b [32][72]: K down, 64 columns along
constexpr int kLdSums = kTileN + 4; ///< sums [64][68] in fp32
static_assert(kThreads == 8 * 32, "8 warps share a 64 x 64 tile");

/// Shared memory of a tensor-core tile: operands staged in S, sums in fp32.
template <typename S> struct MmaTiles {
  alignas(128) S a[kTileM * kLdA];
  alignas(128) S b[kMmaK * kLdB];
  alignas(128) float sums[kTileM * kLdSums];
};

/// Stores sums [64][kLdSums] (a tile's, in shared memory) · scale over
/// rows [lo, hi) of the tile at (r0, c0) of a [rows, cols] output; the
/// block's threads together, then a barrier (the sums are the next tile's).
template <typename T>
__device__ void storeStagedSums(const float *sums, T *out, int64_t r0, int64_t c0, int64_t lo,
                                int64_t hi, int64_t cols, float scale) {
  for (int e = threadIdx.x; e < kTileM * kTileN; e += kThreads) {
    const int64_t r = r0 + e / kTileN, c = c0 + e % kTileN;
    if (r >= lo && r < hi && c < cols)
      llmc::cuda::store(out, r * cols + c, sums[(e / kTileN) * kLdSums + e % kTileN] * scale);
  }
  __syncthreads();
}

/// v (a value of the operand's own type, or an fp8 code's) as staged.
template <typename S> __device__ __forceinline__ S staged(float v);
template <> __device__ __forceinline__ bf16 staged<bf16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ f16 staged<f16>(float v) { return __float2half_rn(v); }

/// FmaTile's interface on tensor cores (geometry above): operands staged
/// in S, warp w's two accumulator fragments its part of the sums.
template <typename S> struct MmaTile {
  using Shared = MmaTiles<S>;
  using Sums = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;
  using Value = float;
  static constexpr int kK = kMmaK;
  MmaTiles<S> &t;
  Sums sums[2];

  __device__ explicit MmaTile(MmaTiles<S> &shared) : t(shared) {
    for (Sums &s : sums) nvcuda::wmma::fill_fragment(s, 0.0f);
  }
  /// What an operand's element i is staged from: its value.
  template <typename Operand> __device__ static float value(const Operand &o, int64_t i) {
    return o(i);
  }
  /// Stages a's element (output row m, stage column kk), b's (kk, column n).
  __device__ __forceinline__ void putA(int m, int kk, float v) {
    t.a[m * kLdA + kk] = staged<S>(v);
  }
  __device__ __forceinline__ void putB(int kk, int n, float v) {
    t.b[kk * kLdB + n] = staged<S>(v);
  }

  /// The warp's fragments += a · b over the stage.
  __device__ __forceinline__ void multiply() {
    namespace wmma = nvcuda::wmma;
    const int warp = threadIdx.x / 32, wr = warp % 4, wc = warp / 4;
#pragma unroll
    for (int kk = 0; kk < kMmaK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, S, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, t.a + wr * 16 * kLdA + kk, kLdA);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, S, wmma::row_major> fb;
        wmma::load_matrix_sync(fb, t.b + kk * kLdB + wc * 32 + j * 16, kLdB);
        wmma::mma_sync(sums[j], fa, fb, sums[j]);
      }
    }
  }

  /// Stores the tile's sums · scale over rows [lo, hi) of the tile at
  /// (r0, c0) of a [rows, cols] output, through t.sums.
  template <typename T>
  __device__ void store(T *out, int64_t r0, int64_t c0, int64_t lo, int64_t hi, int64_t cols,
                        float scale) const {
    namespace wmma = nvcuda::wmma;
    const int warp = threadIdx.x / 32, wr = warp % 4, wc = warp / 4;
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(t.sums + wr * 16 * kLdSums + wc * 32 + j * 16, sums[j], kLdSums,
                              wmma::mem_row_major);
    __syncthreads();
    storeStagedSums(t.sums, out, r0, c0, lo, hi, cols, scale);
  }
};

} // namespace llmc::cuda::grouped

#endif
