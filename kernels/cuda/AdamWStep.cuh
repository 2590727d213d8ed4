//===- AdamWStep.cuh - the AdamW step constants of a block (private) -----===//
//
// kernels/AdamWStep.h holds the step constants and the element update both
// backends run; on a GPU lr, step and the gradient norm are device scalars,
// so one thread per block forms the constants and shares them.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_ADAMWSTEP_CUH
#define LLMC_KERNELS_CUDA_ADAMWSTEP_CUH

#include "kernels/AdamWStep.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {

/// The step constants into shared memory: thread 0 forms them, every thread
/// of the block returns them. Call from uniform code (it synchronises).
__device__ __forceinline__ AdamWStep blockStep(const contracts::AdamWHyperparams &h,
                                               const float *lr, const float *step,
                                               const float *norm, const float *lossScale) {
  __shared__ AdamWStep shared;
  if (threadIdx.x == 0) shared = AdamWStep::at(h, *lr, *step, norm, lossScale);
  __syncthreads();
  return shared;
}

} // namespace llmc::cuda

#endif
