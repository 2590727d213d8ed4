//===- GroupOffsets.cuh - row groups given by offsets, on the device -*- CUDA -*-===//
//
// grouped_matmul's and its quantized forms' offsets [G + 1] (i32 or i64):
// read as int64, checked, and the group a row falls in.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_GROUPOFFSETS_CUH
#define LLMC_KERNELS_CUDA_GROUPOFFSETS_CUH

#include <cstdint>

namespace llmc::cuda {

/// Offsets stored as i32 or i64, read as int64.
struct Offsets {
  const void *data = nullptr;
  bool wide = false;
  __device__ __forceinline__ int64_t operator[](int64_t i) const {
    return wide ? static_cast<const int64_t *>(data)[i] : static_cast<const int32_t *>(data)[i];
  }
};

/// Whether `offsets` cut the first of `rows` rows into `groups` groups
/// (offsets[0] = 0, never decreasing, offsets[G] <= rows); every thread of
/// the block must call it, and every thread gets the answer.
__device__ inline bool validGroupOffsets(Offsets offsets, int64_t groups, int64_t rows) {
  int bad = threadIdx.x == 0 && (offsets[0] != 0 || offsets[groups] > rows);
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) bad |= offsets[g + 1] < offsets[g];
  return !__syncthreads_or(bad);
}

/// The group holding row `r` of valid offsets: offsets[g] <= r < offsets[g + 1]
/// (the last such g: an empty group before it ends where it starts).
__device__ inline int64_t groupOf(Offsets offsets, int64_t groups, int64_t r) {
  int64_t lo = 0, hi = groups - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= r)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

} // namespace llmc::cuda

#endif
