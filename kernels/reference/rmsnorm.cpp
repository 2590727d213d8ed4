//===- rmsnorm.cpp - RMS normalization reference and its backward ---------===//
//
// x/√(mean(x²) + ε)·γ per row of C, and its backward {dx, dgamma} with
// the statistics recomputed from x.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

RefTensor rmsnorm(const RefTensor &x, const RefTensor &gamma, double eps) {
  require(!x.shape.empty(), "rmsnorm", "x must have rank >= 1");
  int64_t c = x.shape.back(), rows = x.numel() / std::max<int64_t>(c, 1);
  require(gamma.numel() == c, "rmsnorm", "gamma must be [C]");
  RefTensor out = like(x);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * c;
    double ms = 0.0;
    for (int64_t i = 0; i < c; ++i) ms += row[i] * row[i];
    double rstd = 1.0 / std::sqrt(ms / c + eps);
    for (int64_t i = 0; i < c; ++i) out.data[r * c + i] = row[i] * rstd * gamma.data[i];
  }
  return out;
}

std::vector<RefTensor> rmsnormGrad(const RefTensor &x, const RefTensor &gamma, const RefTensor &dy,
                                   double eps) {
  require(!x.shape.empty() && x.shape == dy.shape, "rmsnormGrad", "x and dy shapes differ");
  int64_t c = x.shape.back(), rows = x.numel() / std::max<int64_t>(c, 1);
  require(gamma.numel() == c, "rmsnormGrad", "gamma must be [C]");
  RefTensor dx = like(x), dgamma = like(gamma);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * c, *drow = dy.data.data() + r * c;
    double ms = 0.0;
    for (int64_t i = 0; i < c; ++i) ms += row[i] * row[i];
    double rstd = 1.0 / std::sqrt(ms / c + eps);
    double meanDygXhat = 0.0;
    for (int64_t i = 0; i < c; ++i) {
      meanDygXhat += drow[i] * gamma.data[i] * row[i] * rstd;
      dgamma.data[i] += drow[i] * row[i] * rstd;
    }
    meanDygXhat /= c;
    for (int64_t i = 0; i < c; ++i)
      dx.data[r * c + i] = rstd * (drow[i] * gamma.data[i] - row[i] * rstd * meanDygXhat);
  }
  return {dx, dgamma};
}

// The fused residual forms are the unfused ops in turn, by definition.
std::vector<RefTensor> addRmsnorm(const RefTensor &a, const RefTensor &b, const RefTensor &gamma,
                                  double eps) {
  RefTensor sum = add(a, b);
  RefTensor y = rmsnorm(sum, gamma, eps);
  return {sum, y};
}

std::vector<RefTensor> rmsnormGradAdd(const RefTensor &x, const RefTensor &gamma,
                                      const RefTensor &dy, const RefTensor &addend, double eps) {
  require(addend.shape == x.shape, "rmsnormGradAdd", "addend and x shapes differ");
  std::vector<RefTensor> grads = rmsnormGrad(x, gamma, dy, eps);
  grads[0] = add(grads[0], addend);
  return grads;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
namespace {

/// Input `index` as the γ the op scales by: 1 + gamma under `unit_offset`
/// (Gemma), where dγ is gamma's own gradient.
RefTensor gammaOf(const RefCall &c, size_t index) {
  RefTensor gamma = c.in(index);
  if (c.flag("unit_offset"))
    for (double &g : gamma.data) g += 1.0;
  return gamma;
}

} // namespace

LLMC_REGISTER_EVALUATOR("llm.rmsnorm", [](const RefCall &c) -> Results {
  return {rmsnorm(c.in(0), gammaOf(c, 1), c.real("epsilon"))};
});
LLMC_REGISTER_EVALUATOR("llm.rmsnorm_grad", [](const RefCall &c) -> Results {
  return rmsnormGrad(c.in(0), gammaOf(c, 1), c.in(2), c.real("epsilon"));
});
LLMC_REGISTER_EVALUATOR("llm.add_rmsnorm", [](const RefCall &c) -> Results {
  return addRmsnorm(c.in(0), c.in(1), gammaOf(c, 2), c.real("epsilon"));
});
LLMC_REGISTER_EVALUATOR("llm.rmsnorm_grad_add", [](const RefCall &c) -> Results {
  return rmsnormGradAdd(c.in(0), gammaOf(c, 1), c.in(2), c.in(3), c.real("epsilon"));
});

} // namespace llmc::ref
