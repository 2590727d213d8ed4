//===- ModelConfig.cpp - presets, overrides, config.json ------------------===//

#include "models/ModelConfig.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <cstdio>
#include <functional>

using namespace llvm;

namespace llmc {
namespace {

Error fail(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

/// A settable field: our name, HF aliases, and how to parse it.
struct Field {
  const char *name;
  std::vector<const char *> aliases;
  const char *help;
  std::function<bool(ModelConfig &, StringRef)> set;
  bool list = false; ///< config.json gives it as an array of integers
};

template <typename T> std::function<bool(ModelConfig &, StringRef)> intField(T ModelConfig::*member) {
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
    if (v == "true" || v == "1") c.*member = true;
    else if (v == "false" || v == "0") c.*member = false;
    else return false;
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

const std::vector<Field> &fields() {
  static const std::vector<Field> table = {
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
  return table;
}

const Field *findField(StringRef key) {
  for (const Field &f : fields()) {
    if (key == f.name)
      return &f;
    for (const char *alias : f.aliases)
      if (key == alias)
        return &f;
  }
  return nullptr;
}

/// Qwen2/2.5: Llama with q/k/v biases, RoPE base 10⁶, RMSNorm ε 10⁻⁶.
Expected<ModelConfig> qwen2Preset(ModelConfig c, const std::string &preset) {
  c.ropeTheta = 1e6;
  c.normEps = 1e-6;
  if (preset == "tiny") {
    c.vocabSize = 256;
    c.nLayer = 4;
    c.nHead = 4;
    c.nKvHead = 2;
    c.nEmbd = 128;
    c.ffnHidden = 352;
    c.seqLen = 128;
    c.batchSize = 8;
    c.tieEmbeddings = true;
  } else if (preset == "0.5B") {
    // Qwen2.5-0.5B.
    c.vocabSize = 151936;
    c.nLayer = 24;
    c.nHead = 14;
    c.nKvHead = 2;
    c.nEmbd = 896;
    c.ffnHidden = 4864;
    c.seqLen = 2048;
    c.batchSize = 1;
    c.tieEmbeddings = true;
  } else {
    return fail("unknown preset '" + preset + "' for qwen2 (expected one of: tiny, 0.5B)");
  }
  c.maxPositions = c.seqLen;
  return c;
}

/// Qwen3: Qwen2's block without q/k/v biases, heads head_dim wide (not
/// hidden / heads), an RMSNorm of each head's q and k before RoPE; RoPE base
/// 10⁶, RMSNorm ε 10⁻⁶.
Expected<ModelConfig> qwen3Preset(ModelConfig c, const std::string &preset) {
  c.ropeTheta = 1e6;
  c.normEps = 1e-6;
  c.tieEmbeddings = true;
  if (preset == "tiny") {
    c.vocabSize = 256;
    c.nLayer = 4;
    c.nHead = 4;
    c.nKvHead = 2;
    c.nEmbd = 128;
    c.headDimension = 48; // not n_embd / n_head, as Qwen3-0.6B's heads
    c.ffnHidden = 352;
    c.seqLen = 128;
    c.batchSize = 8;
  } else if (preset == "0.6B") {
    // Qwen/Qwen3-0.6B.
    c.vocabSize = 151936;
    c.nLayer = 28;
    c.nHead = 16;
    c.nKvHead = 8;
    c.nEmbd = 1024;
    c.headDimension = 128;
    c.ffnHidden = 3072;
    c.seqLen = 4096;
    c.batchSize = 1;
  } else {
    return fail("unknown preset '" + preset + "' for qwen3 (expected one of: tiny, 0.6B)");
  }
  c.maxPositions = c.seqLen;
  return c;
}

/// Mistral: Llama with sliding-window attention (v0.1's 4096 keys).
Expected<ModelConfig> mistralPreset(ModelConfig c, const std::string &preset) {
  if (preset == "tiny") {
    c.vocabSize = 256;
    c.nLayer = 4;
    c.nHead = 4;
    c.nKvHead = 2;
    c.nEmbd = 128;
    c.ffnHidden = 352;
    c.seqLen = 128;
    c.batchSize = 8;
    c.tieEmbeddings = false;
    c.slidingWindow = 64; // half the sequence: the window shapes every batch
  } else if (preset == "7B") {
    // Mistral-7B-v0.1.
    c.vocabSize = 32000;
    c.nLayer = 32;
    c.nHead = 32;
    c.nKvHead = 8;
    c.nEmbd = 4096;
    c.ffnHidden = 14336;
    c.seqLen = 4096;
    c.batchSize = 1;
    c.tieEmbeddings = false;
    c.slidingWindow = 4096;
  } else {
    return fail("unknown preset '" + preset + "' for mistral (expected one of: tiny, 7B)");
  }
  c.maxPositions = c.seqLen;
  return c;
}

/// Mixtral: Mistral's block with a mixture of top-2 SwiGLU experts as its
/// MLP; RoPE base 10⁶, no window (v0.1's sliding_window is null).
Expected<ModelConfig> mixtralPreset(ModelConfig c, const std::string &preset) {
  c.ropeTheta = 1e6;
  c.tieEmbeddings = false;
  c.expertsPerToken = 2;
  c.routerAuxLossCoef = 0.02;
  if (preset == "tiny") {
    c.vocabSize = 256;
    c.nLayer = 4;
    c.nHead = 4;
    c.nKvHead = 2;
    c.nEmbd = 128;
    c.ffnHidden = 176;
    c.numExperts = 4;
    c.seqLen = 128;
    c.batchSize = 8;
    c.outputRouterLogits = true; // train with the load-balancing loss
  } else if (preset == "8x7B") {
    // Mixtral-8x7B-v0.1 (its config.json leaves output_router_logits off).
    c.vocabSize = 32000;
    c.nLayer = 32;
    c.nHead = 32;
    c.nKvHead = 8;
    c.nEmbd = 4096;
    c.ffnHidden = 14336;
    c.numExperts = 8;
    c.seqLen = 4096;
    c.batchSize = 1;
  } else {
    return fail("unknown preset '" + preset + "' for mixtral (expected one of: tiny, 8x7B)");
  }
  c.maxPositions = c.seqLen;
  return c;
}

/// Gemma 2: GeGLU MLP, (1 + w) RMSNorms before and after each sublayer,
/// scaled embeddings, soft-capped attention scores and logits, a sliding
/// window on every other layer; RoPE base 10⁴, RMSNorm ε 10⁻⁶, tied head.
Expected<ModelConfig> gemma2Preset(ModelConfig c, const std::string &preset) {
  c.normEps = 1e-6;
  c.ropeTheta = 10000.0;
  c.tieEmbeddings = true;
  c.attnSoftcap = 50.0;
  c.finalSoftcap = 30.0;
  if (preset == "tiny") {
    c.vocabSize = 256;
    c.nLayer = 4;
    c.nHead = 4;
    c.nKvHead = 2;
    c.nEmbd = 128;
    c.headDimension = 48; // not n_embd / n_head, as Gemma's heads
    c.queryPreAttnScalar = 48;
    c.ffnHidden = 352;
    c.seqLen = 128;
    c.batchSize = 8;
    c.slidingWindow = 64; // half the sequence, on layers 0 and 2
  } else if (preset == "2B") {
    // google/gemma-2-2b.
    c.vocabSize = 256000;
    c.nLayer = 26;
    c.nHead = 8;
    c.nKvHead = 4;
    c.nEmbd = 2304;
    c.headDimension = 256;
    c.queryPreAttnScalar = 256;
    c.ffnHidden = 9216;
    c.seqLen = 8192;
    c.batchSize = 1;
    c.slidingWindow = 4096;
  } else {
    return fail("unknown preset '" + preset + "' for gemma2 (expected one of: tiny, 2B)");
  }
  c.maxPositions = c.seqLen;
  return c;
}

/// Gemma 3's text model: Gemma 2's block with per-head q/k RMSNorms and
/// five local (windowed, RoPE base 10⁴) layers per global one (RoPE base
/// 10⁶); no soft-caps, tied head, RMSNorm ε 10⁻⁶.
Expected<ModelConfig> gemma3Preset(ModelConfig c, const std::string &preset) {
  c.normEps = 1e-6;
  c.ropeTheta = 1e6;
  c.ropeLocalTheta = 10000.0;
  c.tieEmbeddings = true;
  if (preset == "tiny") {
    c.vocabSize = 256;
    c.nLayer = 4;
    c.nHead = 4;
    c.nKvHead = 2; // two kv heads, so tp=2 splits them
    c.nEmbd = 128;
    c.headDimension = 48; // not n_embd / n_head, as Gemma's heads
    c.queryPreAttnScalar = 48;
    c.ffnHidden = 352;
    c.seqLen = 128;
    c.batchSize = 8;
    c.slidingWindow = 64;        // half the sequence,
    c.slidingWindowPattern = 2;  // on layers 0 and 2
  } else if (preset == "1B") {
    // google/gemma-3-1b-pt.
    c.vocabSize = 262144;
    c.nLayer = 26;
    c.nHead = 4;
    c.nKvHead = 1;
    c.nEmbd = 1152;
    c.headDimension = 256;
    c.queryPreAttnScalar = 256;
    c.ffnHidden = 6912;
    c.seqLen = 32768;
    c.batchSize = 1;
    c.slidingWindow = 512;
    c.slidingWindowPattern = 6;
  } else {
    return fail("unknown preset '" + preset + "' for gemma3_text (expected one of: tiny, 1B)");
  }
  c.maxPositions = c.seqLen;
  return c;
}

/// Qwen-MoE (Qwen1.5-MoE, Qwen2-MoE): Qwen2's attention (q/k/v biases)
/// and RMSNorm with a mixture of top-k SwiGLU experts plus a gated shared
/// expert as the MLP; transformers' Qwen2MoeConfig leaves norm_topk_prob off.
Expected<ModelConfig> qwen2MoePreset(ModelConfig c, const std::string &preset) {
  c.normEps = 1e-6;
  c.tieEmbeddings = false;
  c.normTopkProb = false;
  c.routerAuxLossCoef = 0.001;
  if (preset == "tiny") {
    c.vocabSize = 256;
    c.nLayer = 4;
    c.nHead = 4;
    c.nKvHead = 2;
    c.nEmbd = 128;
    c.ffnHidden = 352;
    c.numExperts = 8;
    c.expertsPerToken = 2;
    c.moeFfnHidden = 64;
    c.sharedExpertFfnHidden = 128;
    c.mlpOnlyLayers = {0}; // one dense layer beside the sparse ones
    c.ropeTheta = 1e6;
    c.seqLen = 128;
    c.batchSize = 8;
    c.outputRouterLogits = true; // train with the load-balancing loss
  } else if (preset == "A2.7B") {
    // Qwen1.5-MoE-A2.7B (its config.json leaves output_router_logits off).
    c.vocabSize = 151936;
    c.nLayer = 24;
    c.nHead = 16;
    c.nKvHead = 16;
    c.nEmbd = 2048;
    c.ffnHidden = 5632;
    c.numExperts = 60;
    c.expertsPerToken = 4;
    c.moeFfnHidden = 1408;
    c.sharedExpertFfnHidden = 5632;
    c.ropeTheta = 1e6;
    c.seqLen = 4096;
    c.batchSize = 1;
  } else {
    return fail("unknown preset '" + preset + "' for qwen2_moe (expected one of: tiny, A2.7B)");
  }
  c.maxPositions = c.seqLen;
  return c;
}

/// Qwen3-MoE: Qwen3's attention (q/k norms, heads head_dim wide, no
/// biases) with top-k SwiGLU experts in every layer and no shared expert;
/// the chosen experts' weights renormalised, as the released models set
/// norm_topk_prob (Qwen3MoeConfig's default leaves it off).
Expected<ModelConfig> qwen3MoePreset(ModelConfig c, const std::string &preset) {
  c.ropeTheta = 1e6;
  c.normEps = 1e-6;
  c.tieEmbeddings = false;
  c.normTopkProb = true;
  c.routerAuxLossCoef = 0.001;
  if (preset == "tiny") {
    c.vocabSize = 256;
    c.nLayer = 4;
    c.nHead = 4;
    c.nKvHead = 2;
    c.nEmbd = 128;
    c.headDimension = 48; // not n_embd / n_head, as the released models' heads
    c.ffnHidden = 352;
    c.numExperts = 8;
    c.expertsPerToken = 2;
    c.moeFfnHidden = 64;
    c.seqLen = 128;
    c.batchSize = 8;
    c.outputRouterLogits = true; // train with the load-balancing loss
  } else if (preset == "30B-A3B") {
    // Qwen/Qwen3-30B-A3B (its config.json leaves output_router_logits off).
    c.vocabSize = 151936;
    c.nLayer = 48;
    c.nHead = 32;
    c.nKvHead = 4;
    c.nEmbd = 2048;
    c.headDimension = 128;
    c.ffnHidden = 6144;
    c.numExperts = 128;
    c.expertsPerToken = 8;
    c.moeFfnHidden = 768;
    c.seqLen = 4096;
    c.batchSize = 1;
  } else {
    return fail("unknown preset '" + preset + "' for qwen3_moe (expected one of: tiny, 30B-A3B)");
  }
  c.maxPositions = c.seqLen;
  return c;
}

} // namespace

std::string describeKeys() {
  std::string text;
  for (const Field &f : fields()) {
    text += "  " + std::string(f.name);
    for (const char *alias : f.aliases)
      text += std::string(" | ") + alias;
    text += ": " + std::string(f.help) + "\n";
  }
  return text;
}

std::vector<std::string> presetNames(const std::string &family) {
  if (family == "gpt2")
    return {"tiny", "124M", "350M", "774M", "1.5B"};
  if (family == "llama")
    return {"tiny", "1B"};
  if (family == "qwen2")
    return {"tiny", "0.5B"};
  if (family == "qwen3")
    return {"tiny", "0.6B"};
  if (family == "mistral")
    return {"tiny", "7B"};
  if (family == "gemma2")
    return {"tiny", "2B"};
  if (family == "gemma3_text")
    return {"tiny", "1B"};
  if (family == "mixtral")
    return {"tiny", "8x7B"};
  if (family == "qwen2_moe")
    return {"tiny", "A2.7B"};
  if (family == "qwen3_moe")
    return {"tiny", "30B-A3B"};
  return {};
}

Expected<ModelConfig> presetConfig(const std::string &family, const std::string &preset) {
  ModelConfig c;
  c.family = family;
  if (family == "gpt2") {
    struct GPT2 { const char *name; int64_t layers, heads, width; };
    const GPT2 sizes[] = {{"124M", 12, 12, 768}, {"350M", 24, 16, 1024},
                          {"774M", 36, 20, 1280}, {"1.5B", 48, 25, 1600}};
    if (preset == "tiny") {
      c.vocabSize = 256; c.nLayer = 4; c.nHead = 4; c.nEmbd = 128;
      c.maxPositions = 128; c.seqLen = 128; c.batchSize = 8;
    } else {
      const GPT2 *found = nullptr;
      for (const GPT2 &s : sizes)
        if (preset == s.name)
          found = &s;
      if (!found)
        return fail("unknown preset '" + preset + "' for gpt2 (expected one of: tiny, 124M, 350M, 774M, 1.5B)");
      c.vocabSize = 50257; c.nLayer = found->layers; c.nHead = found->heads;
      c.nEmbd = found->width; c.maxPositions = 1024; c.seqLen = 1024; c.batchSize = 4;
    }
    c.nKvHead = c.nHead;
    c.ffnHidden = 4 * c.nEmbd;
    c.tieEmbeddings = true;
    return c;
  }
  if (family == "llama") {
    if (preset == "tiny") {
      c.vocabSize = 256; c.nLayer = 4; c.nHead = 4; c.nKvHead = 2; c.nEmbd = 128;
      c.ffnHidden = 352; c.seqLen = 128; c.batchSize = 8; c.tieEmbeddings = false;
    } else if (preset == "1B") {
      // Llama 3.2 1B.
      c.vocabSize = 128256; c.nLayer = 16; c.nHead = 32; c.nKvHead = 8; c.nEmbd = 2048;
      c.ffnHidden = 8192; c.seqLen = 2048; c.batchSize = 1; c.ropeTheta = 500000.0;
      c.tieEmbeddings = true;
      c.ropeScaling = "llama3"; c.ropeFactor = 32.0;
    } else {
      return fail("unknown preset '" + preset + "' for llama (expected one of: tiny, 1B)");
    }
    c.maxPositions = c.seqLen;
    return c;
  }
  if (family == "qwen2")
    return qwen2Preset(c, preset);
  if (family == "qwen3")
    return qwen3Preset(c, preset);
  if (family == "mistral")
    return mistralPreset(c, preset);
  if (family == "gemma2")
    return gemma2Preset(c, preset);
  if (family == "gemma3_text")
    return gemma3Preset(c, preset);
  if (family == "mixtral")
    return mixtralPreset(c, preset);
  if (family == "qwen2_moe")
    return qwen2MoePreset(c, preset);
  if (family == "qwen3_moe")
    return qwen3MoePreset(c, preset);
  if (family == "gemma3")
    return fail("model family 'gemma3' is Gemma3ForConditionalGeneration (a vision tower and "
                "the language model, its tensors under language_model.); llmc builds the text "
                "model alone: model_type gemma3_text (Gemma3ForCausalLM; docs/models.md)");
  return fail("unknown model family '" + family +
              "' (expected gpt2, llama, qwen2, qwen3, mistral, gemma2, gemma3_text, mixtral, "
              "qwen2_moe or qwen3_moe)");
}

Error applyOverride(ModelConfig &config, StringRef assignment) {
  auto [key, value] = assignment.split('=');
  key = key.trim();
  value = value.trim();
  if (!assignment.contains('=') || key.empty())
    return fail("bad override '" + assignment + "': expected key=value");
  const Field *field = findField(key);
  if (!field)
    return fail("unknown config key '" + key + "'; known keys:\n" + describeKeys());
  if (!field->set(config, value))
    return fail("bad value '" + value + "' for config key '" + key + "'");
  return Error::success();
}

namespace {

/// Gemma 3's `rope_scaling` (its global layers'): linear with a factor,
/// as the 4B and larger checkpoints have it.
Error applyLinearRopeScaling(ModelConfig &config, const json::Object &scaling, StringRef type,
                             const std::string &where) {
  if (type != "linear")
    return fail(where + " type '" + type +
                "' is not supported for gemma3_text (llmc implements linear)");
  const json::Value *factor = scaling.get("factor");
  if (!factor)
    return fail(where + " (linear) has no 'factor'");
  std::optional<double> d = factor->getAsNumber();
  if (!d)
    return fail(where + ".factor must be a number");
  config.ropeFactor = *d;
  config.ropeScaling = "linear";
  return Error::success();
}

/// config.json's `rope_scaling`: null, or an object whose `rope_type`
/// ("type" in older files) names the scheme, as transformers reads it.
Error applyRopeScaling(ModelConfig &config, const json::Value &value, StringRef path) {
  std::string where = "config '" + path.str() + "': rope_scaling";
  if (value.getAsNull()) {
    config.ropeScaling = "none";
    return Error::success();
  }
  const json::Object *scaling = value.getAsObject();
  if (!scaling)
    return fail(where + " must be an object or null");
  std::optional<StringRef> type = scaling->getString("rope_type");
  if (!type)
    type = scaling->getString("type");
  if (!type)
    return fail(where + " has no rope_type");
  if (*type == "default") {
    config.ropeScaling = "none";
    return Error::success();
  }
  if (config.gemma3())
    return applyLinearRopeScaling(config, *scaling, *type, where);
  if (*type != "llama3")
    return fail(where + " type '" + *type + "' is not supported (llmc implements llama3)");
  auto number = [&](const char *key, double &out) -> Error {
    const json::Value *v = scaling->get(key);
    if (!v)
      return fail(where + " (llama3) has no '" + key + "'");
    std::optional<double> d = v->getAsNumber();
    if (!d)
      return fail(where + "." + key + " must be a number");
    out = *d;
    return Error::success();
  };
  if (Error e = number("factor", config.ropeFactor))
    return e;
  if (Error e = number("low_freq_factor", config.ropeLowFreqFactor))
    return e;
  if (Error e = number("high_freq_factor", config.ropeHighFreqFactor))
    return e;
  const json::Value *original = scaling->get("original_max_position_embeddings");
  if (!original)
    return fail(where + " (llama3) has no 'original_max_position_embeddings'");
  std::optional<int64_t> n = original->getAsInteger();
  if (!n)
    return fail(where + ".original_max_position_embeddings must be an integer");
  config.ropeOriginalMaxPositions = *n;
  config.ropeScaling = "llama3";
  return Error::success();
}

/// config.json's model_type against the family being built: a file of
/// another family would silently build the wrong model.
Error checkModelType(const ModelConfig &config, const json::Object &object, StringRef path) {
  std::optional<StringRef> type = object.getString("model_type");
  if (!type || *type == config.family)
    return Error::success();
  return fail("config '" + path + "': model_type is '" + *type + "', but the model family is '" +
              config.family + "'");
}

/// Qwen3's settings llmc does not implement (Qwen3Attention, transformers
/// 4.51): its per-layer window and attention dropout. attention_bias is
/// honoured (q, k, v and o biases); sliding_window is read only with
/// use_sliding_window, as transformers reads it.
Error refuseQwen3(StringRef key, const json::Value &value,
                  const std::function<Error(const Twine &)> &refuse) {
  if (key == "use_sliding_window" && value.getAsBoolean().value_or(false))
    return refuse("Qwen3's per-layer sliding window (max_window_layers) is not implemented");
  if (key == "attention_dropout" && value.getAsNumber().value_or(0.0) != 0.0)
    return refuse("llmc's attention has no dropout");
  return Error::success();
}
/// Gemma 3 keeps Gemma 2's key but not its use: transformers 4.51's
/// Gemma3Attention never passes attn_logit_softcapping to the attention, so
/// a value would build one model here and another there.
const char *kGemma3NoAttnSoftcap =
    "transformers' Gemma3Attention never applies it (Gemma 3's checkpoints leave it null)";

/// Settings of a config that change what the model computes and that llmc
/// does not implement: an error naming the key, never a silently different
/// model.
Error refuseUnsupported(const ModelConfig &config, StringRef key, const json::Value &value,
                        StringRef path) {
  auto refuse = [&](const Twine &why) {
    return fail("config '" + path + "': " + key + " = " + formatv("{0}", value).str() +
                " is not supported: " + why);
  };
  if (!config.llamaLike())
    return Error::success();
  if (config.gemma()) {
    // Gemma2MLP and Gemma3MLP read hidden_activation; they ignore hidden_act.
    std::optional<StringRef> act = value.getAsString();
    if (key == "hidden_activation" && act != StringRef("gelu_pytorch_tanh") &&
        act != StringRef("gelu_new"))
      return refuse("llmc's " + config.family +
                    " MLP is GeGLU with the tanh GELU (gelu_pytorch_tanh)");
    if (key == "attention_bias" && value.getAsBoolean().value_or(false))
      return refuse("llmc's " + config.family + " has no attention biases");
    if (key == "attention_dropout" && value.getAsNumber().value_or(0.0) != 0.0)
      return refuse("llmc's attention has no dropout");
    if (config.gemma3() && key == "attn_logit_softcapping" && !value.getAsNull())
      return refuse(kGemma3NoAttnSoftcap);
    return Error::success();
  }
  if (key == "hidden_act" && value.getAsString() != StringRef("silu"))
    return refuse("llmc's " + config.family + " MLP is SwiGLU (silu)");
  if (config.qwen3Attention()) {
    if (Error e = refuseQwen3(key, value, refuse))
      return e;
    if (key == "attention_bias" || key == "use_sliding_window" || key == "sliding_window")
      return Error::success();
  }
  if ((key == "attention_bias" || key == "mlp_bias") && value.getAsBoolean().value_or(false))
    return refuse("llmc's " + config.family + " has no " +
                  (key == "mlp_bias" ? "MLP" : "output projection") + " biases");
  // transformers 4.44's own Qwen2 attention (eager, sdpa) ignores the
  // window; only its flash-attention path applies it, to the layers from
  // max_window_layers on. Released Qwen2/2.5 checkpoints leave it off.
  if (key == "use_sliding_window" && value.getAsBoolean().value_or(false))
    return refuse("Qwen2's per-layer sliding window (max_window_layers) is not implemented");
  if (key == "router_jitter_noise" && value.getAsNumber().value_or(0.0) != 0.0)
    return refuse("llmc's router adds no noise to the router logits");
  if (key == "sliding_window" && !config.windowed() && config.family != "qwen2" &&
      !config.qwenMoe() && !value.getAsNull())
    return refuse("only mistral's, gemma2's and gemma3_text's attention have a window");
  for (const char *gemmaKey :
       {"query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping"})
    if (key == gemmaKey && !value.getAsNull())
      return refuse("only gemma2 and gemma3_text have it");
  for (const char *gemma3Key : {"sliding_window_pattern", "rope_local_base_freq"})
    if (key == gemma3Key && !value.getAsNull())
      return refuse("only gemma3_text has it");
  return Error::success();
}

} // namespace

namespace {

/// A config.json file's top-level object, or an error naming the file.
Expected<json::Value> readConfigObject(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return fail("cannot read config '" + path + "': " + buffer.getError().message());
  Expected<json::Value> parsed = json::parse((*buffer)->getBuffer());
  if (!parsed)
    return fail("config '" + path + "' is not valid JSON: " + toString(parsed.takeError()));
  if (!parsed->getAsObject())
    return fail("config '" + path + "' must be a JSON object");
  return parsed;
}

} // namespace

Expected<std::string> configFamily(StringRef path) {
  Expected<json::Value> parsed = readConfigObject(path);
  if (!parsed)
    return parsed.takeError();
  std::optional<StringRef> type = parsed->getAsObject()->getString("model_type");
  if (!type)
    return fail("config '" + path + "' has no model_type; give the family with --model");
  if (presetNames(type->str()).empty()) {
    // presetConfig names the families llmc builds and those it does not yet.
    Expected<ModelConfig> known = presetConfig(type->str(), "tiny");
    return fail("config '" + path + "': " +
                (known ? std::string("model_type '") + *type + "'" : toString(known.takeError())));
  }
  return type->str();
}

namespace {

/// What Gemma2Config assumes for the keys a config.json leaves out, so the
/// file builds the model transformers builds from it.
void applyGemma2Defaults(ModelConfig &config, const json::Object &object) {
  auto absent = [&](const char *key) { return !object.get(key); };
  if (absent("num_key_value_heads"))
    config.nKvHead = 16;
  if (absent("head_dim"))
    config.headDimension = 256;
  if (absent("query_pre_attn_scalar"))
    config.queryPreAttnScalar = 224;
  if (absent("attn_logit_softcapping"))
    config.attnSoftcap = 50.0;
  if (absent("final_logit_softcapping"))
    config.finalSoftcap = 30.0;
  if (absent("sliding_window"))
    config.slidingWindow = 4096;
  if (absent("tie_word_embeddings"))
    config.tieEmbeddings = true;
}

/// What Gemma3TextConfig assumes for the keys a config.json leaves out
/// (its soft-caps default to none, as null gives).
void applyGemma3Defaults(ModelConfig &config, const json::Object &object) {
  auto absent = [&](const char *key) { return !object.get(key); };
  if (absent("num_key_value_heads"))
    config.nKvHead = 4;
  if (absent("head_dim"))
    config.headDimension = 256;
  if (absent("query_pre_attn_scalar"))
    config.queryPreAttnScalar = 256;
  if (absent("attn_logit_softcapping"))
    config.attnSoftcap = 0;
  if (absent("final_logit_softcapping"))
    config.finalSoftcap = 0;
  if (absent("sliding_window"))
    config.slidingWindow = 4096;
  if (absent("sliding_window_pattern"))
    config.slidingWindowPattern = 6;
  if (absent("rope_theta"))
    config.ropeTheta = 1e6;
  if (absent("rope_local_base_freq"))
    config.ropeLocalTheta = 10000.0;
  if (absent("rope_scaling"))
    config.ropeScaling = "none";
  if (absent("rms_norm_eps"))
    config.normEps = 1e-6;
  if (absent("tie_word_embeddings"))
    config.tieEmbeddings = true;
}

/// What MixtralConfig assumes for the keys a config.json leaves out.
void applyMixtralDefaults(ModelConfig &config, const json::Object &object) {
  auto absent = [&](const char *key) { return !object.get(key) || object.get(key)->getAsNull(); };
  if (absent("num_key_value_heads"))
    config.nKvHead = 8;
  if (absent("num_local_experts"))
    config.numExperts = 8;
  if (absent("num_experts_per_tok"))
    config.expertsPerToken = 2;
  if (absent("router_aux_loss_coef"))
    config.routerAuxLossCoef = 0.001;
  if (absent("output_router_logits"))
    config.outputRouterLogits = false;
  if (absent("sliding_window"))
    config.slidingWindow = 0;
  if (absent("rope_theta"))
    config.ropeTheta = 1e6;
  if (absent("tie_word_embeddings"))
    config.tieEmbeddings = false;
}

/// What Qwen2MoeConfig and Qwen3MoeConfig both assume for the keys a
/// config.json leaves out (absent or null).
void applyQwenMoeDefaults(ModelConfig &config, const json::Object &object) {
  auto absent = [&](const char *key) { return !object.get(key) || object.get(key)->getAsNull(); };
  if (absent("norm_topk_prob"))
    config.normTopkProb = false;
  if (absent("decoder_sparse_step"))
    config.decoderSparseStep = 1;
  if (absent("mlp_only_layers"))
    config.mlpOnlyLayers.clear();
  if (absent("router_aux_loss_coef"))
    config.routerAuxLossCoef = 0.001;
  if (absent("output_router_logits"))
    config.outputRouterLogits = false;
  if (absent("rope_theta"))
    config.ropeTheta = 10000.0;
  if (absent("rms_norm_eps"))
    config.normEps = 1e-6;
  if (absent("tie_word_embeddings"))
    config.tieEmbeddings = false;
}

/// What Qwen2MoeConfig assumes for the keys a config.json leaves out.
void applyQwen2MoeDefaults(ModelConfig &config, const json::Object &object) {
  auto absent = [&](const char *key) { return !object.get(key) || object.get(key)->getAsNull(); };
  if (absent("num_key_value_heads"))
    config.nKvHead = 16;
  if (absent("num_experts"))
    config.numExperts = 60;
  if (absent("num_experts_per_tok"))
    config.expertsPerToken = 4;
  if (absent("moe_intermediate_size"))
    config.moeFfnHidden = 1408;
  if (absent("shared_expert_intermediate_size"))
    config.sharedExpertFfnHidden = 5632;
  applyQwenMoeDefaults(config, object);
}

/// What Qwen3MoeConfig (transformers 4.51) assumes for the keys a
/// config.json leaves out. Its attention reads head_dim with getattr, so
/// without the key the heads are hidden_size / num_attention_heads wide.
void applyQwen3MoeDefaults(ModelConfig &config, const json::Object &object) {
  auto absent = [&](const char *key) { return !object.get(key) || object.get(key)->getAsNull(); };
  if (!object.get("num_key_value_heads"))
    config.nKvHead = 4;
  if (absent("head_dim"))
    config.headDimension = 0;
  if (absent("num_experts"))
    config.numExperts = 128;
  if (absent("num_experts_per_tok"))
    config.expertsPerToken = 8;
  if (absent("moe_intermediate_size"))
    config.moeFfnHidden = 768;
  applyQwenMoeDefaults(config, object);
  if (absent("attention_bias"))
    config.attentionBias = false;
}

/// What Qwen3Config (transformers 4.51) assumes for the keys a config.json
/// leaves out.
void applyQwen3Defaults(ModelConfig &config, const json::Object &object) {
  auto absent = [&](const char *key) { return !object.get(key) || object.get(key)->getAsNull(); };
  if (!object.get("num_key_value_heads"))
    config.nKvHead = 32; // null: multi-head attention (set above)
  if (absent("head_dim"))
    config.headDimension = 128;
  if (absent("rope_theta"))
    config.ropeTheta = 10000.0;
  if (absent("rms_norm_eps"))
    config.normEps = 1e-6;
  if (absent("tie_word_embeddings"))
    config.tieEmbeddings = false;
  if (absent("attention_bias"))
    config.attentionBias = false;
}

/// config.json's value as the text a Field parses: a number or a boolean,
/// or for a list field an array of integers ("0,3"); empty when it is not.
std::string fieldText(const json::Value &value, bool list) {
  if (list != (value.getAsArray() != nullptr))
    return "";
  if (auto i = value.getAsInteger())
    return std::to_string(*i);
  if (auto d = value.getAsNumber())
    return std::to_string(*d);
  if (auto b = value.getAsBoolean())
    return *b ? "true" : "false";
  const json::Array *items = value.getAsArray();
  if (!items)
    return "";
  std::string text;
  for (const json::Value &item : *items) {
    std::optional<int64_t> n = item.getAsInteger();
    if (!n)
      return "";
    text += (text.empty() ? "" : ",") + std::to_string(*n);
  }
  return text.empty() ? "," : text; // "," parses as the empty list
}

} // namespace

Error applyConfigJson(ModelConfig &config, StringRef path) {
  Expected<json::Value> parsed = readConfigObject(path);
  if (!parsed)
    return parsed.takeError();
  const json::Object *object = parsed->getAsObject();
  if (Error e = checkModelType(config, *object, path))
    return e;
  for (const auto &[key, value] : *object) {
    if (Error e = refuseUnsupported(config, key, value, path))
      return e;
    if (key == "sliding_window" && value.getAsNull()) {
      config.slidingWindow = 0; // null: no window (Mistral v0.2 and later)
      continue;
    }
    if (key == "attn_logit_softcapping" && value.getAsNull()) {
      config.attnSoftcap = 0; // null: uncapped (transformers: `is not None`)
      continue;
    }
    if (key == "final_logit_softcapping" && value.getAsNull()) {
      config.finalSoftcap = 0;
      continue;
    }
    if (key == "scoring_func" && value.getAsString()) {
      config.scoringFunc = value.getAsString()->str(); // validate() names the choices
      continue;
    }
    if (key == "rope_scaling") {
      if (Error e = applyRopeScaling(config, value, path))
        return e;
      continue;
    }
    const Field *field = findField(key);
    if (!field || value.getAsNull())
      continue; // HF configs carry many keys we do not model (architectures, ...);
                // null asks for the default (GPT-2's n_inner: 4 · n_embd)
    std::string text = fieldText(value, field->list);
    if (text.empty())
      return fail("config '" + path + "': key '" + key.str() + "' must be " +
                  (field->list ? "a list of integers" : "a number or boolean"));
    if (!field->set(config, text))
      return fail("config '" + path + "': bad value for '" + key.str() + "'");
  }
  // What HF derives when a key is absent or null: GPT-2's MLP is 4 · n_embd
  // wide unless n_inner says otherwise, and without num_key_value_heads
  // every head has its own keys and values (GPT-2 has no such key).
  auto given = [&](std::initializer_list<const char *> keys) {
    for (const char *key : keys)
      if (object->get(key) && !object->get(key)->getAsNull())
        return true;
    return false;
  };
  if (config.family == "gpt2" && !given({"ffn_hidden", "intermediate_size", "n_inner"}))
    config.ffnHidden = 4 * config.nEmbd;
  if (given({"n_head", "num_attention_heads"}) && !given({"n_kv_head", "num_key_value_heads"}))
    config.nKvHead = config.nHead;
  for (const char *key : {"max_position_embeddings", "n_positions"})
    if (auto maxPos = object->getInteger(key))
      config.seqLen = std::min<int64_t>(config.seqLen, *maxPos);
  // Qwen2 configs carry sliding_window even with use_sliding_window off.
  if (config.family == "qwen2" || config.qwenMoe() || config.qwen3())
    config.slidingWindow = 0;
  if (config.family == "mixtral")
    applyMixtralDefaults(config, *object);
  if (config.qwen2Moe())
    applyQwen2MoeDefaults(config, *object);
  if (config.qwen3())
    applyQwen3Defaults(config, *object);
  if (config.qwen3Moe())
    applyQwen3MoeDefaults(config, *object);
  if (config.gemma2())
    applyGemma2Defaults(config, *object);
  else if (config.gemma3())
    applyGemma3Defaults(config, *object);
  std::optional<int64_t> headDim = object->getInteger("head_dim");
  if (headDim && config.llamaLike() && !config.freeHeadDim() &&
      *headDim != config.nEmbd / config.nHead)
    return fail("config '" + path + "': head_dim = " + Twine(*headDim) +
                " is not supported: llmc's " + config.family +
                " heads are hidden_size / num_attention_heads = " +
                Twine(config.nEmbd / config.nHead) + " wide");
  return Error::success();
}

Error ModelConfig::validate() const {
  auto positive = [](int64_t v, const char *name) -> Error {
    if (v < 1)
      return fail(Twine(name) + " must be >= 1, got " + Twine(v));
    return Error::success();
  };
  for (auto [v, name] : {std::pair{vocabSize, "vocab_size"}, {nLayer, "n_layer"},
                         {nHead, "n_head"}, {nKvHead, "n_kv_head"}, {nEmbd, "n_embd"},
                         {ffnHidden, "ffn_hidden"}, {seqLen, "seq_len"},
                         {batchSize, "batch_size"}, {maxPositions, "max_positions"}})
    if (Error e = positive(v, name))
      return e;
  if (headDimension < 0)
    return fail("head_dim must be >= 1 (0: n_embd / n_head), got " + Twine(headDimension));
  if (headDimension > 0 && !freeHeadDim() && (nEmbd % nHead != 0 || headDimension != nEmbd / nHead))
    return fail("head_dim = " + Twine(headDimension) + " is not supported: llmc's " + family +
                " heads are n_embd / n_head wide");
  if (headDimension == 0 && nEmbd % nHead != 0)
    return fail("n_embd (" + Twine(nEmbd) + ") must be divisible by n_head (" + Twine(nHead) + ")");
  for (auto [v, name] : {std::pair{queryPreAttnScalar, "query_pre_attn_scalar"},
                         {attnSoftcap, "attn_softcap"},
                         {finalSoftcap, "final_softcap"}}) {
    if (!(v >= 0))
      return fail(Twine(name) + " must be >= 0 (0: none), got " + std::to_string(v));
    if (v > 0 && !gemma())
      return fail(Twine(name) + " applies to gemma2 and gemma3_text; " + family + " has none");
  }
  if (attentionBias && !qwen3Attention())
    return fail("attention_bias applies to qwen3 and qwen3_moe; " + family + " has " +
                (qkvBias() ? "biases on q, k and v only" : "no attention biases"));
  if (gemma3() && attnSoftcap > 0)
    return fail("attn_softcap is not supported for gemma3_text: " + Twine(kGemma3NoAttnSoftcap));
  if (nHead % nKvHead != 0)
    return fail("n_head (" + Twine(nHead) + ") must be divisible by n_kv_head (" + Twine(nKvHead) + ")");
  if (docSeparator < -1 || docSeparator >= vocabSize)
    return fail("doc_separator must be a token below vocab_size (" + Twine(vocabSize) +
                ") or -1, got " + Twine(docSeparator));
  if (family == "gpt2" && seqLen > maxPositions)
    return fail("seq_len (" + Twine(seqLen) + ") exceeds max_positions (" + Twine(maxPositions) + ")");
  if (family == "gpt2" && nKvHead != nHead)
    return fail("gpt2 has no grouped-query attention: n_kv_head must equal n_head");
  if (llamaLike() && headDim() % 2 != 0)
    return fail(family + " needs an even head dim for RoPE, got " + Twine(headDim()));
  if (slidingWindow < 0)
    return fail("sliding_window must be >= 0 (0: none), got " + Twine(slidingWindow));
  if (slidingWindow > 0 && !windowed())
    return fail("sliding_window applies to mistral's, gemma2's and gemma3_text's attention; " +
                family + " has none");
  if (Error e = validateExperts())
    return e;
  if (!(dropout >= 0 && dropout < 1))
    return fail("dropout must be in [0, 1), got " + std::to_string(dropout));
  if (!(normEps > 0) || !(initStd > 0) || !(ropeTheta > 0))
    return fail("norm_eps, init_std and rope_theta must be > 0");
  return validateRope();
}

Error ModelConfig::validateRope() const {
  if (gemma3()) {
    if (slidingWindowPattern < 1)
      return fail("sliding_window_pattern must be >= 1, got " + Twine(slidingWindowPattern));
    if (!(ropeLocalTheta > 0))
      return fail("rope_local_base_freq must be > 0, got " + std::to_string(ropeLocalTheta));
    if (ropeScaling != "none" && ropeScaling != "linear")
      return fail("rope_scaling must be none or linear for gemma3_text, got '" + ropeScaling + "'");
    // Linear scaling rides on the llama3 form (common/RopeScaling.h), exact for theta >= 1.
    if (ropeScaling == "linear" && (!(ropeFactor > 0) || ropeTheta < 1))
      return fail("linear rope_scaling needs rope_factor > 0 and rope_theta >= 1");
    return Error::success();
  }
  if (slidingWindowPattern != 0 || ropeLocalTheta != 0)
    return fail("sliding_window_pattern and rope_local_base_freq apply to gemma3_text; " + family +
                " has neither");
  if (ropeScaling != "none" && ropeScaling != "llama3")
    return fail("rope_scaling must be none or llama3, got '" + ropeScaling + "'");
  if (ropeScaling == "llama3") {
    if (!llamaLike())
      return fail("rope_scaling applies to llama's RoPE; " + family + " has no RoPE");
    if (!(ropeFactor > 0))
      return fail("rope_factor must be > 0, got " + std::to_string(ropeFactor));
    if (!(ropeLowFreqFactor > 0 && ropeHighFreqFactor > ropeLowFreqFactor))
      return fail("rope_low_freq_factor (" + std::to_string(ropeLowFreqFactor) +
                  ") and rope_high_freq_factor (" + std::to_string(ropeHighFreqFactor) +
                  ") must satisfy 0 < low < high");
    if (ropeOriginalMaxPositions < 1)
      return fail("rope_original_max_positions must be >= 1, got " +
                  Twine(ropeOriginalMaxPositions));
  }
  return Error::success();
}

Error ModelConfig::validateExperts() const {
  const bool routed = routedFamily();
  if (numExperts < 0)
    return fail("num_experts must be >= 0 (0: a dense MLP), got " + Twine(numExperts));
  if (routed && numExperts == 0)
    return fail(family + " needs num_experts >= 1");
  if (numExperts > 0 && !routed)
    return fail("num_experts applies to mixtral, qwen2_moe and qwen3_moe; " + family +
                " has a dense MLP");
  if (numExperts > 0 && (expertsPerToken < 1 || expertsPerToken > numExperts))
    return fail("experts_per_token must be in [1, num_experts = " + Twine(numExperts) + "], got " +
                Twine(expertsPerToken));
  if (family == "mixtral" && !normTopkProb)
    return fail("norm_topk_prob = false is not supported for mixtral: its router always "
                "renormalises the chosen experts' weights");
  if (!(routerAuxLossCoef >= 0) || !(routerZLossCoef >= 0))
    return fail("router_aux_loss_coef and router_z_loss_coef must be >= 0");
  if (Error e = validateRouterScoring())
    return e;
  if (!(moeCapacityFactor >= 0) || std::isinf(moeCapacityFactor))
    return fail("moe_capacity_factor must be a finite number >= 0 (0: dropless), got " +
                llvm::formatv("{0}", moeCapacityFactor).str());
  if (moeCapacityFactor > 0 && !routed)
    return fail("moe_capacity_factor applies to mixtral, qwen2_moe and qwen3_moe; " + family +
                " has no experts");
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
    return fail("scoring_func must be softmax or sigmoid, got '" + scoringFunc + "'");
  if (!(routedScalingFactor > 0) || std::isinf(routedScalingFactor))
    return fail("routed_scaling_factor must be a finite number > 0, got " +
                number(routedScalingFactor));
  if (!routed && (sigmoidRouter() || routedScalingFactor != 1.0))
    return fail("scoring_func and routed_scaling_factor apply to mixtral, qwen2_moe and "
                "qwen3_moe; " +
                family + " has no router");
  if (biasUpdateSpeed != 0.0)
    return fail("bias_update_speed = " + number(biasUpdateSpeed) +
                " is not supported: llmc keeps e_score_correction_bias frozen (loaded, "
                "checkpointed and exported, never updated); only 0");
  if (nGroup != 1 || topkGroup != 1)
    return fail("n_group = " + Twine(nGroup) + ", topk_group = " + Twine(topkGroup) +
                " is not supported: group-limited routing is not implemented (each token "
                "chooses among all experts); only 1 and 1");
  return Error::success();
}

Error ModelConfig::validateSparseLayers() const {
  if (!qwenMoe()) {
    if (moeFfnHidden != 0 || sharedExpertFfnHidden != 0 || decoderSparseStep != 1 ||
        !mlpOnlyLayers.empty())
      return fail(
          "moe_ffn_hidden, shared_expert_ffn_hidden, decoder_sparse_step and "
          "mlp_only_layers apply to qwen2_moe and qwen3_moe (the shared expert to qwen2_moe "
          "only); " +
          family + " has none");
    return Error::success();
  }
  if (qwen3Moe() && sharedExpertFfnHidden != 0)
    return fail("shared_expert_ffn_hidden = " + Twine(sharedExpertFfnHidden) +
                " is not supported: qwen3_moe has no shared expert (Qwen3MoeSparseMoeBlock)");
  if (qwen2Moe() && (moeFfnHidden < 1 || sharedExpertFfnHidden < 1))
    return fail("qwen2_moe needs moe_ffn_hidden >= 1 and shared_expert_ffn_hidden >= 1, got " +
                Twine(moeFfnHidden) + " and " + Twine(sharedExpertFfnHidden));
  if (moeFfnHidden < 1)
    return fail(family + " needs moe_ffn_hidden >= 1, got " + Twine(moeFfnHidden));
  if (decoderSparseStep < 1)
    return fail("decoder_sparse_step must be >= 1, got " + Twine(decoderSparseStep));
  // As transformers reads the list: a layer is dense when it is listed;
  // entries past the last layer name none (a model cut to fewer layers,
  // as the planner's probes are, keeps its list), and a model whose layers
  // are all dense is one.
  for (int64_t layer : mlpOnlyLayers)
    if (layer < 0)
      return fail("mlp_only_layers: layer " + Twine(layer) + " is negative");
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
