//===- moe.cpp - mixture-of-experts references ----------------------------===//
//
// Routing and the expert-sorted copies of the tokens, in float64, written from the definitions in
// dialects/LLM/MoEOps.td.
//
//===----------------------------------------------------------------------===//

#include "common/RouterScore.h"
#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace llmc::ref {
namespace {

/// softmax of row n of logits [N, E] and its log-sum-exp.
std::vector<double> softmaxRow(const RefTensor &logits, int64_t n, double *lse) {
  const int64_t e = logits.shape[1];
  const double *row = logits.data.data() + n * e;
  double top = *std::max_element(row, row + e), sum = 0;
  std::vector<double> p(e);
  for (int64_t i = 0; i < e; ++i) sum += p[i] = std::exp(row[i] - top);
  for (double &v : p) v /= sum;
  *lse = top + std::log(sum);
  return p;
}

/// σ of row n of logits [N, E].
std::vector<double> sigmoidRow(const RefTensor &logits, int64_t n) {
  const int64_t e = logits.shape[1];
  std::vector<double> s(e);
  for (int64_t i = 0; i < e; ++i) s[i] = 1.0 / (1.0 + std::exp(-logits.data[n * e + i]));
  return s;
}

/// The k experts of largest p, in descending order (ties: lower index first).
std::vector<int64_t> topExperts(const std::vector<double> &p, int64_t k) {
  std::vector<int64_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  order.resize(k);
  return order;
}

} // namespace

std::vector<RefTensor> moeRoute(const RefTensor &logits, int64_t k, bool normalize,
                                const RouterScoring &scoring) {
  require(logits.shape.size() == 2, "moeRoute", "logits must be [N, E]");
  const int64_t n = logits.shape[0], e = logits.shape[1];
  require(k >= 1 && k <= e, "moeRoute", "top_k must be in [1, E]");
  RefTensor weights = RefTensor::zeros({n, k}), experts = RefTensor::zeros({n, k});
  RefTensor positions = RefTensor::zeros({n, k}), offsets = RefTensor::zeros({e + 1});
  RefTensor probSum = RefTensor::zeros({e}), counts = RefTensor::zeros({e});
  RefTensor zSum = RefTensor::zeros({});
  for (int64_t t = 0; t < n; ++t) {
    double lse;
    std::vector<double> p = softmaxRow(logits, t, &lse);
    zSum.data[0] += lse * lse;
    // The scores the weights are made of, and the keys that choose.
    std::vector<double> scores = p, keys = p;
    if (scoring.sigmoid) {
      scores = sigmoidRow(logits, t);
      const double total = std::accumulate(scores.begin(), scores.end(), 0.0);
      for (int64_t i = 0; i < e; ++i) {
        p[i] = scores[i] / total;
        keys[i] = scores[i] + (scoring.bias ? scoring.bias->data[i] : 0.0);
      }
    }
    for (int64_t i = 0; i < e; ++i) probSum.data[i] += p[i];
    std::vector<int64_t> top = topExperts(keys, k);
    double chosen = 0;
    for (int64_t expert : top) chosen += scores[expert];
    for (int64_t j = 0; j < k; ++j) {
      experts.data[t * k + j] = double(top[j]);
      const double w = scores[top[j]];
      weights.data[t * k + j] = (normalize ? w / chosen : w) * scoring.scale;
      counts.data[top[j]] += 1;
    }
  }
  // Stable sort of the copies by expert: expert e's rows start after every
  // copy of a lower expert, in token order, then j.
  for (int64_t i = 0; i < e; ++i) offsets.data[i + 1] = offsets.data[i] + counts.data[i];
  std::vector<double> cursor(offsets.data.begin(), offsets.data.end() - 1);
  for (int64_t c = 0; c < n * k; ++c) positions.data[c] = cursor[int64_t(experts.data[c])]++;
  return {weights, experts, positions, offsets, probSum, counts, zSum};
}

RefTensor moeRouteGrad(const RefTensor &logits, const RefTensor &experts, const RefTensor &dweights,
                       const RefTensor &dprobSum, double dzSum, bool normalize,
                       const RouterScoring &scoring) {
  const int64_t n = logits.shape[0], e = logits.shape[1], k = experts.shape[1];
  RefTensor dlogits = like(logits);
  for (int64_t t = 0; t < n; ++t) {
    double lse;
    std::vector<double> p = softmaxRow(logits, t, &lse);
    const std::vector<double> scores = scoring.sigmoid ? sigmoidRow(logits, t) : p;
    std::vector<double> g(e, 0.0); // d/dscore of what depends on the scores
    for (int64_t i = 0; i < e; ++i) g[i] = dprobSum.data[i];
    if (scoring.sigmoid) {
      // prob_sum adds s_i / Σ s: its gradient through the normalisation.
      const double total = std::accumulate(scores.begin(), scores.end(), 0.0);
      double weighted = 0;
      for (int64_t i = 0; i < e; ++i) weighted += dprobSum.data[i] * scores[i];
      for (int64_t i = 0; i < e; ++i) g[i] = (dprobSum.data[i] - weighted / total) / total;
    }
    double chosen = 0;
    for (int64_t j = 0; j < k; ++j)
      chosen += scores[toId(experts.data[t * k + j], e, "moeRouteGrad")];
    // w_j = scale·q_j / chosen (normalize) or scale·q_j: dL/dq_i over the
    // chosen ones.
    double weighted = 0;
    for (int64_t j = 0; j < k; ++j)
      weighted +=
          scoring.scale * dweights.data[t * k + j] * scores[int64_t(experts.data[t * k + j])];
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = int64_t(experts.data[t * k + j]);
      const double dw = scoring.scale * dweights.data[t * k + j];
      g[i] += normalize ? dw / chosen - weighted / (chosen * chosen) : dw;
    }
    // Through the softmax: dl_i = p_i (g_i − Σ_m g_m p_m), or the sigmoid:
    // dl_i = g_i s_i (1 − s_i); z_sum adds 2·lse·p_i·dz.
    double mean = 0;
    for (int64_t i = 0; i < e; ++i) mean += g[i] * p[i];
    for (int64_t i = 0; i < e; ++i)
      dlogits.data[t * e + i] =
          (scoring.sigmoid ? g[i] * scores[i] * (1.0 - scores[i]) : p[i] * (g[i] - mean)) +
          2.0 * lse * p[i] * dzSum;
  }
  return dlogits;
}

RefTensor moeDispatch(const RefTensor &x, const RefTensor &positions, const RefTensor *weights) {
  const int64_t n = x.shape[0], c = x.shape[1], k = positions.shape[1];
  RefTensor out = RefTensor::zeros({n * k, c});
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      int64_t row = toId(positions.data[t * k + j], n * k, "moeDispatch");
      double w = weights ? weights->data[t * k + j] : 1.0;
      for (int64_t i = 0; i < c; ++i) out.data[row * c + i] = w * x.data[t * c + i];
    }
  return out;
}

RefTensor moeCombine(const RefTensor &ys, const RefTensor &positions, const RefTensor *weights) {
  const int64_t n = positions.shape[0], k = positions.shape[1], c = ys.shape[1];
  RefTensor y = RefTensor::zeros({n, c});
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      int64_t row = toId(positions.data[t * k + j], n * k, "moeCombine");
      double w = weights ? weights->data[t * k + j] : 1.0;
      for (int64_t i = 0; i < c; ++i) y.data[t * c + i] += w * ys.data[row * c + i];
    }
  return y;
}

RefTensor moeCombineWeightGrad(const RefTensor &ys, const RefTensor &positions,
                               const RefTensor &dy) {
  const int64_t n = positions.shape[0], k = positions.shape[1], c = ys.shape[1];
  RefTensor dw = RefTensor::zeros({n, k});
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      int64_t row = toId(positions.data[t * k + j], n * k, "moeCombineWeightGrad");
      for (int64_t i = 0; i < c; ++i)
        dw.data[t * k + j] += ys.data[row * c + i] * dy.data[t * c + i];
    }
  return dw;
}

RefTensor routerLoss(const RefTensor &probSum, const RefTensor &counts, double zSum,
                     double auxScale, double zScale) {
  require(probSum.shape == counts.shape && probSum.shape.size() == 1, "routerLoss",
          "prob_sum and counts must be [E]");
  RefTensor loss = RefTensor::zeros({});
  double balance = 0;
  for (size_t e = 0; e < probSum.data.size(); ++e) balance += counts.data[e] * probSum.data[e];
  loss.data[0] = auxScale * balance + zScale * zSum;
  return loss;
}

namespace {

/// The scoring attributes of a moe_route(_grad) call (common/RouterScore.h).
RouterScoring scoringOf(const RefCall &c, const RefTensor *bias) {
  return {c.integer("score", 0) == static_cast<int64_t>(RouterScore::Sigmoid), c.real("scale", 1.0),
          bias};
}

} // namespace

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//

LLMC_REGISTER_EVALUATOR("llm.moe_route", [](const RefCall &c) -> Results {
  return moeRoute(c.in(0), c.integer("top_k"), c.flag("normalize"), scoringOf(c, c.optional(1)));
});
LLMC_REGISTER_EVALUATOR("llm.moe_route_grad", [](const RefCall &c) -> Results {
  return {moeRouteGrad(c.in(0), c.in(1), c.in(2), c.in(3), c.scalar(4), c.flag("normalize"),
                       scoringOf(c, nullptr))};
});
LLMC_REGISTER_EVALUATOR("llm.moe_dispatch", [](const RefCall &c) -> Results {
  return {moeDispatch(c.in(0), c.in(1), c.optional(2))};
});
LLMC_REGISTER_EVALUATOR("llm.moe_combine", [](const RefCall &c) -> Results {
  return {moeCombine(c.in(0), c.in(1), c.optional(2))};
});
LLMC_REGISTER_EVALUATOR("llm.router_loss", [](const RefCall &c) -> Results {
  return {routerLoss(c.in(0), c.in(1), c.scalar(2), c.real("aux_scale"), c.real("z_scale"))};
});
LLMC_REGISTER_EVALUATOR("llm.moe_combine_weight_grad", [](const RefCall &c) -> Results {
  return {moeCombineWeightGrad(c.in(0), c.in(1), c.in(2))};
});
} // namespace llmc::ref
