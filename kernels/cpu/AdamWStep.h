//===- AdamWStep.h - what adamw and adamw8bit share ------------*- C++ -*-===//
//
// The attributes both AdamW kernels take, and the fp32 constants one step
// uses: formed once per step in double (lr, step and the clip factor change
// every step), so both kernels run the same float operations per element.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_ADAMWSTEP_H
#define LLMC_KERNELS_CPU_ADAMWSTEP_H

#include "kernels/contracts/AdamW.h"
#include "kernels/cpu/Common.h"

#include <algorithm>
#include <cmath>

namespace llmc::cpu {

struct AdamWConfig {
  double beta1, beta2, eps, weightDecay, maxGradNorm;
};

/// The hyperparameters the binding contract read (kernels/contracts/AdamW.h).
inline AdamWConfig adamWConfig(const contracts::AdamWHyperparams &h) {
  return {h.beta1, h.beta2, h.epsilon, h.weightDecay, h.maxGradNorm};
}

/// With g' = g·gradScale: m' = beta1·m + oneMinusBeta1·g',
/// v' = beta2·v + oneMinusBeta2·g'², p' = p − lr·(m'·invBias1)/(√(v'·invBias2) + eps) − decay·p.
struct AdamWStep {
  float gradScale, beta1, beta2, oneMinusBeta1, oneMinusBeta2, invBias1, invBias2, eps, lr, decay;

  /// The constants of step `step` at learning rate `lr`; `norm` (may be
  /// null) is the global gradient norm the clip divides by.
  static AdamWStep at(const AdamWConfig &c, float lr, float step, const float *norm) {
    double clip = 1.0;
    if (norm && c.maxGradNorm > 0.0)
      clip = std::min(1.0, c.maxGradNorm / (static_cast<double>(*norm) + 1e-6));
    double t = step, rate = lr;
    AdamWStep k;
    k.gradScale = static_cast<float>(clip);
    k.beta1 = static_cast<float>(c.beta1);
    k.beta2 = static_cast<float>(c.beta2);
    k.oneMinusBeta1 = static_cast<float>(1.0 - c.beta1);
    k.oneMinusBeta2 = static_cast<float>(1.0 - c.beta2);
    k.invBias1 = static_cast<float>(1.0 / (1.0 - std::pow(c.beta1, t)));
    k.invBias2 = static_cast<float>(1.0 / (1.0 - std::pow(c.beta2, t)));
    k.eps = static_cast<float>(c.eps);
    k.lr = static_cast<float>(rate);
    k.decay = static_cast<float>(rate * c.weightDecay);
    return k;
  }

  /// One element: m and v become m' and v'; returns p'. Both AdamW kernels
  /// run exactly this, so they agree bit for bit on the same state.
  float apply(float param, float grad, float &m, float &v) const {
    grad *= gradScale;
    m = beta1 * m + oneMinusBeta1 * grad;
    v = beta2 * v + oneMinusBeta2 * grad * grad;
    float update = (m * invBias1) / (std::sqrt(v * invBias2) + eps);
    return param - lr * update - decay * param;
  }
};

} // namespace llmc::cpu

#endif
