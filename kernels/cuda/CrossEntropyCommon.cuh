//===- CrossEntropyCommon.cuh - what the cross-entropy kernels share ------===//
//
// The losses are means over rows: per-row values are summed by one block in
// a fixed order (each thread a strided set of rows, then a tree over the
// block), so the result does not depend on scheduling. Sums are in double
// and counts in 64-bit integers, like the CPU's.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_CROSSENTROPYCOMMON_CUH
#define LLMC_KERNELS_CUDA_CROSSENTROPYCOMMON_CUH

#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {

/// Threads of the one-block loss reductions.
constexpr int kLossThreads = 1024;

/// Threads per row for kernels that own a row per block: a multiple of 32,
/// at most 1024 (a vocabulary row is long).
inline int lossRowThreads(int64_t width) {
  int64_t t = (width + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : t > 1024 ? 1024 : t);
}

/// Blocks for a loop over rows (rows > 0).
inline int lossRowGrid(int64_t rows) {
  const int64_t cap = 65535 * 8;
  return static_cast<int>(rows < cap ? rows : cap);
}

/// Rows whose target is not `ignoreIndex`, for every thread of the block.
template <typename I>
__device__ __forceinline__ long long countTargets(const I *targets, int64_t rows,
                                                  int64_t ignoreIndex, long long *shared) {
  long long count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    count += static_cast<int64_t>(targets[r]) != ignoreIndex;
  return blockSum(count, shared);
}

/// dloss / count (0 when every target is ignored), as the CPU forms it.
template <typename I>
__global__ void gradScaleKernel(const I *targets, int64_t rows, int64_t ignoreIndex,
                                const float *dloss, float *scale) {
  __shared__ long long red[32];
  long long count = countTargets(targets, rows, ignoreIndex, red);
  if (threadIdx.x == 0) *scale = count ? *dloss / static_cast<float>(count) : 0.0f;
}

} // namespace llmc::cuda

#endif
