//===- StorePlus.cuh - a stored value plus an addend, rounded as two ops -===//
//
// For the fused kernels that add another tensor to what they store
// (layernorm_grad_add, rmsnorm_grad_add): the result must be what storing
// the value and then running `add` give, bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_STOREPLUS_CUH
#define LLMC_KERNELS_CUDA_STOREPLUS_CUH

#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {

/// out[i] = v rounded to T, plus addend[i]. __fadd_rn keeps the sum out of
/// an FMA with the product that made v (nvcc contracts a plain `+`). out
/// may be addend: element i is read before it is written, by one thread.
template <typename T>
__device__ __forceinline__ void storePlus(T *out, int64_t i, float v, const T *addend) {
  T rounded;
  store(&rounded, 0, v);
  store(out, i, __fadd_rn(load(&rounded, 0), load(addend, i)));
}

} // namespace llmc::cuda

#endif
