//===- HuggingFace.cpp - Hugging Face model directories -------------------===//

#include "runtime/checkpoint/HuggingFace.h"
#include "common/Half.h"

#include "runtime/checkpoint/CheckpointReader.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <sys/stat.h>

namespace llmc {
namespace {

/// One config.json key and the artifact metadata key (`model.<meta>`) it
/// must agree with. `fallback`: the value transformers' config class
/// assumes when the key is absent or null (empty: the key is required).
struct ConfigKey {
  const char *hf, *meta;
  enum Kind { Int, Float, Bool } kind;
  std::string fallback;
};

/// The families whose directories llmc reads and writes, and the
/// transformers class of each.
const std::pair<const char *, const char *> kFamilies[] = {
    {"gpt2", "GPT2LMHeadModel"},          {"llama", "LlamaForCausalLM"},
    {"qwen2", "Qwen2ForCausalLM"},        {"qwen3", "Qwen3ForCausalLM"},
    {"mistral", "MistralForCausalLM"},    {"gemma2", "Gemma2ForCausalLM"},
    {"mixtral", "MixtralForCausalLM"},    {"qwen2_moe", "Qwen2MoeForCausalLM"},
    {"gemma3_text", "Gemma3ForCausalLM"}, {"qwen3_moe", "Qwen3MoeForCausalLM"}};

/// The families interop knows, for messages.
const char *kFamilyList =
    "gpt2, llama, qwen2, qwen3, mistral, gemma2, gemma3_text, mixtral, qwen2_moe and qwen3_moe";

bool knownFamily(const std::string &family) {
  for (const auto &[name, architecture] : kFamilies)
    if (family == name)
      return true;
  return false;
}

const char *architectureOf(const std::string &family) {
  for (const auto &[name, architecture] : kFamilies)
    if (family == name)
      return architecture;
  return "";
}

/// The keys of a family's config, in the order export writes them.
std::vector<ConfigKey> configKeys(const std::string &family, const Artifact &artifact) {
  if (family == "gpt2")
    return {{"vocab_size", "vocab_size", ConfigKey::Int, ""},
            {"n_layer", "n_layer", ConfigKey::Int, ""},
            {"n_head", "n_head", ConfigKey::Int, ""},
            {"n_embd", "n_embd", ConfigKey::Int, ""},
            // null: 4 · n_embd (GPT2MLP).
            {"n_inner", "ffn_hidden", ConfigKey::Int,
             std::to_string(4 * static_cast<int64_t>(artifact.metaNumber("model.n_embd", 0)))},
            {"n_positions", "max_positions", ConfigKey::Int, ""},
            {"layer_norm_epsilon", "norm_eps", ConfigKey::Float, "1e-05"},
            {"tie_word_embeddings", "tie_embeddings", ConfigKey::Bool, "1"}};
  const bool gemma2 = family == "gemma2", gemma3 = family == "gemma3_text";
  std::vector<ConfigKey> keys = {
      {"vocab_size", "vocab_size", ConfigKey::Int, ""},
      {"num_hidden_layers", "n_layer", ConfigKey::Int, ""},
      {"num_attention_heads", "n_head", ConfigKey::Int, ""},
      // null: multi-head attention; absent: MistralConfig's 8,
      // Gemma2Config's and Qwen2MoeConfig's 16, Qwen3Config's 32,
      // Gemma3TextConfig's and Qwen3MoeConfig's 4, the others' multi-head
      // attention.
      {"num_key_value_heads", "n_kv_head", ConfigKey::Int,
       family == "mistral" || family == "mixtral" ? "8"
       : gemma2 || family == "qwen2_moe"          ? "16"
       : family == "qwen3"                        ? "32"
       : gemma3 || family == "qwen3_moe"          ? "4"
                                                  : artifact.meta("model.n_head")},
      {"hidden_size", "n_embd", ConfigKey::Int, ""},
      {"intermediate_size", "ffn_hidden", ConfigKey::Int, ""},
      {"max_position_embeddings", "max_positions", ConfigKey::Int, ""},
      {"rms_norm_eps", "norm_eps", ConfigKey::Float, family == "mixtral" ? "1e-05" : "1e-06"},
      {"rope_theta", "rope_theta", ConfigKey::Float,
       family == "mixtral" || gemma3 ? "1e6" : "10000"},
      {"tie_word_embeddings", "tie_embeddings", ConfigKey::Bool, gemma2 || gemma3 ? "1" : "0"}};
  if (family == "qwen3" || family == "qwen3_moe") {
    // Qwen3Config's defaults (transformers 4.51); Qwen3MoeConfig has no
    // head_dim of its own, and its attention's getattr falls back to
    // hidden_size / num_attention_heads.
    const int64_t heads = static_cast<int64_t>(artifact.metaNumber("model.n_head", 1));
    keys.push_back({"head_dim", "head_dim", ConfigKey::Int,
                    family == "qwen3" ? "128"
                                      : std::to_string(static_cast<int64_t>(
                                                           artifact.metaNumber("model.n_embd", 0)) /
                                                       std::max<int64_t>(1, heads))});
    keys.push_back({"attention_bias", "attention_bias", ConfigKey::Bool, "0"});
  }
  if (gemma2) {
    // Gemma2Config's defaults.
    keys.push_back({"head_dim", "head_dim", ConfigKey::Int, "256"});
    keys.push_back({"query_pre_attn_scalar", "query_pre_attn_scalar", ConfigKey::Float, "224"});
  }
  if (gemma3) {
    // Gemma3TextConfig's defaults.
    keys.push_back({"head_dim", "head_dim", ConfigKey::Int, "256"});
    keys.push_back({"query_pre_attn_scalar", "query_pre_attn_scalar", ConfigKey::Float, "256"});
    keys.push_back({"sliding_window_pattern", "sliding_window_pattern", ConfigKey::Int, "6"});
    keys.push_back({"rope_local_base_freq", "rope_local_base_freq", ConfigKey::Float, "10000"});
  }
  if (family == "mixtral") {
    // MixtralConfig's defaults.
    keys.push_back({"num_local_experts", "num_experts", ConfigKey::Int, "8"});
    keys.push_back({"num_experts_per_tok", "experts_per_token", ConfigKey::Int, "2"});
    keys.push_back({"router_aux_loss_coef", "router_aux_loss_coef", ConfigKey::Float, "0.001"});
    keys.push_back({"output_router_logits", "output_router_logits", ConfigKey::Bool, "0"});
  }
  if (family == "qwen2_moe") {
    // Qwen2MoeConfig's defaults (mlp_only_layers, a list: checkDenseLayers).
    keys.push_back({"num_experts", "num_experts", ConfigKey::Int, "60"});
    keys.push_back({"num_experts_per_tok", "experts_per_token", ConfigKey::Int, "4"});
    keys.push_back({"moe_intermediate_size", "moe_ffn_hidden", ConfigKey::Int, "1408"});
    keys.push_back(
        {"shared_expert_intermediate_size", "shared_expert_ffn_hidden", ConfigKey::Int, "5632"});
    keys.push_back({"norm_topk_prob", "norm_topk_prob", ConfigKey::Bool, "0"});
    keys.push_back({"decoder_sparse_step", "decoder_sparse_step", ConfigKey::Int, "1"});
    keys.push_back({"router_aux_loss_coef", "router_aux_loss_coef", ConfigKey::Float, "0.001"});
    keys.push_back({"output_router_logits", "output_router_logits", ConfigKey::Bool, "0"});
  }
  if (family == "qwen3_moe") {
    // Qwen3MoeConfig's defaults (transformers 4.51; no shared expert).
    keys.push_back({"num_experts", "num_experts", ConfigKey::Int, "128"});
    keys.push_back({"num_experts_per_tok", "experts_per_token", ConfigKey::Int, "8"});
    keys.push_back({"moe_intermediate_size", "moe_ffn_hidden", ConfigKey::Int, "768"});
    keys.push_back({"norm_topk_prob", "norm_topk_prob", ConfigKey::Bool, "0"});
    keys.push_back({"decoder_sparse_step", "decoder_sparse_step", ConfigKey::Int, "1"});
    keys.push_back({"router_aux_loss_coef", "router_aux_loss_coef", ConfigKey::Float, "0.001"});
    keys.push_back({"output_router_logits", "output_router_logits", ConfigKey::Bool, "0"});
  }
  return keys;
}

/// Keys whose null means "none" (the model's 0) and whose absence means
/// the config class's default: Mistral's window, Gemma 2's window and
/// soft-caps. {config.json key, model.<meta>, default when absent}.
struct OptionalKey {
  const char *hf, *meta;
  double absent;
};
std::vector<OptionalKey> optionalKeys(const std::string &family) {
  if (family == "mistral")
    return {{"sliding_window", "sliding_window", 4096}};
  if (family == "mixtral")
    return {{"sliding_window", "sliding_window", 0}};
  if (family == "gemma2")
    return {{"sliding_window", "sliding_window", 4096},
            {"attn_logit_softcapping", "attn_softcap", 50.0},
            {"final_logit_softcapping", "final_softcap", 30.0}};
  if (family == "gemma3_text")
    return {{"sliding_window", "sliding_window", 4096},
            {"attn_logit_softcapping", "attn_softcap", 0},
            {"final_logit_softcapping", "final_softcap", 0}};
  return {};
}

/// Llama 3's RoPE scaling: the members of config.json's `rope_scaling` (in
/// transformers' order) and the metadata (`model.<meta>`) they must equal.
const std::vector<std::pair<const char *, const char *>> kLlama3Scaling = {
    {"factor", "rope_factor"},
    {"high_freq_factor", "rope_high_freq_factor"},
    {"low_freq_factor", "rope_low_freq_factor"},
    {"original_max_position_embeddings", "rope_original_max_positions"}};

/// Gemma 3's linear scaling: its one member.
const std::vector<std::pair<const char *, const char *>> kLinearScaling = {
    {"factor", "rope_factor"}};

/// A config.json value as a number (booleans as 0 / 1).
double numberOf(const json::Value &v, const std::string &where) {
  if (v.kind() == json::Value::Kind::Bool)
    return v.asBool() ? 1 : 0;
  return v.asDouble(where);
}

void requireSetting(const json::Value &config, const std::string &path, const char *key,
                    const json::Value &expected, const char *why) {
  const json::Value *v = config.find(key);
  if (v && !v->isNull() && v->dump() != expected.dump())
    fail(path, ": ", key, " is ", v->dump(), ", but llmc's ", why);
}

/// What llmc's models compute that a config could choose otherwise.
void checkSemantics(const json::Value &config, const std::string &family,
                    const std::string &path, int64_t headDim) {
  if (family == "gemma2" || family == "gemma3_text") {
    // Gemma2MLP and Gemma3MLP read hidden_activation (they ignore hidden_act).
    const char *name = family == "gemma2" ? "Gemma 2" : "Gemma 3";
    if (const json::Value *act = config.find("hidden_activation");
        act && !act->isNull() && act->asString() != "gelu_pytorch_tanh" &&
        act->asString() != "gelu_new")
      fail(path, ": hidden_activation is \"", act->asString(), "\", but llmc's ", name,
           " MLP is GeGLU with the tanh GELU (gelu_pytorch_tanh)");
    requireSetting(config, path, "attention_bias", json::Value(false),
                   family == "gemma2" ? "Gemma 2 has no attention biases"
                                      : "Gemma 3 has no attention biases");
    return;
  }
  if (family == "gpt2") {
    if (const json::Value *act = config.find("activation_function");
        act && act->asString() != "gelu_new" && act->asString() != "gelu_pytorch_tanh")
      fail(path, ": activation_function is \"", act->asString(),
           "\", but llmc's GPT-2 uses the tanh GELU (gelu_new)");
    requireSetting(config, path, "scale_attn_weights", json::Value(true),
                   "GPT-2 scales attention by 1/sqrt(head dim)");
    requireSetting(config, path, "scale_attn_by_inverse_layer_idx", json::Value(false),
                   "GPT-2 does not scale attention by layer");
    return;
  }
  if (const json::Value *jitter = config.find("router_jitter_noise");
      jitter && !jitter->isNull() && numberOf(*jitter, path + ": router_jitter_noise") != 0)
    fail(path, ": router_jitter_noise is ", jitter->dump(),
         ", but llmc's Mixtral router adds no noise to its logits");
  requireSetting(config, path, "hidden_act", json::Value("silu"), "Llama uses SwiGLU (silu)");
  if (family == "qwen3" || family == "qwen3_moe") {
    // attention_bias and head_dim are model keys (configKeys); Qwen3's
    // attention dropout and window are not implemented.
    requireSetting(config, path, "use_sliding_window", json::Value(false),
                   "Qwen3 attends to every earlier key (no per-layer sliding window)");
    if (const json::Value *dropout = config.find("attention_dropout");
        dropout && !dropout->isNull() && numberOf(*dropout, path + ": attention_dropout") != 0)
      fail(path, ": attention_dropout is ", dropout->dump(),
           ", but llmc's attention has no dropout");
    return;
  }
  requireSetting(config, path, "attention_bias", json::Value(false),
                 "Llama has no attention biases");
  requireSetting(config, path, "mlp_bias", json::Value(false), "Llama has no MLP biases");
  requireSetting(config, path, "head_dim", json::Value(headDim),
                 "Llama heads are hidden_size / num_attention_heads wide");
  // transformers 4.44 applies Qwen2's window only in flash attention, to the
  // layers from max_window_layers on: llmc does not build that model.
  requireSetting(config, path, "use_sliding_window", json::Value(false),
                 "Qwen2 attends to every earlier key (no per-layer sliding window)");
}

/// A router's scoring keys (llmc's, named after DeepSeek-V3's config):
/// scoring_func (absent: softmax), routed_scaling_factor (absent: 1)
/// against the model's; n_group and topk_group, which llmc does not model,
/// must be absent, null or 1.
void checkRouterScoring(const json::Value &config, const Artifact &artifact,
                        const std::string &path) {
  const json::Value *func = config.find("scoring_func");
  const std::string have =
      func && !func->isNull() ? func->asString(path + ": scoring_func") : "softmax";
  const std::string want = artifact.meta("model.scoring_func", "softmax");
  if (have != want)
    fail(path, ": scoring_func is ", have, ", but the model has scoring_func = ", want);
  const json::Value *factor = config.find("routed_scaling_factor");
  const double scale = factor && !factor->isNull() ? numberOf(*factor, path) : 1.0;
  const double model = artifact.metaNumber("model.routed_scaling_factor", 1.0);
  if (std::fabs(scale - model) > 1e-12 * std::fabs(model))
    fail(path, ": routed_scaling_factor is ", scale, ", but the model has ", model);
  for (const char *key : {"n_group", "topk_group"})
    if (const json::Value *v = config.find(key); v && !v->isNull() && numberOf(*v, path) != 1)
      fail(path, ": ", key, " = ", v->dump(),
           " is not supported: llmc has no group-limited routing (only 1)");
}

/// scoring_func and routed_scaling_factor for config.json, when not the
/// defaults (a softmax router's config stays transformers' own).
void setRouterScoring(json::Value &config, const Artifact &artifact) {
  const std::string func = artifact.meta("model.scoring_func", "softmax");
  const double scale = artifact.metaNumber("model.routed_scaling_factor", 1.0);
  if (func != "softmax")
    config.set("scoring_func", json::Value(func));
  if (scale != 1.0)
    config.set("routed_scaling_factor", json::Value(scale));
}

/// The optional keys (Mistral's sliding_window, Gemma 2's window and
/// soft-caps) against the model's (model.<meta>, 0 or absent: none). null
/// is none; an absent key is the config class's default.
void checkOptionalKeys(const json::Value &config, const Artifact &artifact,
                       const std::string &family, const std::string &path) {
  for (const OptionalKey &key : optionalKeys(family)) {
    const double want = artifact.metaNumber(std::string("model.") + key.meta, 0);
    const json::Value *v = config.find(key.hf);
    const double have = !v ? key.absent : v->isNull() ? 0 : numberOf(*v, path + ": " + key.hf);
    if (std::fabs(have - want) > 1e-12 * std::fabs(want))
      fail(path, ": ", key.hf, " is ",
           v ? v->dump() : std::to_string(static_cast<int64_t>(key.absent)) + " (default)",
           ", but the model has ", key.meta, " = ",
           want ? artifact.meta(std::string("model.") + key.meta) : "none");
  }
}

/// config.json's `rope_scaling` against the model's: null (or type
/// "default") for an unscaled RoPE, else llama3 with the model's numbers.
/// The type is `rope_type`, or `type` in older files, as transformers reads it.
void checkRopeScaling(const json::Value &config, const Artifact &artifact,
                      const std::string &path) {
  const json::Value *scaling = config.find("rope_scaling");
  std::string have = "none";
  if (scaling && !scaling->isNull()) {
    if (scaling->kind() != json::Value::Kind::Object)
      fail(path, ": rope_scaling must be an object or null, got ", scaling->dump());
    const json::Value *type = scaling->find("rope_type");
    if (!type || type->isNull())
      type = scaling->find("type");
    if (!type || type->isNull())
      fail(path, ": rope_scaling has no rope_type");
    have = type->asString(path + ": rope_scaling.rope_type");
    const char *implemented = artifact.meta("model.family") == "gemma3_text" ? "linear" : "llama3";
    if (have == "default")
      have = "none";
    else if (have != implemented)
      fail(path, ": rope_scaling type '", have, "' is not supported (llmc implements ", implemented,
           ")");
  }
  // Artifacts compiled before llmc knew the scaling record none: unscaled.
  const std::string want = artifact.meta("model.rope_scaling", "none");
  if (have != want)
    fail(path, ": rope_scaling is ",
         !scaling || scaling->isNull() ? "null" : have == "none" ? "default" : have,
         ", but the model has rope_scaling = ", want);
  if (want == "none")
    return;
  for (const auto &[hf, meta] : want == "linear" ? kLinearScaling : kLlama3Scaling) {
    std::string key = std::string("model.") + meta;
    const json::Value *v = scaling->find(hf);
    if (!v || v->isNull())
      fail(path, ": rope_scaling has no '", hf, "' (the model has ", meta, " = ",
           artifact.meta(key), ")");
    double given = numberOf(*v, path + ": rope_scaling." + hf),
           expected = artifact.metaNumber(key, 0);
    if (std::fabs(given - expected) > 1e-12 * std::fabs(expected))
      fail(path, ": rope_scaling.", hf, " is ", v->dump(), ", but the model has ", meta, " = ",
           artifact.meta(key));
  }
}

/// Qwen-MoE's layers with a dense MLP: config.json's mlp_only_layers (absent
/// or null: none) against the model's (model.mlp_only_layers, "0,3").
std::string denseLayersOf(const json::Value &config, const std::string &path) {
  const json::Value *layers = config.find("mlp_only_layers");
  std::string text;
  if (!layers || layers->isNull())
    return text;
  for (const json::Value &layer : layers->asArray(path + ": mlp_only_layers"))
    text += (text.empty() ? "" : ",") + std::to_string(layer.asInt(path + ": mlp_only_layers[]"));
  return text;
}

void checkDenseLayers(const json::Value &config, const Artifact &artifact,
                      const std::string &path) {
  const std::string have = denseLayersOf(config, path),
                    want = artifact.meta("model.mlp_only_layers");
  if (have != want)
    fail(path, ": mlp_only_layers is [", have, "], but the model has mlp_only_layers = [", want,
         "]");
}

/// Qwen-MoE's mlp_only_layers for config.json: "0,3" as [0, 3].
json::Value denseLayersJson(const Artifact &artifact) {
  json::Value dense = json::Value::array();
  const std::string list = artifact.meta("model.mlp_only_layers");
  for (size_t start = 0; start < list.size();) {
    size_t end = std::min(list.find(',', start), list.size());
    dense.push(json::Value(static_cast<int64_t>(std::stoll(list.substr(start, end - start)))));
    start = end + 1;
  }
  return dense;
}

/// Tensors older transformers saved that are buffers, not parameters:
/// GPT-2's causal masks, Llama's RoPE frequencies. Recomputed, not loaded.
bool isBuffer(const std::string &hf) {
  auto endsWith = [&](const char *suffix) {
    size_t n = std::strlen(suffix);
    return hf.size() >= n && hf.compare(hf.size() - n, n, suffix) == 0;
  };
  return endsWith(".attn.bias") || endsWith(".attn.masked_bias") ||
         endsWith(".rotary_emb.inv_freq");
}

std::string familyOf(const Artifact &artifact, const std::string &what) {
  std::string family = artifact.meta("model.family");
  if (!knownFamily(family))
    fail(what, ": the artifact's model is '", family, "'; Hugging Face interop knows ",
         kFamilyList);
  return family;
}

std::string readText(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    fail("cannot open '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

std::string huggingFaceName(const std::string &family, const std::string &name) {
  if (name == "lm_head.weight")
    return name;
  return (family == "gpt2" ? "transformer." : "model.") + name;
}

std::vector<std::string> expertSliceNames(const std::string &family, const std::string &name,
                                          int64_t experts) {
  static const std::string kMarker = ".experts.";
  const size_t at = name.find(kMarker);
  const size_t next = at == std::string::npos ? at : at + kMarker.size();
  if (at == std::string::npos || next >= name.size() ||
      std::isdigit(static_cast<unsigned char>(name[next])))
    return {};
  std::vector<std::string> names;
  for (int64_t e = 0; e < experts; ++e)
    names.push_back(huggingFaceName(family, name.substr(0, next) + std::to_string(e) + "." +
                                                name.substr(next)));
  return names;
}

bool isDirectory(const std::string &path) {
  struct stat s;
  return stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

HuggingFaceModel::HuggingFaceModel(const std::string &dir, const Artifact &artifact) {
  std::string path = dir + "/config.json";
  if (!std::ifstream(path))
    fail("--weights: '", dir, "' is a directory without config.json (a Hugging Face model "
         "directory has config.json and model.safetensors)");
  family_ = familyOf(artifact, path);
  json::Value config = json::parse(readText(path), path);
  const json::Value *type = config.find("model_type");
  if (!type || type->asString(path + ": model_type") != family_)
    fail(path, ": model_type is ", type ? type->dump() : "missing", ", but the artifact's model is ",
         family_);
  for (const ConfigKey &key : configKeys(family_, artifact)) {
    std::string meta = std::string("model.") + key.meta;
    if (artifact.meta(meta).empty())
      fail(path, ": the artifact records no ", meta, "; recompile it with this llmc");
    double want = artifact.metaNumber(meta, 0);
    const json::Value *v = config.find(key.hf);
    if ((!v || v->isNull()) && key.fallback.empty())
      fail(path, ": no '", key.hf, "' (the model has ", key.meta, " = ", artifact.meta(meta), ")");
    double have = v && !v->isNull() ? numberOf(*v, path + ": " + key.hf) : std::stod(key.fallback);
    // Llama computes RoPE at any position: the config's limit only has to
    // cover the compiled sequence length.
    if (family_ != "gpt2" && std::string(key.meta) == "max_positions") {
      if (have < artifact.metaNumber("model.seq_len", 0))
        fail(path, ": max_position_embeddings is ", have, ", below the model's seq_len ",
             artifact.meta("model.seq_len"));
      continue;
    }
    if (std::fabs(have - want) > 1e-12 * std::fabs(want))
      fail(path, ": ", key.hf, " is ", v && !v->isNull() ? v->dump() : key.fallback + " (default)",
           ", but the model has ", key.meta, " = ", artifact.meta(meta));
  }
  checkSemantics(config, family_, path,
                 static_cast<int64_t>(artifact.metaNumber("model.n_embd", 0) /
                                      artifact.metaNumber("model.n_head", 1)));
  if (family_ != "gpt2")
    checkRopeScaling(config, artifact, path);
  checkOptionalKeys(config, artifact, family_, path);
  const bool qwenMoe = family_ == "qwen2_moe" || family_ == "qwen3_moe";
  if (qwenMoe)
    checkDenseLayers(config, artifact, path);
  if (family_ == "mixtral" || qwenMoe)
    checkRouterScoring(config, artifact, path);
  tied_ = artifact.metaNumber("model.tie_embeddings", 0) != 0;
  for (const auto &[name, shape] : modelParameters(artifact)) {
    std::vector<std::string> slices = expertSliceNames(family_, name, shape.empty() ? 0 : shape[0]);
    if (slices.empty())
      slices.push_back(huggingFaceName(family_, name));
    parameters_.insert(slices.begin(), slices.end());
  }

  files_ = std::make_unique<HuggingFaceFiles>(dir);
  checkNoExtraTensors();
}

const SafetensorsFile *HuggingFaceModel::find(const std::string &name, std::string &stored) const {
  stored = huggingFaceName(family_, name);
  return files_->find(stored);
}

HuggingFaceFiles::HuggingFaceFiles(const std::string &dir) {
  // One file, or the shards the index's weight map names.
  std::string index = dir + "/model.safetensors.index.json";
  if (std::ifstream(index)) {
    json::Value map = json::parse(readText(index), index);
    std::set<std::string> shards;
    for (const auto &[tensor, file] : map.at("weight_map").members())
      shards.insert(file.asString(index + ": weight_map"));
    for (const std::string &shard : shards)
      files_.push_back(std::make_unique<SafetensorsFile>(dir + "/" + shard));
  } else {
    files_.push_back(std::make_unique<SafetensorsFile>(dir + "/model.safetensors"));
  }
  for (const auto &file : files_)
    for (const SafeTensor &t : file->tensors())
      if (!where_.emplace(t.name, file.get()).second)
        fail(file->path(), ": tensor '", t.name, "' is also in ", where_[t.name]->path());
}

const SafetensorsFile *HuggingFaceFiles::find(const std::string &name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : it->second;
}

std::string huggingFaceFamily(const std::string &dir) {
  std::string path = dir + "/config.json";
  json::Value config = json::parse(readText(path), path);
  const json::Value *type = config.find("model_type");
  std::string family = type ? type->asString(path + ": model_type") : "";
  if (!knownFamily(family))
    fail(path, ": model_type is ", type ? type->dump() : "missing", "; Hugging Face interop knows ",
         kFamilyList);
  return family;
}

bool huggingFaceFamily(const std::string &dir, std::string &family, std::string &error) {
  return catchErrors(error, [&] { family = huggingFaceFamily(dir); });
}

void HuggingFaceModel::checkNoExtraTensors() const {
  std::string embedding = huggingFaceName(family_, family_ == "gpt2" ? "wte.weight"
                                                                      : "embed_tokens.weight");
  const std::map<std::string, const SafetensorsFile *> &where = files_->tensors();
  for (const auto &[name, file] : where) {
    if (parameters_.count(name) || isBuffer(name))
      continue;
    // A tied head saved anyway must be the table it is tied to.
    if (tied_ && name == "lm_head.weight" && where.count(embedding)) {
      const SafeTensor *head = file->find(name), *table = where.at(embedding)->find(embedding);
      if (head->bytes == table->bytes && std::memcmp(head->data, table->data, head->bytes) == 0)
        continue;
      fail(file->path(), ": lm_head.weight differs from ", embedding,
           ", but the model ties its head to the embedding (tie_word_embeddings)");
    }
    fail(file->path(), ": tensor '", name, "' is no parameter of the model");
  }
}

namespace {

/// HF's torch_dtype names.
const std::vector<std::pair<const char *, DType>> kTorchDTypes = {
    {"float32", DType::F32}, {"bfloat16", DType::BF16}, {"float16", DType::F16}};

/// `t` in `dtype`, rounded to nearest even when narrower: a bf16 model
/// loaded into fp32 parameters exports to its own bytes.
GlobalTensor convert(const GlobalTensor &t, DType dtype, const std::string &name) {
  if (t.dtype == dtype)
    return t;
  std::vector<float> values = floatValues(t, name);
  GlobalTensor out{dtype, t.shape, std::vector<uint8_t>(values.size() * dtypeSize(dtype))};
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::F32) {
      std::memcpy(out.bytes.data() + 4 * i, &values[i], 4);
    } else {
      uint16_t v = dtype == DType::BF16 ? floatToBf16(values[i]) : half::fromFloat(values[i]);
      std::memcpy(out.bytes.data() + 2 * i, &v, 2);
    }
  }
  return out;
}

/// --dtype's torch dtype; none when empty (each tensor keeps its own).
std::optional<DType> exportDType(const std::string &torchDType) {
  if (torchDType.empty())
    return std::nullopt;
  auto it = std::find_if(kTorchDTypes.begin(), kTorchDTypes.end(),
                         [&](const auto &d) { return torchDType == d.first; });
  if (it == kTorchDTypes.end())
    fail("--dtype: '", torchDType, "' is not float32, bfloat16 or float16");
  return it->second;
}

/// Every parameter at full precision (a master copy when kept) of a
/// checkpoint directory or a weights file: what each is, from the index or
/// the header; its bytes are read as the file is written.
struct ExportSource {
  std::unique_ptr<CheckpointReader> reader;
  std::unique_ptr<SafetensorsFile> file;
  std::vector<std::string> names;
  std::vector<SafeTensor> stored; ///< data: into the mapped file

  explicit ExportSource(const std::string &source) {
    if (!isDirectory(source)) {
      file = std::make_unique<SafetensorsFile>(source);
      for (const SafeTensor &t : file->tensors()) {
        names.push_back(t.name);
        stored.push_back(t);
      }
      return;
    }
    reader = std::make_unique<CheckpointReader>(source);
    for (const std::string &name : reader->parameterNames()) {
      SafeTensor t;
      reader->describe(reader->parameterSource(name), t.dtype, t.shape);
      names.push_back(name);
      stored.push_back(t);
    }
  }
};

/// The tensors of the Hugging Face file: tensors[i] is (slice sliceOf[i]
/// of) the source's parameter sourceOf[i], in the written dtype.
struct ExportTensors {
  std::vector<SafeTensor> tensors;
  std::vector<size_t> sourceOf, sliceOf;
  std::set<DType> dtypes;
};

/// Checks that the source holds exactly the artifact's parameters (what
/// config.json describes), each a float tensor of its shape, and names
/// each tensor as Hugging Face does: a stacked experts' parameter as one
/// tensor per expert. Written in `target`, or each in its own dtype.
ExportTensors exportTensors(const ExportSource &in, const std::string &source,
                            const Artifact &artifact, const std::string &artifactPath,
                            const std::string &family, std::optional<DType> target) {
  std::map<std::string, std::vector<int64_t>> expected = modelParameters(artifact);
  ExportTensors out;
  for (size_t i = 0; i < in.names.size(); ++i) {
    const std::string &name = in.names[i];
    if (isAdapterTensor(name))
      fail(
          source, ": '", name,
          "' is a LoRA adapter; fold the adapters into their weights "
          "first (llmc merge-lora) and export that file with the artifact compiled without --lora");
    if (name.find('/') != std::string::npos)
      continue; // a weights file's observer ranges: state, not parameters
    const SafeTensor &t = in.stored[i];
    auto want = expected.find(name);
    if (want == expected.end())
      fail(source, ": '", name, "' is no parameter of ", artifactPath, "'s model");
    if (want->second != t.shape)
      fail(source, ": '", name, "' is ", shapeList(t.shape), " but ", artifactPath, "'s model has ",
           shapeList(want->second));
    expected.erase(want);
    if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
      fail(source, ": '", name, "' is ", dtypeName(t.dtype),
           " (quantized?); Hugging Face models hold float tensors");
    DType dtype = target.value_or(t.dtype);
    out.dtypes.insert(dtype);
    std::vector<std::string> slices =
        expertSliceNames(family, name, t.shape.empty() ? 0 : t.shape[0]);
    std::vector<int64_t> shape = t.shape;
    if (!slices.empty())
      shape.erase(shape.begin());
    else
      slices.push_back(huggingFaceName(family, name));
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    for (size_t e = 0; e < slices.size(); ++e) {
      out.tensors.push_back(
          {slices[e], dtype, shape, nullptr, static_cast<size_t>(numel) * dtypeSize(dtype)});
      out.sourceOf.push_back(i);
      out.sliceOf.push_back(e);
    }
  }
  if (!expected.empty())
    fail(source, ": no '", expected.begin()->first, "' (a parameter of ", artifactPath,
         "'s model)");
  if (out.dtypes.size() > 1)
    fail(source, ": parameters of several dtypes; Hugging Face's torch_dtype names one");
  return out;
}

/// What each family's config.json says beyond the shared keys: its
/// activation, biases, windows and router.
void setFamilyKeys(json::Value &config, const std::string &family, const Artifact &artifact) {
  if (family == "gpt2") {
    config.set("activation_function", json::Value("gelu_new"));
    return;
  }
  if (family == "gemma2" || family == "gemma3_text") {
    // Both names, as Google's releases write them (Gemma2MLP and Gemma3MLP
    // read the second).
    config.set("hidden_act", json::Value("gelu_pytorch_tanh"));
    config.set("hidden_activation", json::Value("gelu_pytorch_tanh"));
    config.set("attention_bias", json::Value(false));
    return;
  }
  config.set("hidden_act", json::Value("silu"));
  if (family == "llama") {
    config.set("attention_bias", json::Value(false));
    config.set("mlp_bias", json::Value(false));
  }
  const bool qwen3 = family == "qwen3" || family == "qwen3_moe";
  const bool qwenMoe = family == "qwen2_moe" || family == "qwen3_moe";
  if (family == "qwen2" || qwenMoe || qwen3)
    config.set("use_sliding_window", json::Value(false));
  // No window, as Qwen3's releases write it: transformers 4.51's eager and
  // sdpa masks apply a non-null sliding_window even with use_sliding_window
  // off, and Qwen3Config's default is 4096.
  if (qwen3)
    config.set("sliding_window", json::Value());
  if (qwenMoe)
    config.set("mlp_only_layers", denseLayersJson(artifact));
  if (family == "mixtral" || qwenMoe)
    setRouterScoring(config, artifact);
}

/// config.json for the artifact's model, its tensors `torchDType`.
json::Value exportConfig(const Artifact &artifact, const std::string &artifactPath,
                         const std::string &family, const std::string &torchDType) {
  json::Value config = json::Value::object();
  json::Value architectures = json::Value::array();
  architectures.push(json::Value(architectureOf(family)));
  config.set("architectures", architectures);
  config.set("model_type", json::Value(family));
  for (const ConfigKey &key : configKeys(family, artifact)) {
    std::string meta = std::string("model.") + key.meta;
    if (artifact.meta(meta).empty())
      fail(artifactPath, ": the artifact records no ", meta, "; recompile it with this llmc");
    double v = artifact.metaNumber(meta, 0);
    config.set(key.hf, key.kind == ConfigKey::Int    ? json::Value(static_cast<int64_t>(v))
                       : key.kind == ConfigKey::Bool ? json::Value(v != 0)
                                                     : json::Value(v));
  }
  setFamilyKeys(config, family, artifact);
  for (const OptionalKey &key : optionalKeys(family)) {
    double v = artifact.metaNumber(std::string("model.") + key.meta, 0);
    bool integral = std::string(key.hf) == "sliding_window";
    config.set(key.hf, v == 0     ? json::Value()
                       : integral ? json::Value(static_cast<int64_t>(v))
                                  : json::Value(v));
  }
  const std::string ropeScaling = artifact.meta("model.rope_scaling", "none");
  if (family != "gpt2" && (ropeScaling == "llama3" || ropeScaling == "linear")) {
    json::Value scaling = json::Value::object();
    for (const auto &[hf, meta] : ropeScaling == "linear" ? kLinearScaling : kLlama3Scaling) {
      double v = artifact.metaNumber(std::string("model.") + meta, 0);
      scaling.set(hf, std::string(hf) == "original_max_position_embeddings"
                          ? json::Value(static_cast<int64_t>(v))
                          : json::Value(v));
    }
    scaling.set("rope_type", json::Value(ropeScaling));
    config.set("rope_scaling", scaling);
  }
  config.set("torch_dtype", json::Value(torchDType));
  return config;
}

HuggingFaceExport exportOrThrow(const std::string &source, const std::string &artifactPath,
                                const std::string &outDir, const std::string &torchDType) {
  const std::optional<DType> target = exportDType(torchDType);
  Artifact artifact = loadArtifact(artifactPath);
  std::string family = familyOf(artifact, artifactPath);
  ExportSource in(source);
  ExportTensors out = exportTensors(in, source, artifact, artifactPath, family, target);
  // Tensor i's bytes, in the written dtype: the mapped file's own when no
  // conversion is asked, else a converted copy of its parameter held until
  // the next parameter (a stacked parameter's slices share one).
  GlobalTensor current;
  size_t currentSource = SIZE_MAX;
  auto wholeBytes = [&](size_t k, DType dtype) -> const uint8_t * {
    if (in.file && in.stored[k].dtype == dtype) {
      in.file->checkUnchanged();
      return static_cast<const uint8_t *>(in.stored[k].data);
    }
    if (k != currentSource) {
      if (in.file) {
        const uint8_t *data = static_cast<const uint8_t *>(in.stored[k].data);
        current = {in.stored[k].dtype, in.stored[k].shape,
                   std::vector<uint8_t>(data, data + in.stored[k].bytes)};
      } else {
        current = in.reader->readParameter(in.names[k]);
      }
      if (current.dtype != dtype)
        current = convert(current, dtype, in.names[k]);
      currentSource = k;
    }
    return current.bytes.data();
  };
  auto bytesOf = [&](size_t i) -> const void * {
    return wholeBytes(out.sourceOf[i], out.tensors[i].dtype) +
           out.sliceOf[i] * out.tensors[i].bytes;
  };

  HuggingFaceExport report;
  report.tensors = static_cast<int64_t>(out.tensors.size());
  DType dtype = out.dtypes.empty() ? DType::F32 : *out.dtypes.begin();
  for (const auto &[name, d] : kTorchDTypes)
    if (d == dtype)
      report.dtype = name;
  json::Value config = exportConfig(artifact, artifactPath, family, report.dtype);

  if (!isDirectory(outDir) && mkdir(outDir.c_str(), 0755) != 0)
    fail("cannot create directory '", outDir, "'");
  // The tensors first: a source that fails while being read leaves no
  // config.json describing a model that is not there.
  // transformers refuses safetensors files whose format is not "pt".
  writeSafetensors(outDir + "/model.safetensors", out.tensors, bytesOf, {{"format", "pt"}});
  std::string text = config.dump(2) + "\n";
  writeFileAtomic(outDir + "/config.json", text.data(), text.size());
  return report;
}

} // namespace

bool exportHuggingFace(const std::string &source, const std::string &artifactPath,
                       const std::string &outDir, const std::string &dtype,
                       HuggingFaceExport &report, std::string &error) {
  return catchErrors(error, [&] { report = exportOrThrow(source, artifactPath, outDir, dtype); });
}

} // namespace llmc
