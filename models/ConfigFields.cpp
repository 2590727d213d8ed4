//===- ConfigFields.cpp - the keys a model config sets ----------------===//

#include "models/ConfigFields.h"

#include "llvm/ADT/SmallVector.h"

using namespace llvm;

namespace llmc {
namespace {

template <typename T>
std::function<bool(ModelConfig &, StringRef)> intField(T ModelConfig::*member) {
  return [member](ModelConfig &c, StringRef v) {
    int64_t parsed;
    if (v.getAsInteger(10, parsed))
      return false;
    c.*member = parsed;
    return true;
  };
}

std::function<bool(ModelConfig &, StringRef)> floatField(double ModelConfig::*member) {
  return [member](ModelConfig &c, StringRef v) {
    double parsed;
    if (v.getAsDouble(parsed))
      return false;
    c.*member = parsed;
    return true;
  };
}

std::function<bool(ModelConfig &, StringRef)> boolField(bool ModelConfig::*member) {
  return [member](ModelConfig &c, StringRef v) {
    if (v == "true" || v == "1")
      c.*member = true;
    else if (v == "false" || v == "0")
      c.*member = false;
    else
      return false;
    return true;
  };
}

/// A list of integers, comma-separated ("0,3"; empty: none); config.json
/// gives it as an array.
std::function<bool(ModelConfig &, StringRef)>
intListField(std::vector<int64_t> ModelConfig::*member) {
  return [member](ModelConfig &c, StringRef v) {
    std::vector<int64_t> parsed;
    SmallVector<StringRef> items;
    v.split(items, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
    for (StringRef item : items) {
      int64_t n;
      if (item.trim().getAsInteger(10, n))
        return false;
      parsed.push_back(n);
    }
    c.*member = parsed;
    return true;
  };
}

std::function<bool(ModelConfig &, StringRef)> stringField(std::string ModelConfig::*member) {
  return [member](ModelConfig &c, StringRef v) {
    c.*member = v.str(); // validate() names the values it accepts
    return true;
  };
}

/// The block's shape and its attention (RoPE, windows, soft-capping).
std::vector<ConfigField> blockFields() {
  return {
      {"vocab_size", {}, "vocabulary size", intField(&ModelConfig::vocabSize)},
      {"n_layer", {"num_hidden_layers"}, "transformer blocks", intField(&ModelConfig::nLayer)},
      {"n_head", {"num_attention_heads"}, "query heads", intField(&ModelConfig::nHead)},
      {"n_kv_head",
       {"num_key_value_heads"},
       "key/value heads (GQA/MQA)",
       intField(&ModelConfig::nKvHead)},
      {"n_embd", {"hidden_size"}, "model width", intField(&ModelConfig::nEmbd)},
      {"ffn_hidden",
       {"intermediate_size", "n_inner"},
       "MLP inner width",
       intField(&ModelConfig::ffnHidden)},
      {"max_positions",
       {"n_positions", "max_position_embeddings"},
       "position table rows (gpt2)",
       intField(&ModelConfig::maxPositions)},
      {"seq_len",
       {"block_size"},
       "sequence length T of the compiled graph",
       intField(&ModelConfig::seqLen)},
      {"batch_size",
       {},
       "batch size B of the compiled graph (per microbatch)",
       intField(&ModelConfig::batchSize)},
      {"norm_eps",
       {"layer_norm_epsilon", "rms_norm_eps"},
       "normalization epsilon",
       floatField(&ModelConfig::normEps)},
      {"rope_theta", {}, "RoPE base (llama)", floatField(&ModelConfig::ropeTheta)},
      {"rope_scaling",
       {},
       "RoPE scaling (llama): none, or llama3 (Llama 3.1's, by wavelength; the four rope_* keys "
       "below); gemma3_text: none, or linear (the global layers' rates divided by rope_factor)",
       stringField(&ModelConfig::ropeScaling)},
      {"rope_factor",
       {},
       "llama3 scaling: long wavelengths are stretched this many times (default 8); linear: "
       "every rate is divided by it",
       floatField(&ModelConfig::ropeFactor)},
      {"rope_low_freq_factor",
       {},
       "llama3 scaling: wavelengths above rope_original_max_positions / this are stretched "
       "(default 1)",
       floatField(&ModelConfig::ropeLowFreqFactor)},
      {"rope_high_freq_factor",
       {},
       "llama3 scaling: wavelengths below rope_original_max_positions / this are kept (default 4)",
       floatField(&ModelConfig::ropeHighFreqFactor)},
      {"rope_original_max_positions",
       {},
       "llama3 scaling: the context the unscaled rates were trained for (default 8192)",
       intField(&ModelConfig::ropeOriginalMaxPositions)},
      {"sliding_window",
       {},
       "attention window: each query sees its last N keys, itself included (mistral); 0 none",
       intField(&ModelConfig::slidingWindow)},
      {"head_dim",
       {},
       "attention head width (gemma2, gemma3_text, qwen3, qwen3_moe; the other families' heads "
       "are n_embd / n_head wide)",
       intField(&ModelConfig::headDimension)},
      {"attention_bias",
       {},
       "qwen3, qwen3_moe: biases on the q, k, v and o projections (the other families: false "
       "only)",
       boolField(&ModelConfig::attentionBias)},
      {"query_pre_attn_scalar",
       {},
       "gemma2, gemma3_text: attention scores are scaled by this^-1/2 (0: head_dim^-1/2)",
       floatField(&ModelConfig::queryPreAttnScalar)},
      {"attn_softcap",
       {"attn_logit_softcapping"},
       "gemma2, gemma3_text: attention scores s become c*tanh(s/c); 0 none",
       floatField(&ModelConfig::attnSoftcap)},
      {"final_softcap",
       {"final_logit_softcapping"},
       "gemma2, gemma3_text: logits z become c*tanh(z/c) before the loss and sampling; 0 none",
       floatField(&ModelConfig::finalSoftcap)},
      {"sliding_window_pattern",
       {},
       "gemma3_text: layer l is global (no window, RoPE base rope_theta, rope_scaling) when "
       "(l + 1) % this == 0, else local (sliding_window, rope_local_base_freq)",
       intField(&ModelConfig::slidingWindowPattern)},
      {"rope_local_base_freq",
       {},
       "gemma3_text: the RoPE base of the local (sliding-window) layers",
       floatField(&ModelConfig::ropeLocalTheta)},
  };
}

/// Mixture of experts: the router, the experts' widths, which layers.
std::vector<ConfigField> expertFields() {
  return {
      {"num_experts",
       {"num_local_experts"},
       "mixtral, qwen2_moe, qwen3_moe: experts per layer (0: a dense MLP)",
       intField(&ModelConfig::numExperts)},
      {"experts_per_token",
       {"num_experts_per_tok"},
       "mixtral, qwen2_moe, qwen3_moe: experts each token is routed to (top-k)",
       intField(&ModelConfig::expertsPerToken)},
      {"norm_topk_prob",
       {},
       "mixtral, qwen2_moe, qwen3_moe: divide the chosen experts' softmax weights by their sum "
       "(mixtral: always)",
       boolField(&ModelConfig::normTopkProb)},
      {"scoring_func",
       {},
       "mixtral, qwen2_moe, qwen3_moe: how the router scores experts: softmax, or sigmoid "
       "(DeepSeek-V3: top-k of sigmoid + e_score_correction_bias)",
       stringField(&ModelConfig::scoringFunc)},
      {"routed_scaling_factor",
       {},
       "mixtral, qwen2_moe, qwen3_moe: the routing weights' factor (DeepSeek-V3's; 1: none)",
       floatField(&ModelConfig::routedScalingFactor)},
      {"bias_update_speed",
       {},
       "mixtral, qwen2_moe, qwen3_moe: DeepSeek-V3's bias update speed; only 0 (a frozen "
       "e_score_correction_bias)",
       floatField(&ModelConfig::biasUpdateSpeed)},
      {"n_group",
       {},
       "mixtral, qwen2_moe, qwen3_moe: DeepSeek-V3's expert groups; only 1 (no group-limited "
       "routing)",
       intField(&ModelConfig::nGroup)},
      {"topk_group",
       {},
       "mixtral, qwen2_moe, qwen3_moe: DeepSeek-V3's groups per token; only 1",
       intField(&ModelConfig::topkGroup)},
      {"moe_ffn_hidden",
       {"moe_intermediate_size"},
       "qwen2_moe, qwen3_moe: each routed expert's MLP width",
       intField(&ModelConfig::moeFfnHidden)},
      {"shared_expert_ffn_hidden",
       {"shared_expert_intermediate_size"},
       "qwen2_moe: the shared expert's MLP width (its output gated by sigmoid(gate . x))",
       intField(&ModelConfig::sharedExpertFfnHidden)},
      {"decoder_sparse_step",
       {},
       "qwen2_moe, qwen3_moe: layer l is sparse when (l + 1) % this == 0 (and not in "
       "mlp_only_layers)",
       intField(&ModelConfig::decoderSparseStep)},
      {"mlp_only_layers",
       {},
       "qwen2_moe, qwen3_moe: layers with a dense MLP ffn_hidden wide, comma-separated (e.g. 0,3)",
       intListField(&ModelConfig::mlpOnlyLayers),
       /*list=*/true},
      {"router_aux_loss_coef",
       {},
       "mixtral, qwen2_moe, qwen3_moe: weight of the load-balancing loss (added when "
       "output_router_logits)",
       floatField(&ModelConfig::routerAuxLossCoef)},
      {"output_router_logits",
       {},
       "mixtral, qwen2_moe, qwen3_moe: add the load-balancing loss to the training loss (as "
       "transformers)",
       boolField(&ModelConfig::outputRouterLogits)},
      {"router_z_loss_coef",
       {},
       "mixtral, qwen2_moe, qwen3_moe: weight of the router z-loss (mean logsumexp(router "
       "logits)^2); 0 none",
       floatField(&ModelConfig::routerZLossCoef)},
      {"moe_capacity_factor",
       {},
       "mixtral, qwen2_moe, qwen3_moe: training keeps at most ceil(f*N*k/E) of a step's N*k routed "
       "copies per expert, the earliest tokens first (Switch's capacity factor); 0 dropless",
       floatField(&ModelConfig::moeCapacityFactor)},
  };
}

/// The embeddings, initialization and training-only settings.
std::vector<ConfigField> trainingFields() {
  return {
      {"tie_embeddings",
       {"tie_word_embeddings"},
       "share the embedding table with the output head",
       boolField(&ModelConfig::tieEmbeddings)},
      {"dropout", {"resid_pdrop"}, "dropout rate", floatField(&ModelConfig::dropout)},
      {"init_std",
       {"initializer_range"},
       "standard deviation of weight init",
       floatField(&ModelConfig::initStd)},
      {"doc_separator",
       {},
       "pack documents: the token opening each one (e.g. 50256, 10 for bytes); -1 none",
       intField(&ModelConfig::docSeparator)},
  };
}

} // namespace

const std::vector<ConfigField> &configFields() {
  static const std::vector<ConfigField> table = [] {
    std::vector<ConfigField> all = blockFields();
    for (auto group : {expertFields, trainingFields}) {
      std::vector<ConfigField> more = group();
      all.insert(all.end(), more.begin(), more.end());
    }
    return all;
  }();
  return table;
}

const ConfigField *findConfigField(StringRef key) {
  for (const ConfigField &f : configFields()) {
    if (key == f.name)
      return &f;
    for (const char *alias : f.aliases)
      if (key == alias)
        return &f;
  }
  return nullptr;
}

std::string describeKeys() {
  std::string text;
  for (const ConfigField &f : configFields()) {
    text += "  " + std::string(f.name);
    for (const char *alias : f.aliases) text += std::string(" | ") + alias;
    text += ": " + std::string(f.help) + "\n";
  }
  return text;
}

Error applyOverride(ModelConfig &config, StringRef assignment) {
  auto [key, value] = assignment.split('=');
  key = key.trim();
  value = value.trim();
  if (!assignment.contains('=') || key.empty())
    return configError("bad override '" + assignment + "': expected key=value");
  const ConfigField *field = findConfigField(key);
  if (!field)
    return configError("unknown config key '" + key + "'; known keys:\n" + describeKeys());
  if (!field->set(config, value))
    return configError("bad value '" + value + "' for config key '" + key + "'");
  return Error::success();
}

} // namespace llmc
