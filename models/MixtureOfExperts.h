//===- MixtureOfExperts.h - a mixture-of-experts MLP for the builders -*- C++ -*-===//
//
// Mixtral's and Qwen-MoE's sparse MLPs (transformers' MixtralSparseMoeBlock,
// Qwen2MoeSparseMoeBlock) as llm ops, and the router losses added to the
// model's loss.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_MODELS_MIXTUREOFEXPERTS_H
#define LLMC_MODELS_MIXTUREOFEXPERTS_H

#include "models/GraphBuilder.h"
#include "models/ModelConfig.h"

namespace llmc {

/// One layer's router and experts, named after Hugging Face's tensors:
/// Mixtral's `block_sparse_moe.gate`, `block_sparse_moe.experts.w1/w2/w3`;
/// Qwen-MoE's `mlp.gate`, `mlp.experts.gate_proj/up_proj/down_proj`, and
/// its shared expert `mlp.shared_expert.*` gated by
/// `mlp.shared_expert_gate` [1, C]. The experts' projections are stacked
/// [E, F, C] (down: [E, C, F]); Hugging Face stores expert e's slice as
/// `experts.<e>.w1.weight` (runtime/checkpoint/HuggingFace.h).
struct ExpertWeights {
  mlir::Value router;
  /// A sigmoid router's e_score_correction_bias [E] (DeepSeek-V3's name,
  /// `gate.e_score_correction_bias`): a frozen parameter that only steers
  /// the top-k; null for softmax routers.
  mlir::Value scoreBias;
  mlir::Value gate, down, up; ///< w1, w2, w3, stacked over the experts
  mlir::Value sharedGate, sharedUp, sharedDown;  ///< null without a shared expert
  mlir::Value sharedExpertGate;                  ///< [1, C]: σ(this · x) scales it
};
ExpertWeights declareExperts(GraphBuilder &b, const ModelConfig &c, const std::string &prefix);

/// The router statistics summed over the layers so far, carried through
/// the blocks to the loss.
struct RouterSums {
  mlir::Value probSum, counts, zSum;
};
/// Zeros, before the first layer.
RouterSums startRouterSums(GraphBuilder &b, const ModelConfig &c);

/// The MLP of h [B, T, C]: every token through its top-k experts' SwiGLU,
/// summed by its routing weights (plus the gated shared expert's output);
/// adds this layer's statistics to `sums`.
mlir::Value mixtureOfExperts(GraphBuilder &b, const ModelConfig &c, const ExpertWeights &w,
                             mlir::Value h, RouterSums &sums);

/// loss + router_aux_loss_coef · (transformers' load_balancing_loss_func,
/// when output_router_logits) + router_z_loss_coef · (mean z-loss), over
/// the `routedLayers` layers whose statistics `sums` holds.
mlir::Value addRouterLosses(GraphBuilder &b, const ModelConfig &c, mlir::Value loss,
                            const RouterSums &sums, int64_t routedLayers);

} // namespace llmc

#endif
