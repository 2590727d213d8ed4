//===- GroupedTiles.cuh - the grouped products' tiled device code -*- CUDA -*-===//
//
// The device side of the grouped (expert) products, shared by
// grouped_matmul.cu (float operands) and grouped_matmul_fp8.cu (fp8 codes)
// through GroupedKernels.cuh: operands are read through small readers
// (FloatOperand, Fp8Operand) that give each element as fp32 (and an fp8
// one's code), each tile's loop (groupTile, weightGradTile) stages what
// the tile takes (Tile::value) into its products — CUDA cores here
// (FmaTile), tensor cores for 16-bit and fp8 operands (GroupedMma.cuh's
// MmaTile), fp8 tensor cores for fp8 codes as stored (GroupedMmaFp8.cuh's
// Fp8MmaTile) — and each group's sums are multiplied by GroupScales before
// they are stored (1 for float operands).
//
// Grouped product: a grid over (row tiles of all M rows, column tiles of
// F). A block finds the groups its kTileM rows meet by binary search in the
// offsets and, for each, multiplies those rows by the group's weight (a
// slice of the stacked weights): a tiled GEMM through shared memory, the
// tile's stage of K at a time, accumulated in fp32 and rounded once on
// store. A tile that straddles a group boundary runs once per group
// it meets (with the other rows masked), so the work is at most (M /
// kTileM + G) tile passes. Its rows past the last group (offsets[G] < M) it
// writes as zeros.
//
// Weight gradient: a grid over (output tiles, group); a block loops over
// its group's rows a stage at a time, accumulating its tile of Aᵀ·B in fp32,
// and writes zeros for an empty group.
//
// Every block first checks the offsets (offsets[0] = 0, never decreasing,
// offsets[G] <= M) and, when they are invalid, writes NaN over its tile
// instead: every output is then NaN, and nothing is read or written
// outside a tensor.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_GROUPEDTILES_CUH
#define LLMC_KERNELS_CUDA_GROUPEDTILES_CUH

#include "common/Fp8.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/GroupOffsets.cuh"

namespace llmc::cuda::grouped {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16;
/// 16 × 16 threads, each owning 4 × 4 outputs of a 64 × 64 tile, strided
/// by 16 so a warp's loads from shared memory hit distinct banks.
constexpr int kThreads = 256, kSide = 16, kPer = 4;
static_assert(kSide * kPer == kTileM && kSide * kPer == kTileN && kSide * kSide == kThreads);
/// The most blocks in a grid's y dimension.
constexpr int64_t kMaxGridY = 65535;

/// NaN over the block's tile [r0, r0 + kTileM) × [c0, c0 + kTileN) of a
/// [rows, cols] output.
template <typename T>
__device__ void nanTile(T *out, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
  for (int e = threadIdx.x; e < kTileM * kTileN; e += kThreads) {
    const int64_t r = r0 + e / kTileN, c = c0 + e % kTileN;
    if (r < rows && c < cols)
      store(out, r * cols + c, __int_as_float(0x7fc00000));
  }
}

/// The tiles in shared memory, padded a column so that filling a column
/// of 16 from 16 threads hits distinct banks.
struct Tiles {
  float a[kTileK][kTileM + 1];
  float b[kTileK][kTileN + 1];
};

/// The scale a group's sums are multiplied by before they are stored: 1
/// for float operands; for fp8 codes their two scales, each one for the
/// whole operand or one per group.
struct GroupScales {
  const float *a = nullptr, *b = nullptr;
  bool aPerGroup = false, bPerGroup = false;
  __device__ __forceinline__ float operator()(int64_t g) const {
    const float sa = a ? a[aPerGroup ? g : 0] : 1.0f, sb = b ? b[bPerGroup ? g : 0] : 1.0f;
    return sa * sb;
  }
};

/// Reads a float operand's element i as fp32.
template <typename T> struct FloatOperand {
  const T *p;
  __device__ __forceinline__ float operator()(int64_t i) const { return load(p, i); }
  __device__ __forceinline__ FloatOperand at(int64_t offset) const { return {p + offset}; }
};

/// Reads an fp8 operand's code i as its exact fp32 value.
struct Fp8Operand {
  const uint8_t *p;
  fp8::Kind kind;
  __device__ __forceinline__ float operator()(int64_t i) const { return fp8::decode(p[i], kind); }
  /// Code i as stored.
  __device__ __forceinline__ uint8_t code(int64_t i) const { return p[i]; }
  __device__ __forceinline__ Fp8Operand at(int64_t offset) const { return {p + offset, kind}; }
};

/// A tile's products on CUDA cores: the block's 256 threads each own 4 × 4
/// outputs of the 64 × 64 tile, strided by 16, summed in fp32 registers
/// from shared tiles of kTileK. GroupedMma.cuh's MmaTile is the same
/// interface on tensor cores; groupTile and weightGradTile take either.
struct FmaTile {
  using Shared = Tiles;
  using Value = float;              ///< what putA and putB take
  static constexpr int kK = kTileK; ///< K per shared stage
  Tiles &t;
  float acc[kPer][kPer] = {};

  __device__ explicit FmaTile(Tiles &shared) : t(shared) {}
  /// What an operand's element i is staged as: its value.
  template <typename Operand> __device__ static float value(const Operand &o, int64_t i) {
    return o(i);
  }
  /// Stages a's element (output row m, stage column kk), b's (kk, column n).
  __device__ __forceinline__ void putA(int m, int kk, float v) { t.a[kk][m] = v; }
  __device__ __forceinline__ void putB(int kk, int n, float v) { t.b[kk][n] = v; }

  /// acc[i][j] += Σ_kk a[kk][ty + 16 i] · b[kk][tx + 16 j].
  __device__ __forceinline__ void multiply() {
    const int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[kPer], b[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) a[i] = t.a[kk][ty + kSide * i], b[i] = t.b[kk][tx + kSide * i];
#pragma unroll
      for (int i = 0; i < kPer; ++i)
#pragma unroll
        for (int j = 0; j < kPer; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  }

  /// Stores the thread's outputs of the tile at (r0, c0) of a [rows, cols]
  /// output whose rows [lo, hi) are this block's to write, times `scale`.
  template <typename T>
  __device__ void store(T *out, int64_t r0, int64_t c0, int64_t lo, int64_t hi, int64_t cols,
                        float scale) const {
    const int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int64_t r = r0 + ty + kSide * i;
      if (r < lo || r >= hi)
        continue;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int64_t c = c0 + tx + kSide * j;
        if (c < cols)
          llmc::cuda::store(out, r * cols + c, acc[i][j] * scale);
      }
    }
  }
};

/// y's rows [lo, hi) within the tile at (r0, c0) = (x's rows · w) · scale,
/// w [K, F] (or [F, K] transposed), on `tile` (FmaTile or MmaTile).
template <typename Tile, typename X, typename W, typename T>
__device__ void groupTile(X x, W w, T *y, int64_t r0, int64_t c0, int64_t lo, int64_t hi, int64_t k,
                          int64_t f, bool transposeB, float scale, Tile &tile) {
  constexpr int kK = Tile::kK;
  using Value = typename Tile::Value; // Value{}: what padding is staged as
  for (int64_t k0 = 0; k0 < k; k0 += kK) {
    for (int e = threadIdx.x; e < kTileM * kK; e += kThreads) {
      const int r = e / kK, kk = e % kK; // along K: x's contiguous dim
      const int64_t row = r0 + r, col = k0 + kk;
      tile.putA(r, kk, row >= lo && row < hi && col < k ? Tile::value(x, row * k + col) : Value{});
    }
    for (int e = threadIdx.x; e < kK * kTileN; e += kThreads) {
      // Along w's contiguous dim: F, or K when transposed.
      const int kk = transposeB ? e % kK : e / kTileN;
      const int n = transposeB ? e / kK : e % kTileN;
      const int64_t row = k0 + kk, col = c0 + n;
      tile.putB(kk, n,
                row < k && col < f ? Tile::value(w, transposeB ? col * k + row : row * f + col)
                                   : Value{});
    }
    __syncthreads();
    tile.multiply();
    __syncthreads();
  }
  tile.store(y, r0, c0, lo, hi, f, scale);
}

/// Zeros over rows [lo, hi) of the tile at (r0, c0) of a [rows, cols] output.
template <typename T>
__device__ void zeroRows(T *out, int64_t r0, int64_t c0, int64_t lo, int64_t hi, int64_t cols) {
  for (int e = threadIdx.x; e < kTileM * kTileN; e += kThreads) {
    const int64_t r = r0 + e / kTileN, c = c0 + e % kTileN;
    if (r >= lo && r < hi && c < cols)
      store(out, r * cols + c, 0.0f);
  }
}

/// dw [p, q]'s tile at (p0, q0) = Σ over rows [lo, hi) of aᵀ·b · scale,
/// a [rows, p] and b [rows, q], on `tile` (FmaTile or MmaTile).
template <typename Tile, typename A, typename B, typename T>
__device__ void weightGradTile(A a, int64_t p, B b, int64_t q, int64_t lo, int64_t hi, int64_t p0,
                               int64_t q0, float scale, T *dw, Tile &tile) {
  constexpr int kK = Tile::kK;
  using Value = typename Tile::Value; // Value{}: what padding is staged as
  for (int64_t r0 = lo; r0 < hi; r0 += kK) {
    for (int e = threadIdx.x; e < kK * kTileM; e += kThreads) {
      const int kk = e / kTileM, i = e % kTileM; // along p and q: contiguous
      const int64_t row = r0 + kk;
      tile.putA(i, kk, row < hi && p0 + i < p ? Tile::value(a, row * p + p0 + i) : Value{});
      tile.putB(kk, i, row < hi && q0 + i < q ? Tile::value(b, row * q + q0 + i) : Value{});
    }
    __syncthreads();
    tile.multiply();
    __syncthreads();
  }
  tile.store(dw, p0, q0, 0, p, q, scale);
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace llmc::cuda::grouped

#endif
