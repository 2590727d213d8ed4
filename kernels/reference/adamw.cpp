//===- adamw.cpp - AdamW step reference -----------------------------------===//
//
// One AdamW step as llm.adamw defines it: the gradient scaled by
// min(1, max_grad_norm/(norm + 1e-6)) when a norm is given, bias-corrected
// moments, decoupled weight decay; a non-finite norm skips the step (the
// outputs are the inputs). With a loss scale, g and the norm are divided by
// it first. adamw8bit.cpp reuses it on decoded state.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"

namespace llmc::ref {

std::vector<RefTensor> adamw(const RefTensor &p, const RefTensor &g, const RefTensor &m,
                             const RefTensor &v, double lr, double step, const double *gradNorm,
                             double beta1, double beta2, double eps, double weightDecay,
                             double maxGradNorm, double lossScale) {
  require(g.shape == p.shape && m.shape == p.shape && v.shape == p.shape, "adamw",
          "param, grad, m and v shapes differ");
  if (gradNorm && !std::isfinite(*gradNorm))
    return {p, m, v};
  double clip = 1.0;
  if (gradNorm && maxGradNorm > 0.0)
    clip = std::min(1.0, maxGradNorm / (*gradNorm / lossScale + 1e-6));
  clip /= lossScale;
  double bias1 = 1.0 - std::pow(beta1, step), bias2 = 1.0 - std::pow(beta2, step);
  RefTensor p1 = like(p), m1 = like(m), v1 = like(v);
  for (int64_t i = 0; i < p.numel(); ++i) {
    double grad = g.data[i] * clip;
    m1.data[i] = beta1 * m.data[i] + (1.0 - beta1) * grad;
    v1.data[i] = beta2 * v.data[i] + (1.0 - beta2) * grad * grad;
    double update = (m1.data[i] / bias1) / (std::sqrt(v1.data[i] / bias2) + eps);
    p1.data[i] = p.data[i] - lr * (update + weightDecay * p.data[i]);
  }
  return {p1, m1, v1};
}

} // namespace llmc::ref
