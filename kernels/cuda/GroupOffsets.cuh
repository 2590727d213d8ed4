//===- GroupOffsets.cuh - row groups given by offsets, on the device -*- CUDA -*-===//
//
// grouped_matmul's and its quantized forms' offsets [G + 1] (i32 or i64):
// read as int64, and the group a row falls in.
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
