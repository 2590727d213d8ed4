//===- AdamWStep.cuh - what the CUDA adamw and adamw8bit share (private) --===//
//
// The device twin of kernels/cpu/AdamWStep.h, line for line: the same
// attributes and checks, the same per-step constants formed in double (here
// by one thread per block, from the device scalars lr, step and norm, which
// are only known on the device), and the same per-element float operations.
//
// The CPU library is compiled for x86-64-v3 with GCC's default
// -ffp-contract=fast, which fuses AdamWStep::apply into exactly these fused
// multiply-adds (checked in the generated code):
//   m' = fma(β1, m, (1−β1)·g),  v' = fma(β2, v, ((1−β2)·g)·g),
//   p' = fma(−decay, p, fma(−lr, update, p)).
// apply() spells them out with round-to-nearest intrinsics, so nvcc cannot
// contract differently: on equal inputs both backends compute equal m', v'
// and p', which is what lets adamw8bit's 8-bit codes match the CPU exactly.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_ADAMWSTEP_CUH
#define LLMC_KERNELS_CUDA_ADAMWSTEP_CUH

#include "kernels/contracts/AdamW.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {

struct AdamWConfig {
  double beta1, beta2, eps, weightDecay, maxGradNorm;
};

/// The hyperparameters the binding contract read (kernels/contracts/AdamW.h).
inline AdamWConfig adamWConfig(const contracts::AdamWHyperparams &h) {
  return {h.beta1, h.beta2, h.epsilon, h.weightDecay, h.maxGradNorm};
}

struct AdamWStep {
  float gradScale, beta1, beta2, oneMinusBeta1, oneMinusBeta2, invBias1, invBias2, eps, lr, decay;

  /// AdamWStep::at of the CPU, in double on the device; `norm` may be null.
  __device__ static AdamWStep at(const AdamWConfig &c, float lr, float step, const float *norm) {
    double clip = 1.0;
    if (norm && c.maxGradNorm > 0.0)
      clip = fmin(1.0, c.maxGradNorm / (static_cast<double>(*norm) + 1e-6));
    double t = step, rate = lr;
    AdamWStep k;
    k.gradScale = static_cast<float>(clip);
    k.beta1 = static_cast<float>(c.beta1);
    k.beta2 = static_cast<float>(c.beta2);
    k.oneMinusBeta1 = static_cast<float>(1.0 - c.beta1);
    k.oneMinusBeta2 = static_cast<float>(1.0 - c.beta2);
    k.invBias1 = static_cast<float>(1.0 / (1.0 - pow(c.beta1, t)));
    k.invBias2 = static_cast<float>(1.0 / (1.0 - pow(c.beta2, t)));
    k.eps = static_cast<float>(c.eps);
    k.lr = static_cast<float>(rate);
    k.decay = static_cast<float>(rate * c.weightDecay);
    return k;
  }

  /// One element: m and v become m' and v'; returns p'.
  __device__ __forceinline__ float apply(float param, float grad, float &m, float &v) const {
    grad = __fmul_rn(grad, gradScale);
    m = __fmaf_rn(beta1, m, __fmul_rn(oneMinusBeta1, grad));
    v = __fmaf_rn(beta2, v, __fmul_rn(__fmul_rn(oneMinusBeta2, grad), grad));
    float update = __fdiv_rn(__fmul_rn(m, invBias1),
                             __fadd_rn(__fsqrt_rn(__fmul_rn(v, invBias2)), eps));
    return __fmaf_rn(-decay, param, __fmaf_rn(-lr, update, param));
  }
};

/// The step constants into shared memory: thread 0 forms them, every thread
/// of the block returns them. Call from uniform code (it synchronises).
__device__ __forceinline__ AdamWStep blockStep(const AdamWConfig &c, const float *lr,
                                               const float *step, const float *norm) {
  __shared__ AdamWStep shared;
  if (threadIdx.x == 0) shared = AdamWStep::at(c, *lr, *step, norm);
  __syncthreads();
  return shared;
}

} // namespace llmc::cuda

#endif
