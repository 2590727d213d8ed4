//===- GroupedKernels.cuh - the grouped products' two kernels -*- CUDA -*-===//
//
// The grouped product and its weight gradient (GroupedTiles.cuh's grids
// and conventions), each tile on tensor cores where both operands are
// bf16, f16 or fp8 codes (GroupedMma.cuh's MmaTile; fp8 codes with Fp8Rate
// on fp8 tensor cores instead, GroupedMmaFp8.cuh's Fp8MmaTile), on CUDA
// cores otherwise (fp32: FmaTile). Both launch the same grid of
// kThreads-thread blocks.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_GROUPEDKERNELS_CUH
#define LLMC_KERNELS_CUDA_GROUPEDKERNELS_CUH

#include "kernels/cuda/GroupedMma.cuh"
#include "kernels/cuda/GroupedMmaFp8.cuh"
#include "kernels/cuda/GroupedTiles.cuh"

namespace llmc::cuda::grouped {

/// The tile a product of operands A and B runs on; two fp8 operands on fp8
/// tensor cores with Fp8Rate.
template <typename A, typename B, bool Fp8Rate>
using TileFor = std::conditional_t<
    Fp8Rate && std::is_same_v<A, Fp8Operand> && std::is_same_v<B, Fp8Operand>, Fp8MmaTile,
    std::conditional_t<kOnTensorCores<A, B>, MmaTile<typename MmaStaged<A>::type>, FmaTile>>;

/// A Tile over `shared` for operands a and b (Fp8MmaTile takes their formats).
template <typename Tile, typename A, typename B>
__device__ Tile tileFor(typename Tile::Shared &shared, const A &a, const B &b) {
  if constexpr (std::is_same_v<Tile, Fp8MmaTile>)
    return Tile(shared, a.kind, b.kind);
  else
    return Tile(shared);
}

/// Block (blockIdx.x, blockIdx.y): rows [64 bx, 64 bx + 64) and columns
/// [64 by, 64 by + 64) of y [rows, f], group by group; `weights` are the
/// stacked [groups, K, F] (or [groups, F, K]); group g's sums are
/// multiplied by scales(g).
template <typename X, typename W, typename T, bool Fp8Rate = false>
__global__ void __launch_bounds__(kThreads)
    groupedMatmulKernel(X x, Offsets offsets, W weights, T *y, int64_t rows, int64_t k, int64_t f,
                        int64_t groups, bool transposeB, GroupScales scales) {
  using Tile = TileFor<X, W, Fp8Rate>;
  __shared__ typename Tile::Shared shared;
  const int64_t r0 = blockIdx.x * static_cast<int64_t>(kTileM);
  const int64_t c0 = blockIdx.y * static_cast<int64_t>(kTileN);
  if (!validGroupOffsets(offsets, groups, rows)) {
    nanTile(y, r0, c0, rows, f);
    return;
  }
  const int64_t r1 = min(r0 + kTileM, rows);
  for (int64_t g = groupOf(offsets, groups, r0); g < groups && offsets[g] < r1; ++g) {
    const int64_t lo = max(r0, offsets[g]), hi = min(r1, offsets[g + 1]);
    if (lo >= hi)
      continue;
    Tile tile = tileFor<Tile>(shared, x, weights);
    groupTile(x, weights.at(g * k * f), y, r0, c0, lo, hi, k, f, transposeB, scales(g), tile);
  }
  zeroRows(y, r0, c0, max(r0, offsets[groups]), r1, f);
}

/// Block (blockIdx.x, g): one tile of dw_g [p, q] = Σ over the group's rows
/// of aᵀ·b · scales(g), a [rows, p] and b [rows, q]; zeros for an empty
/// group. `dw`: the stacked [groups, p, q].
template <typename A, typename B, typename T, bool Fp8Rate = false>
__global__ void __launch_bounds__(kThreads)
    groupedWeightGradKernel(A a, int64_t p, B b, int64_t q, Offsets offsets, int64_t rows,
                            int64_t groups, GroupScales scales, T *dw) {
  using Tile = TileFor<A, B, Fp8Rate>;
  __shared__ typename Tile::Shared shared;
  const int64_t g = blockIdx.y, tilesQ = (q + kTileN - 1) / kTileN;
  const int64_t p0 = (blockIdx.x / tilesQ) * kTileM, q0 = (blockIdx.x % tilesQ) * kTileN;
  T *dwg = dw + g * p * q;
  if (!validGroupOffsets(offsets, groups, rows)) {
    nanTile(dwg, p0, q0, p, q);
    return;
  }
  const int64_t lo = offsets[g], hi = offsets[g + 1];
  Tile tile = tileFor<Tile>(shared, a, b);
  weightGradTile(a, p, b, q, lo, hi, p0, q0, scales(g), dwg, tile);
}

} // namespace llmc::cuda::grouped

#endif
