//===- HfConfigJson.cpp - a Hugging Face config.json as a ModelConfig -===//

#include "models/ConfigFields.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace llvm;

namespace llmc {
namespace {

/// Gemma 3's `rope_scaling` (its global layers'): linear with a factor,
/// as the 4B and larger checkpoints have it.
Error applyLinearRopeScaling(ModelConfig &config, const json::Object &scaling, StringRef type,
                             const std::string &where) {
  if (type != "linear")
    return configError(where + " type '" + type +
                       "' is not supported for gemma3_text (llmc implements linear)");
  const json::Value *factor = scaling.get("factor");
  if (!factor)
    return configError(where + " (linear) has no 'factor'");
  std::optional<double> d = factor->getAsNumber();
  if (!d)
    return configError(where + ".factor must be a number");
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
    return configError(where + " must be an object or null");
  std::optional<StringRef> type = scaling->getString("rope_type");
  if (!type)
    type = scaling->getString("type");
  if (!type)
    return configError(where + " has no rope_type");
  if (*type == "default") {
    config.ropeScaling = "none";
    return Error::success();
  }
  if (config.gemma3())
    return applyLinearRopeScaling(config, *scaling, *type, where);
  if (*type != "llama3")
    return configError(where + " type '" + *type + "' is not supported (llmc implements llama3)");
  auto number = [&](const char *key, double &out) -> Error {
    const json::Value *v = scaling->get(key);
    if (!v)
      return configError(where + " (llama3) has no '" + key + "'");
    std::optional<double> d = v->getAsNumber();
    if (!d)
      return configError(where + "." + key + " must be a number");
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
    return configError(where + " (llama3) has no 'original_max_position_embeddings'");
  std::optional<int64_t> n = original->getAsInteger();
  if (!n)
    return configError(where + ".original_max_position_embeddings must be an integer");
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
  return configError("config '" + path + "': model_type is '" + *type +
                     "', but the model family is '" + config.family + "'");
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
/// Settings of a config that change what the model computes and that llmc
/// does not implement: an error naming the key, never a silently different
/// model.
Error refuseUnsupported(const ModelConfig &config, StringRef key, const json::Value &value,
                        StringRef path) {
  auto refuse = [&](const Twine &why) {
    return configError("config '" + path + "': " + key + " = " + formatv("{0}", value).str() +
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
    return configError("cannot read config '" + path + "': " + buffer.getError().message());
  Expected<json::Value> parsed = json::parse((*buffer)->getBuffer());
  if (!parsed)
    return configError("config '" + path + "' is not valid JSON: " + toString(parsed.takeError()));
  if (!parsed->getAsObject())
    return configError("config '" + path + "' must be a JSON object");
  return parsed;
}

} // namespace

Expected<std::string> configFamily(StringRef path) {
  Expected<json::Value> parsed = readConfigObject(path);
  if (!parsed)
    return parsed.takeError();
  std::optional<StringRef> type = parsed->getAsObject()->getString("model_type");
  if (!type)
    return configError("config '" + path + "' has no model_type; give the family with --model");
  if (presetNames(type->str()).empty()) {
    // presetConfig names the families llmc builds and those it does not yet.
    Expected<ModelConfig> known = presetConfig(type->str(), "tiny");
    return configError(
        "config '" + path +
        "': " + (known ? std::string("model_type '") + *type + "'" : toString(known.takeError())));
  }
  return type->str();
}

namespace {

/// A key a family's config class fills in when config.json leaves it out,
/// and the value as the key's field parses it.
struct HfDefault {
  const char *key;
  const char *value;
};

/// Sets each of `defaults` whose key `object` leaves out: absent, or
/// null where `nullIsAbsent` (Gemma's configs give null a meaning of its
/// own: no soft-cap, no window).
void applyDefaults(ModelConfig &config, const json::Object &object, ArrayRef<HfDefault> defaults,
                   bool nullIsAbsent) {
  for (const HfDefault &d : defaults) {
    const json::Value *given = object.get(d.key);
    if (given && !(nullIsAbsent && given->getAsNull()))
      continue;
    const ConfigField *field = findConfigField(d.key);
    if (!field || !field->set(config, d.value))
      report_fatal_error(Twine("config.json default ") + d.key + " = " + d.value +
                         " names no field or does not parse");
  }
}

/// What Gemma2Config assumes for the keys a config.json leaves out, so the
/// file builds the model transformers builds from it.
constexpr HfDefault kGemma2Defaults[] = {
    {"num_key_value_heads", "16"},     {"head_dim", "256"},
    {"query_pre_attn_scalar", "224"},  {"attn_logit_softcapping", "50"},
    {"final_logit_softcapping", "30"}, {"sliding_window", "4096"},
    {"tie_word_embeddings", "true"},
};

/// What Gemma3TextConfig assumes (its soft-caps default to none, as null
/// gives).
constexpr HfDefault kGemma3Defaults[] = {
    {"num_key_value_heads", "4"},      {"head_dim", "256"},
    {"query_pre_attn_scalar", "256"},  {"attn_logit_softcapping", "0"},
    {"final_logit_softcapping", "0"},  {"sliding_window", "4096"},
    {"sliding_window_pattern", "6"},   {"rope_theta", "1000000"},
    {"rope_local_base_freq", "10000"}, {"rope_scaling", "none"},
    {"rms_norm_eps", "1e-6"},          {"tie_word_embeddings", "true"},
};

/// What MixtralConfig assumes.
constexpr HfDefault kMixtralDefaults[] = {
    {"num_key_value_heads", "8"},      {"num_local_experts", "8"},
    {"num_experts_per_tok", "2"},      {"router_aux_loss_coef", "0.001"},
    {"output_router_logits", "false"}, {"sliding_window", "0"},
    {"rope_theta", "1000000"},         {"tie_word_embeddings", "false"},
};

/// What Qwen2MoeConfig and Qwen3MoeConfig both assume.
constexpr HfDefault kQwenMoeDefaults[] = {
    {"norm_topk_prob", "false"},       {"decoder_sparse_step", "1"},      {"mlp_only_layers", ""},
    {"router_aux_loss_coef", "0.001"}, {"output_router_logits", "false"}, {"rope_theta", "10000"},
    {"rms_norm_eps", "1e-6"},          {"tie_word_embeddings", "false"},
};

/// What Qwen2MoeConfig assumes beside them.
constexpr HfDefault kQwen2MoeDefaults[] = {
    {"num_key_value_heads", "16"},
    {"num_experts", "60"},
    {"num_experts_per_tok", "4"},
    {"moe_intermediate_size", "1408"},
    {"shared_expert_intermediate_size", "5632"},
};

/// What Qwen3MoeConfig (transformers 4.51) assumes beside them. Its
/// attention reads head_dim with getattr, so without the key the heads are
/// hidden_size / num_attention_heads wide.
constexpr HfDefault kQwen3MoeDefaults[] = {
    {"head_dim", "0"},
    {"num_experts", "128"},
    {"num_experts_per_tok", "8"},
    {"moe_intermediate_size", "768"},
    {"attention_bias", "false"},
};

/// What Qwen3Config (transformers 4.51) assumes.
constexpr HfDefault kQwen3Defaults[] = {
    {"head_dim", "128"},         {"rope_theta", "10000"},
    {"rms_norm_eps", "1e-6"},    {"tie_word_embeddings", "false"},
    {"attention_bias", "false"},
};

/// The family's config class's defaults for what `object` leaves out.
/// Qwen3's null num_key_value_heads means multi-head attention (set by
/// applyConfigJson), so only an absent one takes the default.
void applyFamilyDefaults(ModelConfig &config, const json::Object &object) {
  if (config.family == "mixtral")
    applyDefaults(config, object, kMixtralDefaults, /*nullIsAbsent=*/true);
  if (config.qwen2Moe()) {
    applyDefaults(config, object, kQwen2MoeDefaults, true);
    applyDefaults(config, object, kQwenMoeDefaults, true);
  }
  if (config.qwen3()) {
    applyDefaults(config, object, {{"num_key_value_heads", "32"}}, false);
    applyDefaults(config, object, kQwen3Defaults, true);
  }
  if (config.qwen3Moe()) {
    applyDefaults(config, object, {{"num_key_value_heads", "4"}}, false);
    applyDefaults(config, object, kQwen3MoeDefaults, true);
    applyDefaults(config, object, kQwenMoeDefaults, true);
  }
  if (config.gemma2())
    applyDefaults(config, object, kGemma2Defaults, false);
  else if (config.gemma3())
    applyDefaults(config, object, kGemma3Defaults, false);
}

/// config.json's value as the text a ConfigField parses: a number or a boolean,
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
    const ConfigField *field = findConfigField(key);
    if (!field || value.getAsNull())
      continue; // HF configs carry many keys we do not model (architectures, ...);
                // null asks for the default (GPT-2's n_inner: 4 · n_embd)
    std::string text = fieldText(value, field->list);
    if (text.empty())
      return configError("config '" + path + "': key '" + key.str() + "' must be " +
                         (field->list ? "a list of integers" : "a number or boolean"));
    if (!field->set(config, text))
      return configError("config '" + path + "': bad value for '" + key.str() + "'");
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
  applyFamilyDefaults(config, *object);
  std::optional<int64_t> headDim = object->getInteger("head_dim");
  if (headDim && config.llamaLike() && !config.freeHeadDim() &&
      *headDim != config.nEmbd / config.nHead)
    return configError("config '" + path + "': head_dim = " + Twine(*headDim) +
                       " is not supported: llmc's " + config.family +
                       " heads are hidden_size / num_attention_heads = " +
                       Twine(config.nEmbd / config.nHead) + " wide");
  return Error::success();
}

} // namespace llmc
