//===- ModelConfig.h - transformer hyperparameters --------------*- C++ -*-===//
//
// One configuration struct for every family the builders know; a preset
// fills it, `key=value` overrides and Hugging Face config.json files adjust
// it (HF key names are accepted as aliases).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_MODELS_MODELCONFIG_H
#define LLMC_MODELS_MODELCONFIG_H

#include "common/RopeScaling.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct ModelConfig {
  std::string family; ///< gpt2 | llama | qwen2 | qwen3 | mistral | gemma2 | gemma3_text | mixtral
                      ///< | qwen2_moe | qwen3_moe
  int64_t vocabSize = 256;
  int64_t nLayer = 2;
  int64_t nHead = 4;
  int64_t nKvHead = 4;       ///< llama: grouped-query heads
  int64_t nEmbd = 128;
  int64_t ffnHidden = 512;   ///< MLP inner width
  int64_t maxPositions = 128;///< gpt2: rows of the position table
  int64_t seqLen = 64;       ///< T of the compiled graph
  int64_t batchSize = 4;     ///< B of the compiled graph (per microbatch)
  double normEps = 1e-5;
  double ropeTheta = 10000.0;
  /// llama: "none", or "llama3": RoPE's rates rescaled by wavelength as
  /// Llama 3.1 does (common/RopeScaling.h) with the four numbers below,
  /// whose defaults are Llama 3.1's. gemma3_text: "none", or "linear":
  /// every rate of the global layers divided by ropeFactor.
  std::string ropeScaling = "none";
  double ropeFactor = 8.0;
  double ropeLowFreqFactor = 1.0;
  double ropeHighFreqFactor = 4.0;
  int64_t ropeOriginalMaxPositions = 8192;
  bool tieEmbeddings = true;
  /// Attention sees the keys in (i − slidingWindow, i] (Mistral's
  /// sliding_window; Gemma 2's on its even layers); 0: every earlier key.
  int64_t slidingWindow = 0;
  /// Gemma 2, Qwen3: the heads' width when it is not nEmbd / nHead
  /// (head_dim); 0: nEmbd / nHead.
  int64_t headDimension = 0;
  /// Qwen3: biases on the q, k, v and o projections (attention_bias, as
  /// transformers' Qwen3Attention gives all four).
  bool attentionBias = false;
  /// Gemma 2: attention scores are scaled by this^−½ (query_pre_attn_scalar);
  /// 0: by head_dim^−½.
  double queryPreAttnScalar = 0.0;
  /// Gemma 2's soft-caps c·tanh(s / c) of the attention scores
  /// (attn_logit_softcapping) and of the logits (final_logit_softcapping);
  /// 0: none.
  double attnSoftcap = 0.0;
  double finalSoftcap = 0.0;
  /// Gemma 3: layer l is global (full attention, RoPE base ropeTheta,
  /// ropeScaling) when (l + 1) % slidingWindowPattern == 0, else local
  /// (the window, RoPE base ropeLocalTheta, unscaled)
  /// (sliding_window_pattern, rope_local_base_freq); 0: not gemma3_text.
  int64_t slidingWindowPattern = 0;
  double ropeLocalTheta = 0.0;
  /// Mixtral, Qwen-MoE: each (sparse) layer's MLP is this many experts
  /// (num_local_experts, num_experts), each token routed to
  /// expertsPerToken of them (num_experts_per_tok); 0: a dense MLP.
  int64_t numExperts = 0;
  int64_t expertsPerToken = 2;
  /// The chosen experts' softmax weights are divided by their sum
  /// (Mixtral always; Qwen-MoE's norm_topk_prob).
  bool normTopkProb = true;
  /// How the router scores the experts (scoring_func): "softmax"
  /// (Mixtral, Qwen-MoE) or "sigmoid" (DeepSeek-V3: σ per expert, the
  /// top-k chosen by σ + e_score_correction_bias, a per-layer, per-expert
  /// buffer that is not trained). The weights are multiplied by
  /// routedScalingFactor either way.
  std::string scoringFunc = "softmax";
  double routedScalingFactor = 1.0;
  /// DeepSeek-V3's bias update speed γ (aux-loss-free balancing); only 0
  /// (a frozen bias) is supported.
  double biasUpdateSpeed = 0.0;
  /// DeepSeek-V3's group-limited routing (n_group, topk_group); only 1.
  int64_t nGroup = 1, topkGroup = 1;
  /// Qwen-MoE: each routed expert's width (moe_intermediate_size; Mixtral's
  /// experts are ffnHidden wide), and the width of the shared expert every
  /// token also passes through, gated by σ(shared_expert_gate · x)
  /// (shared_expert_intermediate_size).
  int64_t moeFfnHidden = 0;
  int64_t sharedExpertFfnHidden = 0;
  /// Qwen-MoE (both): layer l is sparse when (l + 1) % decoderSparseStep
  /// == 0 and l is not in mlpOnlyLayers (transformers' Qwen2MoeDecoderLayer
  /// and Qwen3MoeDecoderLayer); the others have a dense MLP ffnHidden wide.
  int64_t decoderSparseStep = 1;
  std::vector<int64_t> mlpOnlyLayers;
  /// The load-balancing loss of transformers' load_balancing_loss_func,
  /// added to the loss times routerAuxLossCoef when outputRouterLogits is
  /// set (transformers adds it only then).
  double routerAuxLossCoef = 0.001;
  bool outputRouterLogits = false;
  /// The router z-loss (ST-MoE): the mean over routed tokens and layers of
  /// logsumexp(router logits)², times this; 0: none.
  double routerZLossCoef = 0.0;
  /// Switch Transformer's capacity factor: in training, each expert takes
  /// at most ceil(f · N·k / E) of a step's N·k routed copies (the earliest
  /// tokens first); a dropped copy adds nothing to its token's output. 0:
  /// dropless. Inference stays dropless.
  double moeCapacityFactor = 0.0;
  double dropout = 0.0;
  double initStd = 0.02;
  /// Packed rows: the token that opens each document (>= 0), so the graph
  /// takes per-row `segments` and `positions` inputs; -1: plain rows.
  int64_t docSeparator = -1;

  /// Inference: each row continues a cached sequence, so the graph takes a
  /// `positions` input [B, T] (set by the compiler, not a config key).
  bool positionInputs = false;

  bool sigmoidRouter() const { return scoringFunc == "sigmoid"; }
  bool packed() const { return docSeparator >= 0; }
  bool takesPositions() const { return packed() || positionInputs; }

  int64_t headDim() const { return headDimension > 0 ? headDimension : nEmbd / nHead; }
  /// Attention's score scale: query_pre_attn_scalar^−½, else head_dim^−½.
  double attentionScale() const;
  /// Llama's block: RMSNorm, RoPE, grouped-query attention, SwiGLU (llama,
  /// qwen2, mistral); gpt2 is the other family. Gemma 2 shares the norms,
  /// RoPE and attention (its builder adds what differs).
  bool llamaLike() const { return family != "gpt2"; }
  bool gemma2() const { return family == "gemma2"; }
  /// Qwen3: Qwen2's block without q/k/v biases, heads head_dim wide, and an
  /// RMSNorm of each head's q and k (q_norm, k_norm) before RoPE.
  bool qwen3() const { return family == "qwen3"; }
  /// Qwen3-MoE: Qwen3's attention (q/k norms, head_dim) with Qwen-MoE's
  /// sparse layers, without a shared expert.
  bool qwen3Moe() const { return family == "qwen3_moe"; }
  /// Qwen3's attention: per-head q/k RMSNorms, attention_bias.
  bool qwen3Attention() const { return qwen3() || qwen3Moe(); }
  /// Gemma 3's text model: Gemma 2's block with per-head q/k norms and
  /// local/global layers.
  bool gemma3() const { return family == "gemma3_text"; }
  /// What Gemma 2 and 3 share: head_dim, query_pre_attn_scalar, soft-caps.
  bool gemma() const { return gemma2() || gemma3(); }
  /// The heads may be head_dim wide whatever n_embd / n_head is.
  bool freeHeadDim() const { return gemma() || qwen3Attention(); }
  /// The MLP is a mixture of experts (in the sparse layers).
  bool moe() const { return numExperts > 0; }
  bool qwen2Moe() const { return family == "qwen2_moe"; }
  /// Qwen-MoE's layout, either generation: mlp.experts.*, expert widths of
  /// their own, dense and sparse layers by decoder_sparse_step and
  /// mlp_only_layers.
  bool qwenMoe() const { return qwen2Moe() || qwen3Moe(); }
  /// A mixture-of-experts family (experts, a router).
  bool routedFamily() const { return family == "mixtral" || qwenMoe(); }
  /// Layer `layer`'s MLP is the mixture of experts.
  bool sparseLayer(int64_t layer) const;
  /// How many layers route their tokens (the load-balancing loss's L).
  int64_t sparseLayerCount() const;
  /// A routed expert's width.
  int64_t expertFfnHidden() const { return qwenMoe() ? moeFfnHidden : ffnHidden; }
  /// The attention of this family may slide (mistral, gemma2, gemma3_text;
  /// transformers 4.44's Mixtral applies its window only in flash attention).
  bool windowed() const { return family == "mistral" || gemma(); }
  /// The window of layer `layer`: Gemma 2 slides only on even layers (as
  /// transformers 4.44's Gemma2Attention), Gemma 3 on its local layers,
  /// Mistral on every layer.
  int64_t windowOfLayer(int64_t layer) const;
  /// Gemma 3: layer `layer` is local (windowed, RoPE base ropeLocalTheta).
  bool localLayer(int64_t layer) const;
  /// The RoPE base and scaling of layer `layer`: Gemma 3's local layers
  /// rotate by ropeLocalTheta unscaled, every other layer by ropeTheta
  /// with ropeScalingParameters().
  double ropeThetaOfLayer(int64_t layer) const;
  RopeScaling ropeScalingOfLayer(int64_t layer) const;
  /// Qwen2's (and Qwen2-MoE's) q, k and v projections carry biases;
  /// Qwen3's and Qwen3-MoE's with attention_bias.
  bool qkvBias() const {
    return family == "qwen2" || qwen2Moe() || (qwen3Attention() && attentionBias);
  }
  /// The output projection carries a bias (Qwen3 with attention_bias).
  bool outputBias() const { return qwen3Attention() && attentionBias; }
  /// The scaling the rope ops apply (unscaled unless ropeScaling is llama3
  /// or linear).
  RopeScaling ropeScalingParameters() const;
  /// Checks the combination (divisibility, ranges); the message names the key.
  llvm::Error validate() const;
  /// The mixture-of-experts keys' part of validate().
  llvm::Error validateExperts() const;
  /// Qwen-MoE's expert widths and which layers are sparse.
  llvm::Error validateRouterScoring() const;
  llvm::Error validateSparseLayers() const;
  /// rope_scaling and Gemma 3's local/global keys.
  llvm::Error validateRope() const;
};

/// The preset names of a family ("tiny", "124M", ...).
std::vector<std::string> presetNames(const std::string &family);
/// Fills a config from a family and preset, or fails naming both.
llvm::Expected<ModelConfig> presetConfig(const std::string &family,
                                         const std::string &preset);
/// Applies `key=value` (our names or HF aliases).
llvm::Error applyOverride(ModelConfig &config, llvm::StringRef assignment);
/// The family a Hugging Face config.json builds: its model_type, or an
/// error naming the file (no model_type, or one llmc does not build).
llvm::Expected<std::string> configFamily(llvm::StringRef path);
/// Applies every known key of a Hugging Face style config.json.
llvm::Error applyConfigJson(ModelConfig &config, llvm::StringRef path);
/// One line per field, for --help and error messages.
std::string describeKeys();

} // namespace llmc

#endif
