//===- layernorm.cpp - layer normalization reference and its backward -----===//
//
// Per row of C: mean, biased variance, (x−μ)·rstd·γ + β. The backward
// recomputes the statistics from x (as the kernels do) and returns dx,
// dgamma and dbeta.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

#include <utility>

namespace llmc::ref {

namespace {
/// A row's mean and 1/√(variance + eps) (population variance).
std::pair<double, double> rowStatistics(const double *row, int64_t c, double eps) {
  double mean = 0.0, var = 0.0;
  for (int64_t i = 0; i < c; ++i) mean += row[i];
  mean /= c;
  for (int64_t i = 0; i < c; ++i) var += (row[i] - mean) * (row[i] - mean);
  var /= c;
  return {mean, 1.0 / std::sqrt(var + eps)};
}
} // namespace

RefTensor layernorm(const RefTensor &x, const RefTensor &gamma, const RefTensor &beta, double eps) {
  require(!x.shape.empty(), "layernorm", "x must have rank >= 1");
  int64_t c = x.shape.back(), rows = x.numel() / std::max<int64_t>(c, 1);
  require(gamma.numel() == c && beta.numel() == c, "layernorm", "gamma/beta must be [C]");
  RefTensor out = like(x);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * c;
    auto [mean, rstd] = rowStatistics(row, c, eps);
    for (int64_t i = 0; i < c; ++i)
      out.data[r * c + i] = (row[i] - mean) * rstd * gamma.data[i] + beta.data[i];
  }
  return out;
}

std::vector<RefTensor> layernormGrad(const RefTensor &x, const RefTensor &gamma,
                                     const RefTensor &dy, double eps) {
  require(!x.shape.empty() && x.shape == dy.shape, "layernormGrad", "x and dy shapes differ");
  int64_t c = x.shape.back(), rows = x.numel() / std::max<int64_t>(c, 1);
  require(gamma.numel() == c, "layernormGrad", "gamma must be [C]");
  RefTensor dx = like(x), dgamma = like(gamma), dbeta = like(gamma);
  std::vector<double> xhat(c), dyg(c);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * c, *drow = dy.data.data() + r * c;
    auto [mean, rstd] = rowStatistics(row, c, eps);
    double meanDyg = 0.0, meanDygXhat = 0.0;
    for (int64_t i = 0; i < c; ++i) {
      xhat[i] = (row[i] - mean) * rstd;
      dyg[i] = drow[i] * gamma.data[i];
      meanDyg += dyg[i];
      meanDygXhat += dyg[i] * xhat[i];
      dgamma.data[i] += drow[i] * xhat[i];
      dbeta.data[i] += drow[i];
    }
    meanDyg /= c;
    meanDygXhat /= c;
    for (int64_t i = 0; i < c; ++i)
      dx.data[r * c + i] = rstd * (dyg[i] - meanDyg - xhat[i] * meanDygXhat);
  }
  return {dx, dgamma, dbeta};
}

// The fused residual forms are the unfused ops in turn, by definition.
std::vector<RefTensor> addLayernorm(const RefTensor &a, const RefTensor &b, const RefTensor &gamma,
                                    const RefTensor &beta, double eps, const RefTensor *bias) {
  RefTensor sum = add(a, bias ? add(b, *bias) : b);
  RefTensor y = layernorm(sum, gamma, beta, eps);
  return {sum, y};
}

std::vector<RefTensor> layernormGradAdd(const RefTensor &x, const RefTensor &gamma,
                                        const RefTensor &dy, const RefTensor &addend, double eps) {
  require(addend.shape == x.shape, "layernormGradAdd", "addend and x shapes differ");
  std::vector<RefTensor> grads = layernormGrad(x, gamma, dy, eps);
  grads[0] = add(grads[0], addend);
  return grads;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.layernorm", [](const RefCall &c) -> Results {
  return {layernorm(c.in(0), c.in(1), c.in(2), c.real("epsilon"))};
});
LLMC_REGISTER_EVALUATOR("llm.layernorm_grad", [](const RefCall &c) -> Results {
  return layernormGrad(c.in(0), c.in(1), c.in(2), c.real("epsilon"));
});
LLMC_REGISTER_EVALUATOR("llm.add_layernorm", [](const RefCall &c) -> Results {
  return addLayernorm(c.in(0), c.in(1), c.in(2), c.in(3), c.real("epsilon"), c.optional(4));
});
LLMC_REGISTER_EVALUATOR("llm.layernorm_grad_add", [](const RefCall &c) -> Results {
  return layernormGradAdd(c.in(0), c.in(1), c.in(2), c.in(3), c.real("epsilon"));
});

} // namespace llmc::ref
