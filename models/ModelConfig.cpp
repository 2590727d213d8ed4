//===- ModelConfig.cpp - validation and per-layer settings ------------===//

#include "models/ConfigFields.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

using namespace llvm;

namespace llmc {

Error ModelConfig::validate() const {
  auto positive = [](int64_t v, const char *name) -> Error {
    if (v < 1)
      return configError(Twine(name) + " must be >= 1, got " + Twine(v));
    return Error::success();
  };
  for (auto [v, name] : {std::pair{vocabSize, "vocab_size"}, {nLayer, "n_layer"},
                         {nHead, "n_head"}, {nKvHead, "n_kv_head"}, {nEmbd, "n_embd"},
                         {ffnHidden, "ffn_hidden"}, {seqLen, "seq_len"},
                         {batchSize, "batch_size"}, {maxPositions, "max_positions"}})
    if (Error e = positive(v, name))
      return e;
  if (headDimension < 0)
    return configError("head_dim must be >= 1 (0: n_embd / n_head), got " + Twine(headDimension));
  if (headDimension > 0 && !freeHeadDim() && (nEmbd % nHead != 0 || headDimension != nEmbd / nHead))
    return configError("head_dim = " + Twine(headDimension) + " is not supported: llmc's " +
                       family + " heads are n_embd / n_head wide");
  if (headDimension == 0 && nEmbd % nHead != 0)
    return configError("n_embd (" + Twine(nEmbd) + ") must be divisible by n_head (" +
                       Twine(nHead) + ")");
  for (auto [v, name] : {std::pair{queryPreAttnScalar, "query_pre_attn_scalar"},
                         {attnSoftcap, "attn_softcap"},
                         {finalSoftcap, "final_softcap"}}) {
    if (!(v >= 0))
      return configError(Twine(name) + " must be >= 0 (0: none), got " + std::to_string(v));
    if (v > 0 && !gemma())
      return configError(Twine(name) + " applies to gemma2 and gemma3_text; " + family +
                         " has none");
  }
  if (attentionBias && !qwen3Attention())
    return configError("attention_bias applies to qwen3 and qwen3_moe; " + family + " has " +
                       (qkvBias() ? "biases on q, k and v only" : "no attention biases"));
  if (gemma3() && attnSoftcap > 0)
    return configError("attn_softcap is not supported for gemma3_text: " +
                       Twine(kGemma3NoAttnSoftcap));
  if (nHead % nKvHead != 0)
    return configError("n_head (" + Twine(nHead) + ") must be divisible by n_kv_head (" +
                       Twine(nKvHead) + ")");
  if (docSeparator < -1 || docSeparator >= vocabSize)
    return configError("doc_separator must be a token below vocab_size (" + Twine(vocabSize) +
                       ") or -1, got " + Twine(docSeparator));
  if (family == "gpt2" && seqLen > maxPositions)
    return configError("seq_len (" + Twine(seqLen) + ") exceeds max_positions (" +
                       Twine(maxPositions) + ")");
  if (family == "gpt2" && nKvHead != nHead)
    return configError("gpt2 has no grouped-query attention: n_kv_head must equal n_head");
  if (llamaLike() && headDim() % 2 != 0)
    return configError(family + " needs an even head dim for RoPE, got " + Twine(headDim()));
  if (slidingWindow < 0)
    return configError("sliding_window must be >= 0 (0: none), got " + Twine(slidingWindow));
  if (slidingWindow > 0 && !windowed())
    return configError(
        "sliding_window applies to mistral's, gemma2's and gemma3_text's attention; " + family +
        " has none");
  if (Error e = validateExperts())
    return e;
  if (!(dropout >= 0 && dropout < 1))
    return configError("dropout must be in [0, 1), got " + std::to_string(dropout));
  if (!(normEps > 0) || !(initStd > 0) || !(ropeTheta > 0))
    return configError("norm_eps, init_std and rope_theta must be > 0");
  return validateRope();
}

Error ModelConfig::validateRope() const {
  if (gemma3()) {
    if (slidingWindowPattern < 1)
      return configError("sliding_window_pattern must be >= 1, got " + Twine(slidingWindowPattern));
    if (!(ropeLocalTheta > 0))
      return configError("rope_local_base_freq must be > 0, got " + std::to_string(ropeLocalTheta));
    if (ropeScaling != "none" && ropeScaling != "linear")
      return configError("rope_scaling must be none or linear for gemma3_text, got '" +
                         ropeScaling + "'");
    // Linear scaling rides on the llama3 form (common/RopeScaling.h), exact for theta >= 1.
    if (ropeScaling == "linear" && (!(ropeFactor > 0) || ropeTheta < 1))
      return configError("linear rope_scaling needs rope_factor > 0 and rope_theta >= 1");
    return Error::success();
  }
  if (slidingWindowPattern != 0 || ropeLocalTheta != 0)
    return configError("sliding_window_pattern and rope_local_base_freq apply to gemma3_text; " +
                       family + " has neither");
  if (ropeScaling != "none" && ropeScaling != "llama3")
    return configError("rope_scaling must be none or llama3, got '" + ropeScaling + "'");
  if (ropeScaling == "llama3") {
    if (!llamaLike())
      return configError("rope_scaling applies to llama's RoPE; " + family + " has no RoPE");
    if (!(ropeFactor > 0))
      return configError("rope_factor must be > 0, got " + std::to_string(ropeFactor));
    if (!(ropeLowFreqFactor > 0 && ropeHighFreqFactor > ropeLowFreqFactor))
      return configError("rope_low_freq_factor (" + std::to_string(ropeLowFreqFactor) +
                         ") and rope_high_freq_factor (" + std::to_string(ropeHighFreqFactor) +
                         ") must satisfy 0 < low < high");
    if (ropeOriginalMaxPositions < 1)
      return configError("rope_original_max_positions must be >= 1, got " +
                         Twine(ropeOriginalMaxPositions));
  }
  return Error::success();
}

Error ModelConfig::validateExperts() const {
  const bool routed = routedFamily();
  if (numExperts < 0)
    return configError("num_experts must be >= 0 (0: a dense MLP), got " + Twine(numExperts));
  if (routed && numExperts == 0)
    return configError(family + " needs num_experts >= 1");
  if (numExperts > 0 && !routed)
    return configError("num_experts applies to mixtral, qwen2_moe and qwen3_moe; " + family +
                       " has a dense MLP");
  if (numExperts > 0 && (expertsPerToken < 1 || expertsPerToken > numExperts))
    return configError("experts_per_token must be in [1, num_experts = " + Twine(numExperts) +
                       "], got " + Twine(expertsPerToken));
  if (family == "mixtral" && !normTopkProb)
    return configError("norm_topk_prob = false is not supported for mixtral: its router always "
                       "renormalises the chosen experts' weights");
  if (!(routerAuxLossCoef >= 0) || !(routerZLossCoef >= 0))
    return configError("router_aux_loss_coef and router_z_loss_coef must be >= 0");
  if (Error e = validateRouterScoring())
    return e;
  if (!(moeCapacityFactor >= 0) || std::isinf(moeCapacityFactor))
    return configError("moe_capacity_factor must be a finite number >= 0 (0: dropless), got " +
                       llvm::formatv("{0}", moeCapacityFactor).str());
  if (moeCapacityFactor > 0 && !routed)
    return configError("moe_capacity_factor applies to mixtral, qwen2_moe and qwen3_moe; " +
                       family + " has no experts");
  return validateSparseLayers();
}

Error ModelConfig::validateRouterScoring() const {
  auto number = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return std::string(text);
  };
  const bool routed = routedFamily();
  if (scoringFunc != "softmax" && scoringFunc != "sigmoid")
    return configError("scoring_func must be softmax or sigmoid, got '" + scoringFunc + "'");
  if (!(routedScalingFactor > 0) || std::isinf(routedScalingFactor))
    return configError("routed_scaling_factor must be a finite number > 0, got " +
                       number(routedScalingFactor));
  if (!routed && (sigmoidRouter() || routedScalingFactor != 1.0))
    return configError("scoring_func and routed_scaling_factor apply to mixtral, qwen2_moe and "
                       "qwen3_moe; " +
                       family + " has no router");
  if (biasUpdateSpeed != 0.0)
    return configError("bias_update_speed = " + number(biasUpdateSpeed) +
                       " is not supported: llmc keeps e_score_correction_bias frozen (loaded, "
                       "checkpointed and exported, never updated); only 0");
  if (nGroup != 1 || topkGroup != 1)
    return configError("n_group = " + Twine(nGroup) + ", topk_group = " + Twine(topkGroup) +
                       " is not supported: group-limited routing is not implemented (each token "
                       "chooses among all experts); only 1 and 1");
  return Error::success();
}

Error ModelConfig::validateSparseLayers() const {
  if (!qwenMoe()) {
    if (moeFfnHidden != 0 || sharedExpertFfnHidden != 0 || decoderSparseStep != 1 ||
        !mlpOnlyLayers.empty())
      return configError(
          "moe_ffn_hidden, shared_expert_ffn_hidden, decoder_sparse_step and "
          "mlp_only_layers apply to qwen2_moe and qwen3_moe (the shared expert to qwen2_moe "
          "only); " +
          family + " has none");
    return Error::success();
  }
  if (qwen3Moe() && sharedExpertFfnHidden != 0)
    return configError(
        "shared_expert_ffn_hidden = " + Twine(sharedExpertFfnHidden) +
        " is not supported: qwen3_moe has no shared expert (Qwen3MoeSparseMoeBlock)");
  if (qwen2Moe() && (moeFfnHidden < 1 || sharedExpertFfnHidden < 1))
    return configError(
        "qwen2_moe needs moe_ffn_hidden >= 1 and shared_expert_ffn_hidden >= 1, got " +
        Twine(moeFfnHidden) + " and " + Twine(sharedExpertFfnHidden));
  if (moeFfnHidden < 1)
    return configError(family + " needs moe_ffn_hidden >= 1, got " + Twine(moeFfnHidden));
  if (decoderSparseStep < 1)
    return configError("decoder_sparse_step must be >= 1, got " + Twine(decoderSparseStep));
  // As transformers reads the list: a layer is dense when it is listed;
  // entries past the last layer name none (a model cut to fewer layers,
  // as the planner's probes are, keeps its list), and a model whose layers
  // are all dense is one.
  for (int64_t layer : mlpOnlyLayers)
    if (layer < 0)
      return configError("mlp_only_layers: layer " + Twine(layer) + " is negative");
  return Error::success();
}

bool ModelConfig::sparseLayer(int64_t layer) const {
  if (!moe())
    return false;
  if (llvm::is_contained(mlpOnlyLayers, layer))
    return false;
  return (layer + 1) % decoderSparseStep == 0;
}

int64_t ModelConfig::sparseLayerCount() const {
  int64_t count = 0;
  for (int64_t l = 0; l < nLayer; ++l) count += sparseLayer(l);
  return count;
}

double ModelConfig::attentionScale() const {
  return 1.0 / std::sqrt(queryPreAttnScalar > 0 ? queryPreAttnScalar : double(headDim()));
}

int64_t ModelConfig::windowOfLayer(int64_t layer) const {
  if (gemma2())
    return layer % 2 == 0 ? slidingWindow : 0;
  if (gemma3())
    return localLayer(layer) ? slidingWindow : 0;
  return slidingWindow;
}

bool ModelConfig::localLayer(int64_t layer) const {
  // Gemma3Attention: is_sliding = bool((layer_idx + 1) % sliding_window_pattern).
  return gemma3() && (layer + 1) % slidingWindowPattern != 0;
}

double ModelConfig::ropeThetaOfLayer(int64_t layer) const {
  return localLayer(layer) ? ropeLocalTheta : ropeTheta;
}

RopeScaling ModelConfig::ropeScalingOfLayer(int64_t layer) const {
  // Gemma3TextModel's rotary_emb_local is built with rope_type "default".
  return localLayer(layer) ? RopeScaling() : ropeScalingParameters();
}

RopeScaling ModelConfig::ropeScalingParameters() const {
  if (ropeScaling == "linear")
    return linearRopeScaling(ropeFactor);
  if (ropeScaling != "llama3")
    return {};
  return {ropeFactor, ropeLowFreqFactor, ropeHighFreqFactor, ropeOriginalMaxPositions};
}

} // namespace llmc
