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

/// log Σ_j exp(row[j]) of one row, for every thread of the block.
template <typename T>
__device__ __forceinline__ float rowLogSumExp(const T *row, int64_t vocab, float *red) {
  float m = -INFINITY, s = 0.0f;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    float x = load(row, j);
    if (x > m) {
      s = s * expf(m - x) + 1.0f; // exp(−inf) = 0 rescales an empty sum
      m = x;
    } else if (m != -INFINITY) {
      s += expf(x - m);
    }
  }
  const float rowMax = blockMax(m, red);
  const float scaled = m == -INFINITY ? 0.0f : s * expf(m - rowMax);
  const float sum = blockSum(scaled, red);
  return rowMax + logf(sum);
}

/// loss = Σ rowLoss / count, in double (one block).
template <typename I>
__global__ void meanLossKernel(const float *rowLoss, const I *targets, int64_t rows,
                               int64_t ignoreIndex, float *loss) {
  __shared__ double sums[32];
  __shared__ long long counts[32];
  double total = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) total += static_cast<double>(rowLoss[r]);
  total = blockSum(total, sums);
  const long long count = countTargets(targets, rows, ignoreIndex, counts);
  if (threadIdx.x == 0)
    *loss = count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
}

/// ids as i32 or i64.
struct Ids {
  const void *data;
  bool wide;
  explicit Ids(const TensorView &t) : data(t.data), wide(t.dtype == DType::I64) {}
  const int32_t *narrow() const { return static_cast<const int32_t *>(data); }
  const int64_t *wide64() const { return static_cast<const int64_t *>(data); }
};

} // namespace llmc::cuda

#endif
