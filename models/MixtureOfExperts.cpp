//===- MixtureOfExperts.cpp - sparse MLPs as llm ops ----------------------===//
//
// transformers 4.44's MixtralSparseMoeBlock: router logits x·Wgᵀ, softmax,
// the top-k experts renormalised to sum to 1, each expert the SwiGLU MLP
// w2(silu(w1·x) ⊙ w3·x), the token's output the weighted sum. Routing is
// dropless: every token reaches its k experts (llm.moe_route).
//
// Qwen2MoeSparseMoeBlock is the same with the renormalisation optional
// (norm_topk_prob) and a shared expert every token passes through, its
// output scaled by σ(shared_expert_gate · x), a number per token, and added.
// Qwen3MoeSparseMoeBlock is Qwen2's without the shared expert.
//
// With scoring_func = sigmoid (DeepSeek-V3's MoEGate) the router scores
// each expert σ(logit), chooses the top-k of σ + e_score_correction_bias
// (a frozen per-expert parameter beside the router's weight) and weights
// the chosen ones by their un-biased σ, renormalised with norm_topk_prob;
// routed_scaling_factor multiplies the weights of either router.
//
// The load-balancing loss is load_balancing_loss_func's, over the sparse
// layers' router logits concatenated (N tokens per layer, L sparse layers):
//
//   aux = E · Σₑ (countₑ / (N·L)) · (Σ probₑ / (N·L))
//
// countₑ the copies routed to expert e over all layers (the mean over
// tokens of the one-hot top-k mask, summed over the k slots) and Σ probₑ
// the softmax probabilities of e summed over all layers' tokens (a sigmoid
// router's scores normalised over the experts, s / Σ s, DeepSeek-V3's s′). It is not
// a sum of per-layer terms, so the sums are carried through the blocks and
// the product taken once at the end, by llm.router_loss. The counts take
// no gradient (they are piecewise constant), as in transformers, where
// they come from topk.
//
//===----------------------------------------------------------------------===//

#include "models/MixtureOfExperts.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace llmc {

namespace {

/// A sigmoid router's e_score_correction_bias [E] beside its gate's weight:
/// zeros until loaded, never trained; none for a softmax router.
Value declareScoreBias(GraphBuilder &b, const ModelConfig &c, const std::string &gate) {
  if (!c.sigmoidRouter())
    return Value();
  return b.param(gate + "e_score_correction_bias", {c.numExperts}, "zeros", 0.0,
                 /*trainable=*/false);
}

/// Mixtral's names: block_sparse_moe.{gate, experts.w1/w2/w3} (stacked).
ExpertWeights declareMixtralExperts(GraphBuilder &b, const ModelConfig &c,
                                    const std::string &prefix) {
  const int64_t E = c.numExperts, C = c.nEmbd, F = c.expertFfnHidden();
  ExpertWeights w;
  w.router = b.param(prefix + "block_sparse_moe.gate.weight", {E, C}, "normal", c.initStd);
  w.scoreBias = declareScoreBias(b, c, prefix + "block_sparse_moe.gate.");
  std::string p = prefix + "block_sparse_moe.experts.";
  w.gate = b.param(p + "w1.weight", {E, F, C}, "normal", c.initStd);
  w.down = b.param(p + "w2.weight", {E, C, F}, "normal", c.initStd);
  w.up = b.param(p + "w3.weight", {E, F, C}, "normal", c.initStd);
  return w;
}

/// Qwen-MoE's names: mlp.{gate, experts.*_proj (stacked)}, and Qwen2-MoE's
/// mlp.{shared_expert.*_proj, shared_expert_gate} (Qwen3-MoE has none).
ExpertWeights declareQwenMoeExperts(GraphBuilder &b, const ModelConfig &c,
                                    const std::string &prefix) {
  const int64_t C = c.nEmbd, F = c.expertFfnHidden(), S = c.sharedExpertFfnHidden;
  const double std = c.initStd;
  const int64_t E = c.numExperts;
  ExpertWeights w;
  w.router = b.param(prefix + "mlp.gate.weight", {E, C}, "normal", std);
  w.scoreBias = declareScoreBias(b, c, prefix + "mlp.gate.");
  std::string experts = prefix + "mlp.experts.";
  w.gate = b.param(experts + "gate_proj.weight", {E, F, C}, "normal", std);
  w.up = b.param(experts + "up_proj.weight", {E, F, C}, "normal", std);
  w.down = b.param(experts + "down_proj.weight", {E, C, F}, "normal", std);
  if (!c.qwen2Moe())
    return w;
  std::string p = prefix + "mlp.shared_expert.";
  w.sharedGate = b.param(p + "gate_proj.weight", {S, C}, "normal", std);
  w.sharedUp = b.param(p + "up_proj.weight", {S, C}, "normal", std);
  w.sharedDown = b.param(p + "down_proj.weight", {C, S}, "normal", std);
  w.sharedExpertGate = b.param(prefix + "mlp.shared_expert_gate.weight", {1, C}, "normal", std);
  return w;
}

/// σ(x·gᵀ) [N, 1] times the shared expert's SwiGLU of x [N, C]. llm.mul
/// broadcasts only a suffix, so each token's gate scales its row as a
/// batched product [N, 1, 1]·[N, 1, C]: one multiplication per element,
/// exact as the elementwise product, in the compute type.
Value sharedExpert(GraphBuilder &b, const ModelConfig &c, const ExpertWeights &w, Value x) {
  const int64_t N = c.batchSize * c.seqLen, C = c.nEmbd;
  Value act = b.swiglu(b.matmul(x, w.sharedGate, true), b.matmul(x, w.sharedUp, true));
  Value y = b.matmul(act, w.sharedDown, true);
  Value gate = b.sigmoid(b.matmul(x, w.sharedExpertGate, true));
  return b.reshape(b.matmul(b.reshape(gate, {N, 1, 1}), b.reshape(y, {N, 1, C})), {N, C});
}

/// What the experts read: the dispatched copies and the routing offsets,
/// or under a capacity factor (training) each expert's first copies packed
/// and regrouped, with `kept` to unpack their outputs by.
struct ExpertRows {
  Value rows, offsets, kept;
};

ExpertRows limitToCapacity(GraphBuilder &b, const ModelConfig &c, Value xs, Value offsets) {
  if (c.moeCapacityFactor <= 0 || c.positionInputs)
    return {xs, offsets, Value()};
  const int64_t copies = cast<RankedTensorType>(xs.getType()).getDimSize(0);
  const auto capacity =
      static_cast<int64_t>(std::ceil(c.moeCapacityFactor * double(copies) / double(c.numExperts)));
  auto [packed, kept] =
      b.moePack(xs, offsets, capacity, /*parts=*/1, std::min(copies, c.numExperts * capacity));
  auto [grouped, groupOffsets] = b.moeRegroup(packed, kept);
  return {grouped, groupOffsets, kept};
}

} // namespace

ExpertWeights declareExperts(GraphBuilder &b, const ModelConfig &c, const std::string &prefix) {
  return c.qwenMoe() ? declareQwenMoeExperts(b, c, prefix) : declareMixtralExperts(b, c, prefix);
}

RouterSums startRouterSums(GraphBuilder &b, const ModelConfig &c) {
  return {b.zeros({c.numExperts}), b.zeros({c.numExperts}), b.zeros({})};
}

Value mixtureOfExperts(GraphBuilder &b, const ModelConfig &c, const ExpertWeights &w, Value h,
                       RouterSums &sums) {
  const int64_t B = c.batchSize, T = c.seqLen, C = c.nEmbd;
  Value x = b.reshape(h, {B * T, C});
  GraphBuilder::MoeRouting route = b.moeRoute(
      b.matmul(x, w.router, /*transposeB=*/true), c.expertsPerToken, c.normTopkProb,
      GraphBuilder::RouterScoring{c.sigmoidRouter(), c.routedScalingFactor, w.scoreBias});
  ExpertRows in = limitToCapacity(b, c, b.moeDispatch(x, route.positions), route.offsets);
  Value act = b.swiglu(b.groupedMatmul(in.rows, in.offsets, w.gate, true),
                       b.groupedMatmul(in.rows, in.offsets, w.up, true));
  Value ys = b.groupedMatmul(act, in.offsets, w.down, true);
  if (in.kept)
    ys = b.moeUnpack(b.moeUngroup(ys, in.kept), route.offsets, in.kept, B * T * c.expertsPerToken);
  sums.probSum = b.add(sums.probSum, route.probSum);
  sums.counts = b.add(sums.counts, route.counts);
  sums.zSum = b.add(sums.zSum, route.zSum);
  Value y = b.moeCombine(ys, route.positions, route.weights);
  if (w.sharedExpertGate)
    y = b.add(y, sharedExpert(b, c, w, x));
  return b.reshape(y, {B, T, C});
}

Value addRouterLosses(GraphBuilder &b, const ModelConfig &c, Value loss, const RouterSums &sums,
                      int64_t routedLayers) {
  if (routedLayers == 0)
    return loss; // every layer dense: no router
  const double routed = double(c.batchSize) * double(c.seqLen) * double(routedLayers);
  const double auxScale =
      c.outputRouterLogits ? c.routerAuxLossCoef * double(c.numExperts) / (routed * routed) : 0.0;
  const double zScale = c.routerZLossCoef / routed;
  if (auxScale == 0 && zScale == 0)
    return loss;
  return b.add(loss, b.routerLoss(sums.probSum, sums.counts, sums.zSum, auxScale, zScale));
}

} // namespace llmc
