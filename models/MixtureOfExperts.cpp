//===- MixtureOfExperts.cpp - Mixtral's sparse MLP as llm ops -------------===//
//
// transformers 4.44's MixtralSparseMoeBlock: router logits x·Wgᵀ, softmax,
// the top-k experts renormalised to sum to 1, each expert the SwiGLU MLP
// w2(silu(w1·x) ⊙ w3·x), the token's output the weighted sum. Routing is
// dropless: every token reaches its k experts (llm.moe_route).
//
// The load-balancing loss is load_balancing_loss_func's, over the layers'
// router logits concatenated (N tokens per layer, L layers):
//
//   aux = E · Σₑ (countₑ / (N·L)) · (Σ probₑ / (N·L))
//
// countₑ the copies routed to expert e over all layers (the mean over
// tokens of the one-hot top-k mask, summed over the k slots) and Σ probₑ
// the softmax probabilities of e summed over all layers' tokens. It is not
// a sum of per-layer terms, so the sums are carried through the blocks and
// the product taken once at the end, by llm.router_loss. The counts take
// no gradient (they are piecewise constant), as in transformers, where
// they come from topk.
//
//===----------------------------------------------------------------------===//

#include "models/MixtureOfExperts.h"

using namespace mlir;

namespace llmc {

ExpertWeights declareExperts(GraphBuilder &b, const ModelConfig &c, const std::string &prefix) {
  const int64_t C = c.nEmbd, F = c.ffnHidden;
  ExpertWeights w;
  w.router = b.param(prefix + "block_sparse_moe.gate.weight", {c.numExperts, C}, "normal",
                     c.initStd);
  for (int64_t e = 0; e < c.numExperts; ++e) {
    std::string p = prefix + "block_sparse_moe.experts." + std::to_string(e) + ".";
    w.gate.push_back(b.param(p + "w1.weight", {F, C}, "normal", c.initStd));
    w.down.push_back(b.param(p + "w2.weight", {C, F}, "normal", c.initStd));
    w.up.push_back(b.param(p + "w3.weight", {F, C}, "normal", c.initStd));
  }
  return w;
}

RouterSums startRouterSums(GraphBuilder &b, const ModelConfig &c) {
  return {b.zeros({c.numExperts}), b.zeros({c.numExperts}), b.zeros({})};
}

Value mixtureOfExperts(GraphBuilder &b, const ModelConfig &c, const ExpertWeights &w, Value h,
                       RouterSums &sums) {
  const int64_t B = c.batchSize, T = c.seqLen, C = c.nEmbd;
  Value x = b.reshape(h, {B * T, C});
  GraphBuilder::MoeRouting route =
      b.moeRoute(b.matmul(x, w.router, /*transposeB=*/true), c.expertsPerToken,
                 /*normalize=*/true);
  Value xs = b.moeDispatch(x, route.positions);
  Value act = b.swiglu(b.groupedMatmul(xs, route.offsets, w.gate, true),
                       b.groupedMatmul(xs, route.offsets, w.up, true));
  Value ys = b.groupedMatmul(act, route.offsets, w.down, true);
  sums.probSum = b.add(sums.probSum, route.probSum);
  sums.counts = b.add(sums.counts, route.counts);
  sums.zSum = b.add(sums.zSum, route.zSum);
  return b.reshape(b.moeCombine(ys, route.positions, route.weights), {B, T, C});
}

Value addRouterLosses(GraphBuilder &b, const ModelConfig &c, Value loss, const RouterSums &sums) {
  const double routed = double(c.batchSize) * double(c.seqLen) * double(c.nLayer);
  const double auxScale =
      c.outputRouterLogits ? c.routerAuxLossCoef * double(c.numExperts) / (routed * routed) : 0.0;
  const double zScale = c.routerZLossCoef / routed;
  if (auxScale == 0 && zScale == 0)
    return loss;
  return b.add(loss, b.routerLoss(sums.probSum, sums.counts, sums.zSum, auxScale, zScale));
}

} // namespace llmc
