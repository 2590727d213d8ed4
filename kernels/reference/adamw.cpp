//===- adamw.cpp - AdamW step reference -----------------------------------===//
//
// One AdamW step as llm.adamw defines it: the gradient scaled by
// min(1, max_grad_norm/(norm + 1e-6)) when a norm is given, bias-corrected
// moments, decoupled weight decay; a non-finite norm skips the step (the
// outputs are the inputs). With a loss scale, g and the norm are divided by
// it first. adamw8bit.cpp reuses it on decoded state; multiTensorAdamw
// applies it to each tensor of a multi_tensor_adamw call.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

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

std::vector<RefTensor> multiTensorAdamw(const std::vector<RefTensor> &params,
                                        const std::vector<RefTensor> &grads,
                                        const std::vector<RefTensor> &ms,
                                        const std::vector<RefTensor> &vs, double lr,
                                        double step, const double *gradNorm, double beta1,
                                        double beta2, double eps, double weightDecay,
                                        double maxGradNorm, double lossScale,
                                        const std::vector<int64_t> &decay,
                                        const std::vector<int64_t> &castOf) {
  const size_t n = params.size();
  require(grads.size() == n && ms.size() == n && vs.size() == n && decay.size() == n,
          "multi_tensor_adamw", "needs as many grads, m, v and decay flags as params");
  std::vector<RefTensor> results(3 * n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<RefTensor> r = adamw(params[i], grads[i], ms[i], vs[i], lr, step, gradNorm, beta1,
                                     beta2, eps, decay[i] ? weightDecay : 0.0, maxGradNorm,
                                     lossScale);
    results[i] = r[0];
    results[n + i] = r[1];
    results[2 * n + i] = r[2];
  }
  for (int64_t i : castOf) {
    require(i >= 0 && static_cast<size_t>(i) < n, "multi_tensor_adamw",
            "cast_of names a tensor it does not update");
    results.push_back(results[static_cast<size_t>(i)]);
  }
  return results;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
// adamw: operands p, g, m, v, lr, step, grad_norm?, loss_scale?;
// multi_tensor_adamw: the params, grads, ms and vs, then the same.
LLMC_REGISTER_EVALUATOR("llm.adamw", [](const RefCall &c) -> Results {
  const RefTensor *norm = c.optional(6), *lossScale = c.optional(7);
  double gradNorm = norm ? norm->data.at(0) : 0.0;
  return adamw(c.in(0), c.in(1), c.in(2), c.in(3), c.scalar(4), c.scalar(5),
               norm ? &gradNorm : nullptr, c.real("beta1"), c.real("beta2"), c.real("epsilon"),
               c.real("weight_decay"), c.real("max_grad_norm"),
               lossScale ? lossScale->data.at(0) : 1.0);
});
LLMC_REGISTER_EVALUATOR("llm.multi_tensor_adamw", [](const RefCall &c) -> Results {
  const RefTensor *norm = c.optional(6), *lossScale = c.optional(7);
  double gradNorm = norm ? norm->data.at(0) : 0.0;
  return multiTensorAdamw(c.variadic(0), c.variadic(1), c.variadic(2), c.variadic(3), c.scalar(4),
                          c.scalar(5), norm ? &gradNorm : nullptr, c.real("beta1"), c.real("beta2"),
                          c.real("epsilon"), c.real("weight_decay"), c.real("max_grad_norm"),
                          lossScale ? lossScale->data.at(0) : 1.0, c.array("decay"),
                          c.array("cast_of"));
});

} // namespace llmc::ref
