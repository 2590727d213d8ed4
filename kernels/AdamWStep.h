//===- AdamWStep.h - one AdamW step, for every backend ----------*- C++ -*-===//
//
// The fp32 constants one optimizer step uses, formed once per step in
// double from the hyperparameters and the step's lr, step and gradient norm
// (on the CPU by the kernel, on a GPU by one thread per block from the
// device scalars), and the per-element update both AdamW kernels (adamw,
// adamw8bit) of both backends run, so they agree on the same state.
//
// The CPU library is compiled for x86-64-v3 with GCC's default
// -ffp-contract=fast, which fuses apply() into exactly these fused
// multiply-adds (checked in the generated code):
//   m' = fma(β1, m, (1−β1)·g),  v' = fma(β2, v, ((1−β2)·g)·g),
//   p' = fma(−decay, p, fma(−lr, update, p)).
// The device spells them out with round-to-nearest intrinsics, so nvcc
// cannot contract differently: on equal inputs both backends compute equal
// m', v' and p', which is what lets adamw8bit's 8-bit codes match exactly.
//
// A step whose gradient norm is not finite (an overflow, a NaN anywhere in
// any rank's gradients: the norm is the same on every rank) is skipped:
// parameters and moments keep their values bit for bit, so one bad batch
// cannot poison the state. The runtime counts such steps and reports them.
//
// With fp16 loss scaling the gradients and their norm arrive multiplied by
// the loss scale; dividing it out here (into the clip factor) unscales them
// for free. The scale is a power of two, so the division is exact, and
// without a scale the constants are exactly those of an unscaled step.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_ADAMWSTEP_H
#define LLMC_KERNELS_ADAMWSTEP_H

#include "common/HostDevice.h"
#include "kernels/contracts/AdamW.h"

#include <cmath>

namespace llmc {

/// base^exponent in double with the math library of the side compiling it.
LLMC_HOST_DEVICE inline double powerOf(double base, double exponent) {
#ifdef __CUDA_ARCH__
  return ::pow(base, exponent);
#else
  return std::pow(base, exponent);
#endif
}

/// Whether x is finite, with the math library of the side compiling it.
LLMC_HOST_DEVICE inline bool finiteValue(float x) {
#ifdef __CUDA_ARCH__
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}

/// With g' = g·gradScale: m' = beta1·m + oneMinusBeta1·g',
/// v' = beta2·v + oneMinusBeta2·g'², p' = p − lr·(m'·invBias1)/(√(v'·invBias2) + eps) − decay·p.
struct AdamWStep {
  float gradScale, beta1, beta2, oneMinusBeta1, oneMinusBeta2, invBias1, invBias2, eps, lr, decay;
  /// The gradient norm is not finite: the kernels leave p, m and v as they
  /// are instead of applying the step.
  bool skip;

  /// The constants of step `step` at learning rate `lr`; `norm` (may be
  /// null) is the global gradient norm the clip divides by and the step's
  /// verdict; `lossScale` (may be null; needs `norm`) is the factor the
  /// gradients and `norm` carry.
  LLMC_HOST_DEVICE static AdamWStep at(const contracts::AdamWHyperparams &h, float lr, float step,
                                       const float *norm, const float *lossScale = nullptr) {
    double clip = 1.0, scale = lossScale ? static_cast<double>(*lossScale) : 1.0;
    bool skip = norm && !finiteValue(*norm);
    if (norm && !skip && h.maxGradNorm > 0.0) {
      double limit = h.maxGradNorm / (static_cast<double>(*norm) / scale + 1e-6);
      clip = limit < 1.0 ? limit : 1.0;
    }
    clip /= scale;
    double t = step, rate = lr;
    AdamWStep k;
    k.gradScale = static_cast<float>(clip);
    k.beta1 = static_cast<float>(h.beta1);
    k.beta2 = static_cast<float>(h.beta2);
    k.oneMinusBeta1 = static_cast<float>(1.0 - h.beta1);
    k.oneMinusBeta2 = static_cast<float>(1.0 - h.beta2);
    k.invBias1 = static_cast<float>(1.0 / (1.0 - powerOf(h.beta1, t)));
    k.invBias2 = static_cast<float>(1.0 / (1.0 - powerOf(h.beta2, t)));
    k.eps = static_cast<float>(h.epsilon);
    k.lr = static_cast<float>(rate);
    k.decay = static_cast<float>(rate * h.weightDecay);
    k.skip = skip;
    return k;
  }

  /// One element: m and v become m' and v'; returns p'.
  LLMC_HOST_DEVICE float apply(float param, float grad, float &m, float &v) const {
#ifdef __CUDA_ARCH__
    grad = __fmul_rn(grad, gradScale);
    m = __fmaf_rn(beta1, m, __fmul_rn(oneMinusBeta1, grad));
    v = __fmaf_rn(beta2, v, __fmul_rn(__fmul_rn(oneMinusBeta2, grad), grad));
    float update = __fdiv_rn(__fmul_rn(m, invBias1),
                             __fadd_rn(__fsqrt_rn(__fmul_rn(v, invBias2)), eps));
    return __fmaf_rn(-decay, param, __fmaf_rn(-lr, update, param));
#else
    grad *= gradScale;
    m = beta1 * m + oneMinusBeta1 * grad;
    v = beta2 * v + oneMinusBeta2 * grad * grad;
    float update = (m * invBias1) / (std::sqrt(v * invBias2) + eps);
    return param - lr * update - decay * param;
#endif
  }
};

} // namespace llmc

#endif
