//===- ModelsTest.cpp - model builders: presets, counts, configs ----------===//

#include "compiler/Compiler.h"
#include "models/Models.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;

namespace {

int64_t countFor(const std::string &family, const std::string &preset) {
  MLIRContext context;
  llmc::prepareContext(context);
  llvm::Expected<llmc::ModelConfig> config = llmc::presetConfig(family, preset);
  EXPECT_TRUE(static_cast<bool>(config));
  if (!config) {
    llvm::consumeError(config.takeError());
    return -1;
  }
  // Parameter counts do not depend on the batch shape; keep the graph small.
  config->batchSize = 1;
  config->seqLen = 8;
  OwningOpRef<ModuleOp> module = llmc::buildModel(&context, *config);
  EXPECT_TRUE(succeeded(verify(*module)));
  return llmc::countParameters(*module).total;
}

// Published counts: GPT-2 as in the Hugging Face checkpoints (tied head,
// vocabulary 50257 unpadded); Llama 3.2 1B (tied embeddings).
TEST(Models, GPT2ParameterCountsMatchPublished) {
  EXPECT_EQ(countFor("gpt2", "124M"), 124439808);
  EXPECT_EQ(countFor("gpt2", "350M"), 354823168);
  EXPECT_EQ(countFor("gpt2", "774M"), 774030080);
  EXPECT_EQ(countFor("gpt2", "1.5B"), 1557611200);
}

TEST(Models, LlamaParameterCountMatchesPublished) {
  EXPECT_EQ(countFor("llama", "1B"), 1235814400);
}

// Qwen2.5-0.5B (tied embeddings, q/k/v biases) and Mistral-7B-v0.1 as
// their model cards count them.
TEST(Models, QwenAndMistralParameterCountsMatchPublished) {
  EXPECT_EQ(countFor("qwen2", "0.5B"), 494032768);
  EXPECT_EQ(countFor("mistral", "7B"), 7241732096);
}

TEST(Models, EveryPresetVerifies) {
  for (const char *family : {"gpt2", "llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3_text",
                             "mixtral", "qwen2_moe", "qwen3_moe"})
    for (const std::string &preset : llmc::presetNames(family)) {
      SCOPED_TRACE(std::string(family) + " " + preset);
      EXPECT_GT(countFor(family, preset), 0);
    }
}

TEST(Models, OverridesAndValidation) {
  llmc::ModelConfig config = cantFail(llmc::presetConfig("llama", "tiny"));
  EXPECT_FALSE(static_cast<bool>(llmc::applyOverride(config, "n_kv_head=1")));
  EXPECT_EQ(config.nKvHead, 1);
  EXPECT_FALSE(static_cast<bool>(llmc::applyOverride(config, "num_hidden_layers=3")));
  EXPECT_EQ(config.nLayer, 3);
  EXPECT_FALSE(static_cast<bool>(config.validate()));

  llvm::Error unknown = llmc::applyOverride(config, "bogus=1");
  ASSERT_TRUE(static_cast<bool>(unknown));
  EXPECT_NE(llvm::toString(std::move(unknown)).find("unknown config key 'bogus'"),
            std::string::npos);
  llvm::Error bad = llmc::applyOverride(config, "n_head=four");
  ASSERT_TRUE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(std::move(bad)).find("bad value 'four'"), std::string::npos);

  config.nKvHead = 3;
  llvm::Error invalid = config.validate();
  ASSERT_TRUE(static_cast<bool>(invalid));
  EXPECT_NE(llvm::toString(std::move(invalid)).find("divisible by n_kv_head"), std::string::npos);

  llvm::Expected<llmc::ModelConfig> missing = llmc::presetConfig("gpt2", "7B");
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("unknown preset '7B'"), std::string::npos);
}

TEST(Models, HuggingFaceConfigJson) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("llmc-config", "json", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 8,
              "num_key_value_heads": 2, "intermediate_size": 160,
              "vocab_size": 300, "rms_norm_eps": 1e-6, "rope_theta": 500000.0,
              "tie_word_embeddings": true, "max_position_embeddings": 32})";
  }
  llmc::ModelConfig config = cantFail(llmc::presetConfig("llama", "tiny"));
  EXPECT_FALSE(static_cast<bool>(llmc::applyConfigJson(config, path)));
  EXPECT_EQ(config.nEmbd, 64);
  EXPECT_EQ(config.nKvHead, 2);
  EXPECT_EQ(config.vocabSize, 300);
  EXPECT_TRUE(config.tieEmbeddings);
  EXPECT_DOUBLE_EQ(config.ropeTheta, 500000.0);
  EXPECT_EQ(config.seqLen, 32);
  EXPECT_EQ(config.ropeScaling, "none");
  EXPECT_FALSE(static_cast<bool>(config.validate()));
  llvm::sys::fs::remove(path);
}

/// Writes `text` to a new temporary config.json at `path`; false when no
/// file can be created.
bool writeTemporaryConfig(const std::string &text, llvm::SmallString<128> &path) {
  if (llvm::sys::fs::createTemporaryFile("llmc-config", "json", path))
    return false;
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  os << text;
  return true;
}

/// Writes `text` to a temporary config.json and applies it to a tiny model
/// of `family`; the error message, or "" when it applies and validates.
std::string applyJson(const std::string &text, llmc::ModelConfig &config,
                      const std::string &family = "llama") {
  llvm::SmallString<128> path;
  if (!writeTemporaryConfig(text, path))
    return "cannot create a temporary file";
  config = cantFail(llmc::presetConfig(family, "tiny"));
  llvm::Error e = llmc::applyConfigJson(config, path);
  llvm::sys::fs::remove(path);
  if (!e)
    e = config.validate();
  return e ? llvm::toString(std::move(e)) : "";
}

/// The message applyJson gives `text` for `family`, without the file name
/// it starts with.
std::string configError(const std::string &text, const std::string &family = "llama") {
  llmc::ModelConfig config;
  std::string message = applyJson(text, config, family);
  size_t colon = message.find("': ");
  return colon == std::string::npos ? message : message.substr(colon + 3);
}

TEST(Models, HuggingFaceRopeScaling) {
  llmc::ModelConfig config;
  // Llama 3.1's, under either spelling of the type.
  for (const char *type : {"rope_type", "type"}) {
    SCOPED_TRACE(type);
    EXPECT_EQ(applyJson(std::string(R"({"rope_scaling": {")") + type +
                            R"(": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192}})",
                        config),
              "");
    EXPECT_EQ(config.ropeScaling, "llama3");
    EXPECT_DOUBLE_EQ(config.ropeFactor, 8.0);
    EXPECT_DOUBLE_EQ(config.ropeLowFreqFactor, 1.0);
    EXPECT_DOUBLE_EQ(config.ropeHighFreqFactor, 4.0);
    EXPECT_EQ(config.ropeOriginalMaxPositions, 8192);
    llmc::RopeScaling s = config.ropeScalingParameters();
    EXPECT_TRUE(s.scaled());
    EXPECT_EQ(s.originalMaxPositions, 8192);
  }
  EXPECT_EQ(applyJson(R"({"rope_scaling": null})", config), "");
  EXPECT_FALSE(config.ropeScalingParameters().scaled());
  EXPECT_EQ(applyJson(R"({"rope_scaling": {"rope_type": "default"}})", config), "");
  EXPECT_EQ(config.ropeScaling, "none");

  EXPECT_EQ(configError(R"({"rope_scaling": {"type": "linear", "factor": 2.0}})"),
            "rope_scaling type 'linear' is not supported (llmc implements llama3)");
  EXPECT_EQ(configError(R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}})"),
            "rope_scaling type 'yarn' is not supported (llmc implements llama3)");
  EXPECT_EQ(configError(R"({"rope_scaling": {"factor": 2.0}})"), "rope_scaling has no rope_type");
  EXPECT_EQ(configError(R"({"rope_scaling": 2})"), "rope_scaling must be an object or null");
  EXPECT_EQ(configError(R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                      "low_freq_factor": 1.0, "high_freq_factor": 4.0}})"),
            "rope_scaling (llama3) has no 'original_max_position_embeddings'");
  EXPECT_EQ(configError(R"({"rope_scaling": {"rope_type": "llama3", "factor": "8",
                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192}})"),
            "rope_scaling.factor must be a number");
  EXPECT_EQ(configError(R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                      "low_freq_factor": 4.0, "high_freq_factor": 1.0,
                      "original_max_position_embeddings": 8192}})"),
            "rope_low_freq_factor (4.000000) and rope_high_freq_factor (1.000000) must satisfy "
            "0 < low < high");

  // As overrides: the defaults are Llama 3.1's.
  config = cantFail(llmc::presetConfig("llama", "tiny"));
  EXPECT_FALSE(static_cast<bool>(llmc::applyOverride(config, "rope_scaling=llama3")));
  EXPECT_FALSE(static_cast<bool>(llmc::applyOverride(config, "rope_original_max_positions=64")));
  EXPECT_FALSE(static_cast<bool>(config.validate()));
  llmc::RopeScaling s = config.ropeScalingParameters();
  EXPECT_EQ(s.factor, 8.0);
  EXPECT_EQ(s.lowFreqFactor, 1.0);
  EXPECT_EQ(s.highFreqFactor, 4.0);
  EXPECT_EQ(s.originalMaxPositions, 64);
  EXPECT_FALSE(static_cast<bool>(llmc::applyOverride(config, "rope_scaling=yarn")));
  EXPECT_EQ(llvm::toString(config.validate()), "rope_scaling must be none or llama3, got 'yarn'");
  llmc::ModelConfig gpt2 = cantFail(llmc::presetConfig("gpt2", "tiny"));
  gpt2.ropeScaling = "llama3";
  EXPECT_EQ(llvm::toString(gpt2.validate()),
            "rope_scaling applies to llama's RoPE; gpt2 has no RoPE");
  // The Llama 3.2 1B preset carries its scaling.
  llmc::ModelConfig big = cantFail(llmc::presetConfig("llama", "1B"));
  EXPECT_EQ(big.ropeScaling, "llama3");
  EXPECT_EQ(big.ropeFactor, 32.0);
}

/// config.json's model_type as configFamily reads it: the family, or the
/// error after the file name.
std::string familyOf(const std::string &text) {
  llvm::SmallString<128> path;
  if (!writeTemporaryConfig(text, path))
    return "cannot create a temporary file";
  llvm::Expected<std::string> family = llmc::configFamily(path);
  llvm::sys::fs::remove(path);
  if (family)
    return *family;
  std::string message = llvm::toString(family.takeError());
  size_t quote = message.find(".json'");
  return quote == std::string::npos ? message : message.substr(quote + 6);
}

TEST(Models, ConfigJsonNamesTheFamily) {
  EXPECT_EQ(familyOf(R"({"model_type": "qwen2"})"), "qwen2");
  EXPECT_EQ(familyOf(R"({"model_type": "mistral"})"), "mistral");
  EXPECT_EQ(familyOf(R"({"model_type": "llama"})"), "llama");
  EXPECT_EQ(familyOf(R"({"hidden_size": 64})"), " has no model_type; give the family with --model");
  EXPECT_EQ(familyOf(R"({"model_type": "gemma2"})"), "gemma2");
  EXPECT_EQ(familyOf(R"({"model_type": "gemma3_text"})"), "gemma3_text");
  EXPECT_EQ(familyOf(R"({"model_type": "gemma3"})"),
            ": model family 'gemma3' is Gemma3ForConditionalGeneration (a vision tower and the "
            "language model, its tensors under language_model.); llmc builds the text model "
            "alone: model_type gemma3_text (Gemma3ForCausalLM; docs/models.md)");
  EXPECT_EQ(familyOf(R"({"model_type": "bert"})"),
            ": unknown model family 'bert' (expected gpt2, llama, qwen2, qwen3, mistral, gemma2, "
            "gemma3_text, mixtral, qwen2_moe or qwen3_moe)");
  EXPECT_EQ(familyOf(R"({"model_type": "qwen3"})"), "qwen3");
  EXPECT_EQ(familyOf(R"({"model_type": "qwen2_moe"})"), "qwen2_moe");
  EXPECT_EQ(familyOf(R"({"model_type": "qwen3_moe"})"), "qwen3_moe");
}

TEST(Models, QwenAndMistralConfigJson) {
  llmc::ModelConfig config;
  // Qwen2.5's files carry a window they leave off.
  EXPECT_EQ(applyJson(R"({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
                          "num_key_value_heads": 2, "use_sliding_window": false,
                          "sliding_window": 4096, "max_window_layers": 21,
                          "hidden_act": "silu", "rope_theta": 1000000.0})",
                      config, "qwen2"),
            "");
  EXPECT_EQ(config.slidingWindow, 0);
  EXPECT_TRUE(config.qkvBias());
  EXPECT_DOUBLE_EQ(config.ropeTheta, 1e6);
  EXPECT_EQ(configError(R"({"model_type": "qwen2", "use_sliding_window": true})", "qwen2"),
            "use_sliding_window = true is not supported: Qwen2's per-layer sliding window "
            "(max_window_layers) is not implemented");
  EXPECT_EQ(configError(R"({"model_type": "qwen2", "hidden_act": "gelu"})", "qwen2"),
            "hidden_act = \"gelu\" is not supported: llmc's qwen2 MLP is SwiGLU (silu)");
  EXPECT_EQ(configError(R"({"model_type": "mistral"})", "qwen2"),
            "model_type is 'mistral', but the model family is 'qwen2'");
  EXPECT_EQ(configError(R"({"model_type": "llama", "attention_bias": true})", "llama"),
            "attention_bias = true is not supported: llmc's llama has no output projection "
            "biases");
  EXPECT_EQ(configError(R"({"model_type": "mistral", "head_dim": 64})", "mistral"),
            "head_dim = 64 is not supported: llmc's mistral heads are hidden_size / "
            "num_attention_heads = 32 wide");

  // Mistral v0.1's window; v0.2 and later have none (null).
  EXPECT_EQ(applyJson(R"({"model_type": "mistral", "sliding_window": 4096})", config, "mistral"),
            "");
  EXPECT_EQ(config.slidingWindow, 4096);
  EXPECT_FALSE(config.qkvBias());
  EXPECT_EQ(applyJson(R"({"model_type": "mistral", "sliding_window": null})", config, "mistral"),
            "");
  EXPECT_EQ(config.slidingWindow, 0);
  EXPECT_EQ(configError(R"({"sliding_window": -2})", "mistral"),
            "sliding_window must be >= 0 (0: none), got -2");
  config = cantFail(llmc::presetConfig("llama", "tiny"));
  config.slidingWindow = 16;
  EXPECT_EQ(llvm::toString(config.validate()),
            "sliding_window applies to mistral's, gemma2's and gemma3_text's attention; llama has "
            "none");
}

// Qwen/Qwen3-0.6B (tied embeddings): 151936·1024 + 28 layers of
// 15,730,944 (q 2048×1024, k and v 1024×1024, o 1024×2048, q_norm and
// k_norm 128 each, two norms of 1024, the MLP 3·1024·3072) + the final
// norm's 1024.
TEST(Models, Qwen3ParameterCountMatchesPublished) {
  EXPECT_EQ(countFor("qwen3", "0.6B"), 596049920);
}

TEST(Models, Qwen3ConfigJson) {
  llmc::ModelConfig config;
  // Qwen/Qwen3-0.6B's keys.
  EXPECT_EQ(applyJson(R"({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
                          "attention_bias": false, "attention_dropout": 0.0, "head_dim": 128,
                          "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3072,
                          "max_position_embeddings": 40960, "max_window_layers": 28,
                          "num_attention_heads": 16, "num_hidden_layers": 28,
                          "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null,
                          "rope_theta": 1000000, "sliding_window": null,
                          "tie_word_embeddings": true, "use_sliding_window": false,
                          "vocab_size": 151936})",
                      config, "qwen3"),
            "");
  EXPECT_EQ(config.headDim(), 128);
  EXPECT_EQ(config.nKvHead, 8);
  EXPECT_EQ(config.slidingWindow, 0);
  EXPECT_FALSE(config.qkvBias());
  EXPECT_FALSE(config.outputBias());
  EXPECT_TRUE(config.tieEmbeddings);
  EXPECT_DOUBLE_EQ(config.attentionScale(), 1.0 / std::sqrt(128.0));
  EXPECT_FALSE(static_cast<bool>(config.validate()));
  // Absent keys are Qwen3Config's defaults; a window is read only with
  // use_sliding_window; attention_bias gives q, k, v and o biases.
  EXPECT_EQ(applyJson(R"({"model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 4,
                          "num_key_value_heads": 2, "sliding_window": 4096,
                          "attention_bias": true})",
                      config, "qwen3"),
            "");
  EXPECT_EQ(config.headDim(), 128);
  EXPECT_EQ(config.slidingWindow, 0);
  EXPECT_DOUBLE_EQ(config.ropeTheta, 10000.0);
  EXPECT_FALSE(config.tieEmbeddings);
  EXPECT_TRUE(config.qkvBias());
  EXPECT_TRUE(config.outputBias());
  EXPECT_EQ(applyJson(R"({"model_type": "qwen3", "hidden_size": 64,
                          "num_attention_heads": 32})",
                      config, "qwen3"),
            "");
  EXPECT_EQ(config.nKvHead, 32);
  EXPECT_EQ(configError(R"({"model_type": "qwen3", "use_sliding_window": true})", "qwen3"),
            "use_sliding_window = true is not supported: Qwen3's per-layer sliding window "
            "(max_window_layers) is not implemented");
  EXPECT_EQ(configError(R"({"model_type": "qwen3", "attention_dropout": 0.5})", "qwen3"),
            "attention_dropout = 0.5 is not supported: llmc's attention has no dropout");
  EXPECT_EQ(configError(R"({"model_type": "qwen3", "hidden_act": "gelu"})", "qwen3"),
            "hidden_act = \"gelu\" is not supported: llmc's qwen3 MLP is SwiGLU (silu)");
  EXPECT_EQ(configError(R"({"model_type": "qwen3", "rope_scaling": {"rope_type": "yarn",
                                                                     "factor": 4.0}})",
                        "qwen3"),
            "rope_scaling type 'yarn' is not supported (llmc implements llama3)");
  EXPECT_EQ(configError(R"({"model_type": "qwen3", "mlp_bias": true})", "qwen3"),
            "mlp_bias = true is not supported: llmc's qwen3 has no MLP biases");
  config = cantFail(llmc::presetConfig("qwen2", "tiny"));
  config.attentionBias = true;
  EXPECT_EQ(llvm::toString(config.validate()),
            "attention_bias applies to qwen3 and qwen3_moe; qwen2 has biases on q, k and v only");
  config = cantFail(llmc::presetConfig("qwen3", "tiny"));
  EXPECT_EQ(config.headDim(), 48);
  EXPECT_FALSE(static_cast<bool>(config.validate()));
}

// google/gemma-2-2b as its model card counts it (tied head).
TEST(Models, Gemma2ParameterCountMatchesPublished) {
  EXPECT_EQ(countFor("gemma2", "2B"), 2614341888);
}

TEST(Models, Gemma2ConfigJson) {
  llmc::ModelConfig config;
  // google/gemma-2-2b's keys.
  EXPECT_EQ(applyJson(R"({"model_type": "gemma2", "hidden_size": 2304, "num_attention_heads": 8,
                          "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216,
                          "num_hidden_layers": 26, "vocab_size": 256000,
                          "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0,
                          "final_logit_softcapping": 30.0, "sliding_window": 4096,
                          "hidden_act": "gelu_pytorch_tanh",
                          "hidden_activation": "gelu_pytorch_tanh", "cache_implementation": "hybrid",
                          "rms_norm_eps": 1e-06, "rope_theta": 10000.0})",
                      config, "gemma2"),
            "");
  EXPECT_EQ(config.headDim(), 256);
  EXPECT_DOUBLE_EQ(config.attentionScale(), 1.0 / 16);
  EXPECT_DOUBLE_EQ(config.attnSoftcap, 50.0);
  EXPECT_DOUBLE_EQ(config.finalSoftcap, 30.0);
  EXPECT_EQ(config.windowOfLayer(0), 4096);
  EXPECT_EQ(config.windowOfLayer(1), 0);
  EXPECT_TRUE(config.tieEmbeddings);
  // null caps are none; absent keys are Gemma2Config's defaults.
  EXPECT_EQ(applyJson(R"({"model_type": "gemma2", "hidden_size": 64, "num_attention_heads": 4,
                          "num_key_value_heads": 2, "attn_logit_softcapping": null,
                          "final_logit_softcapping": null})",
                      config, "gemma2"),
            "");
  EXPECT_EQ(config.attnSoftcap, 0.0);
  EXPECT_EQ(config.finalSoftcap, 0.0);
  EXPECT_EQ(config.headDim(), 256);
  EXPECT_DOUBLE_EQ(config.queryPreAttnScalar, 224);
  EXPECT_EQ(config.slidingWindow, 4096);
  EXPECT_EQ(configError(R"({"model_type": "gemma2", "hidden_activation": "gelu"})", "gemma2"),
            "hidden_activation = \"gelu\" is not supported: llmc's gemma2 MLP is GeGLU with the "
            "tanh GELU (gelu_pytorch_tanh)");
  EXPECT_EQ(configError(R"({"model_type": "gemma2", "attention_bias": true})", "gemma2"),
            "attention_bias = true is not supported: llmc's gemma2 has no attention biases");
  EXPECT_EQ(configError(R"({"model_type": "llama", "final_logit_softcapping": 30.0})", "llama"),
            "final_logit_softcapping = 30 is not supported: only gemma2 and gemma3_text have it");
  config = cantFail(llmc::presetConfig("llama", "tiny"));
  config.attnSoftcap = 50;
  EXPECT_EQ(llvm::toString(config.validate()),
            "attn_softcap applies to gemma2 and gemma3_text; llama has none");
  config = cantFail(llmc::presetConfig("llama", "tiny"));
  config.headDimension = 64;
  EXPECT_EQ(llvm::toString(config.validate()),
            "head_dim = 64 is not supported: llmc's llama heads are n_embd / n_head wide");
}

// google/gemma-3-1b-pt from its shapes (tied head): 262144·1152 embedding,
// 26 layers of 26,842,112 (q/k/v/o, two 256-wide q/k norms, four norms,
// the MLP), the final norm.
TEST(Models, Gemma3ParameterCountMatchesPublished) {
  EXPECT_EQ(countFor("gemma3_text", "1B"), 999885952);
}

TEST(Models, Gemma3LayersAlternateAsTransformersChoosesThem) {
  llmc::ModelConfig c = cantFail(llmc::presetConfig("gemma3_text", "1B"));
  // Gemma3Attention: is_sliding = bool((layer_idx + 1) % sliding_window_pattern).
  for (int64_t l = 0; l < c.nLayer; ++l) {
    SCOPED_TRACE(l);
    const bool global = (l + 1) % 6 == 0;
    EXPECT_EQ(c.localLayer(l), !global);
    EXPECT_EQ(c.windowOfLayer(l), global ? 0 : 512);
    EXPECT_DOUBLE_EQ(c.ropeThetaOfLayer(l), global ? 1e6 : 1e4);
  }
  EXPECT_DOUBLE_EQ(c.attentionScale(), 1.0 / 16);
  EXPECT_EQ(c.attnSoftcap, 0.0);
  EXPECT_EQ(c.finalSoftcap, 0.0);
  // Linear scaling stretches the global layers' rates only, every one of them.
  c.ropeScaling = "linear";
  c.ropeFactor = 8.0;
  EXPECT_FALSE(static_cast<bool>(c.validate()));
  EXPECT_FALSE(c.ropeScalingOfLayer(0).scaled());
  llmc::RopeScaling s = c.ropeScalingOfLayer(5);
  for (int64_t i = 0; i < 128; ++i)
    EXPECT_DOUBLE_EQ(llmc::ropeInverseFrequency(1e6, i, 256, s),
                     llmc::ropeInverseFrequency(1e6, i, 256) / 8.0);
}

TEST(Models, Gemma3ConfigJson) {
  llmc::ModelConfig config;
  // google/gemma-3-1b-pt's keys.
  EXPECT_EQ(applyJson(R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
                          "attention_bias": false, "attention_dropout": 0.0,
                          "attn_logit_softcapping": null, "cache_implementation": "hybrid",
                          "final_logit_softcapping": null, "head_dim": 256,
                          "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
                          "intermediate_size": 6912, "max_position_embeddings": 32768,
                          "num_attention_heads": 4, "num_hidden_layers": 26,
                          "num_key_value_heads": 1, "query_pre_attn_scalar": 256,
                          "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
                          "rope_scaling": null, "rope_theta": 1000000, "sliding_window": 512,
                          "sliding_window_pattern": 6, "vocab_size": 262144})",
                      config, "gemma3_text"),
            "");
  EXPECT_EQ(config.headDim(), 256);
  EXPECT_EQ(config.nKvHead, 1);
  EXPECT_EQ(config.slidingWindow, 512);
  EXPECT_EQ(config.slidingWindowPattern, 6);
  EXPECT_DOUBLE_EQ(config.ropeLocalTheta, 1e4);
  EXPECT_DOUBLE_EQ(config.ropeTheta, 1e6);
  EXPECT_EQ(config.ropeScaling, "none");
  EXPECT_TRUE(config.tieEmbeddings);
  // Absent keys are Gemma3TextConfig's defaults; the 4B's linear scaling.
  EXPECT_EQ(applyJson(R"({"model_type": "gemma3_text", "hidden_size": 64,
                          "num_attention_heads": 4,
                          "rope_scaling": {"factor": 8.0, "rope_type": "linear"}})",
                      config, "gemma3_text"),
            "");
  EXPECT_EQ(config.nKvHead, 4);
  EXPECT_EQ(config.headDim(), 256);
  EXPECT_DOUBLE_EQ(config.queryPreAttnScalar, 256);
  EXPECT_EQ(config.slidingWindow, 4096);
  EXPECT_EQ(config.slidingWindowPattern, 6);
  EXPECT_DOUBLE_EQ(config.ropeLocalTheta, 1e4);
  EXPECT_DOUBLE_EQ(config.ropeTheta, 1e6);
  EXPECT_EQ(config.attnSoftcap, 0.0);
  EXPECT_EQ(config.finalSoftcap, 0.0);
  EXPECT_EQ(config.ropeScaling, "linear");
  EXPECT_DOUBLE_EQ(config.ropeFactor, 8.0);
  // A logit cap is honoured as Gemma3ForCausalLM applies it.
  EXPECT_EQ(applyJson(R"({"model_type": "gemma3_text", "final_logit_softcapping": 30.0})", config,
                      "gemma3_text"),
            "");
  EXPECT_DOUBLE_EQ(config.finalSoftcap, 30.0);

  // What llmc does not build is refused by name.
  EXPECT_EQ(configError(R"({"model_type": "gemma3_text",
                            "rope_scaling": {"rope_type": "yarn", "factor": 8.0}})",
                        "gemma3_text"),
            "rope_scaling type 'yarn' is not supported for gemma3_text (llmc implements linear)");
  EXPECT_EQ(configError(R"({"model_type": "gemma3_text",
                            "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})",
                        "gemma3_text"),
            "rope_scaling type 'dynamic' is not supported for gemma3_text (llmc implements "
            "linear)");
  EXPECT_EQ(configError(R"({"model_type": "gemma3_text", "rope_scaling": {"rope_type": "linear"}})",
                        "gemma3_text"),
            "rope_scaling (linear) has no 'factor'");
  EXPECT_EQ(configError(R"({"model_type": "gemma3_text", "attn_logit_softcapping": 50.0})",
                        "gemma3_text"),
            "attn_logit_softcapping = 50 is not supported: transformers' Gemma3Attention never "
            "applies it (Gemma 3's checkpoints leave it null)");
  EXPECT_EQ(
      configError(R"({"model_type": "gemma3_text", "hidden_activation": "gelu"})", "gemma3_text"),
      "hidden_activation = \"gelu\" is not supported: llmc's gemma3_text MLP is GeGLU with "
      "the tanh GELU (gelu_pytorch_tanh)");
  EXPECT_EQ(
      configError(R"({"model_type": "gemma3_text", "sliding_window_pattern": 0})", "gemma3_text"),
      "sliding_window_pattern must be >= 1, got 0");
  EXPECT_EQ(
      configError(R"({"model_type": "gemma3_text", "attention_dropout": 0.1})", "gemma3_text"),
      "attention_dropout = 0.10000000000000001 is not supported: llmc's attention has no "
      "dropout");
  EXPECT_EQ(configError(R"({"model_type": "gemma3", "text_config": {}})", "gemma3_text"),
            "model_type is 'gemma3', but the model family is 'gemma3_text'");
  EXPECT_EQ(configError(R"({"model_type": "llama", "sliding_window_pattern": 6})", "llama"),
            "sliding_window_pattern = 6 is not supported: only gemma3_text has it");
  EXPECT_EQ(configError(R"({"model_type": "llama",
                            "rope_scaling": {"rope_type": "linear", "factor": 2.0}})",
                        "llama"),
            "rope_scaling type 'linear' is not supported (llmc implements llama3)");
  config = cantFail(llmc::presetConfig("gemma3_text", "tiny"));
  config.attnSoftcap = 50;
  EXPECT_EQ(llvm::toString(config.validate()),
            "attn_softcap is not supported for gemma3_text: transformers' Gemma3Attention never "
            "applies it (Gemma 3's checkpoints leave it null)");
  config = cantFail(llmc::presetConfig("gemma3_text", "tiny"));
  config.ropeScaling = "llama3";
  EXPECT_EQ(llvm::toString(config.validate()),
            "rope_scaling must be none or linear for gemma3_text, got 'llama3'");
  config = cantFail(llmc::presetConfig("llama", "tiny"));
  config.ropeLocalTheta = 1e4;
  EXPECT_EQ(llvm::toString(config.validate()),
            "sliding_window_pattern and rope_local_base_freq apply to gemma3_text; llama has "
            "neither");
}

// Mixtral-8x7B-v0.1 as its model card counts it (46.7B; every expert's
// three matrices, the routers, untied head).
TEST(Models, MixtralParameterCountMatchesPublished) {
  EXPECT_EQ(countFor("mixtral", "8x7B"), 46702792704);
}

TEST(Models, MixtralConfigJson) {
  llmc::ModelConfig config;
  // mistralai/Mixtral-8x7B-v0.1's keys.
  EXPECT_EQ(applyJson(R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
                          "num_attention_heads": 32, "num_key_value_heads": 8,
                          "num_hidden_layers": 32, "num_local_experts": 8,
                          "num_experts_per_tok": 2, "output_router_logits": false,
                          "router_aux_loss_coef": 0.02, "rms_norm_eps": 1e-05,
                          "rope_theta": 1000000.0, "sliding_window": null,
                          "tie_word_embeddings": false, "vocab_size": 32000,
                          "hidden_act": "silu", "router_jitter_noise": 0.0})",
                      config, "mixtral"),
            "");
  EXPECT_EQ(config.numExperts, 8);
  EXPECT_EQ(config.expertsPerToken, 2);
  EXPECT_DOUBLE_EQ(config.routerAuxLossCoef, 0.02);
  EXPECT_FALSE(config.outputRouterLogits);
  EXPECT_EQ(config.slidingWindow, 0);
  // Absent keys are MixtralConfig's defaults.
  EXPECT_EQ(applyJson(R"({"model_type": "mixtral", "hidden_size": 256, "num_attention_heads": 32})",
                      config, "mixtral"),
            "");
  EXPECT_EQ(config.numExperts, 8);
  EXPECT_EQ(config.nKvHead, 8);
  EXPECT_DOUBLE_EQ(config.routerAuxLossCoef, 0.001);
  EXPECT_DOUBLE_EQ(config.ropeTheta, 1e6);
  EXPECT_EQ(configError(R"({"model_type": "mixtral", "router_jitter_noise": 0.5})", "mixtral"),
            "router_jitter_noise = 0.5 is not supported: llmc's router adds no noise to the "
            "router logits");
  EXPECT_EQ(configError(R"({"model_type": "mixtral", "sliding_window": 4096})", "mixtral"),
            "sliding_window = 4096 is not supported: only mistral's, gemma2's and gemma3_text's "
            "attention have "
            "a window");
  config = cantFail(llmc::presetConfig("mixtral", "tiny"));
  config.expertsPerToken = 5;
  EXPECT_EQ(llvm::toString(config.validate()),
            "experts_per_token must be in [1, num_experts = 4], got 5");
  config = cantFail(llmc::presetConfig("llama", "tiny"));
  config.numExperts = 4;
  EXPECT_EQ(llvm::toString(config.validate()),
            "num_experts applies to mixtral, qwen2_moe and qwen3_moe; llama has a dense MLP");
}

// Qwen1.5-MoE-A2.7B from its config (14.3B on its model card): 24 layers
// of Qwen2 attention with q/k/v biases (16,783,360), two norms (4,096) and
// a sparse MLP (553,773,056: router 60 x 2048, 60 experts of three
// 1408 x 2048 matrices, the shared expert's three 5632 x 2048 and its gate
// 1 x 2048), the embedding and the untied head (2 x 151936 x 2048), the
// final norm: 14,315,784,192.
TEST(Models, Qwen2MoeParameterCountMatchesPublished) {
  EXPECT_EQ(countFor("qwen2_moe", "A2.7B"), 14315784192);
}

TEST(Models, Qwen2MoeSparseLayersAsTransformersChoosesThem) {
  llmc::ModelConfig config = cantFail(llmc::presetConfig("qwen2_moe", "tiny"));
  config.nLayer = 6;
  config.mlpOnlyLayers = {0, 4};
  config.decoderSparseStep = 2; // layers 1, 3, 5; 5 alone of them not listed
  EXPECT_FALSE(config.sparseLayer(0));
  EXPECT_TRUE(config.sparseLayer(1));
  EXPECT_FALSE(config.sparseLayer(2));
  EXPECT_TRUE(config.sparseLayer(3));
  EXPECT_FALSE(config.sparseLayer(4));
  EXPECT_TRUE(config.sparseLayer(5));
  EXPECT_EQ(config.sparseLayerCount(), 3);
  EXPECT_EQ(llvm::toString(config.validate()), "");
  // Every layer dense, and a layer past the last: valid, as transformers
  // reads them.
  config.mlpOnlyLayers = {1, 3, 5};
  EXPECT_EQ(config.sparseLayerCount(), 0);
  EXPECT_EQ(llvm::toString(config.validate()), "");
  config.mlpOnlyLayers = {6};
  EXPECT_EQ(config.sparseLayerCount(), 3);
  EXPECT_EQ(llvm::toString(config.validate()), "");
  config.mlpOnlyLayers = {-1};
  EXPECT_EQ(llvm::toString(config.validate()), "mlp_only_layers: layer -1 is negative");
  config = cantFail(llmc::presetConfig("qwen2_moe", "tiny"));
  config.moeFfnHidden = 0;
  EXPECT_EQ(llvm::toString(config.validate()),
            "qwen2_moe needs moe_ffn_hidden >= 1 and shared_expert_ffn_hidden >= 1, got 0 and 128");
  config = cantFail(llmc::presetConfig("mixtral", "tiny"));
  config.mlpOnlyLayers = {0};
  EXPECT_EQ(llvm::toString(config.validate()),
            "moe_ffn_hidden, shared_expert_ffn_hidden, decoder_sparse_step and mlp_only_layers "
            "apply to qwen2_moe and qwen3_moe (the shared expert to qwen2_moe only); mixtral has "
            "none");
  config = cantFail(llmc::presetConfig("mixtral", "tiny"));
  config.normTopkProb = false;
  EXPECT_EQ(llvm::toString(config.validate()),
            "norm_topk_prob = false is not supported for mixtral: its router always renormalises "
            "the chosen experts' weights");
  EXPECT_EQ(llvm::toString(llmc::applyOverride(config, "mlp_only_layers=0, 2")), "");
  EXPECT_EQ(config.mlpOnlyLayers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(llvm::toString(llmc::applyOverride(config, "mlp_only_layers=")), "");
  EXPECT_TRUE(config.mlpOnlyLayers.empty());
  EXPECT_EQ(llvm::toString(llmc::applyOverride(config, "mlp_only_layers=0,x")),
            "bad value '0,x' for config key 'mlp_only_layers'");
}

/// DeepSeek-V3's router keys on a mixture of experts' config.json: the
/// sigmoid scoring and its scale are read; group-limited routing and a
/// bias update speed are refused by name; absent keys are a softmax router.
TEST(Models, SigmoidRouterConfigJson) {
  llmc::ModelConfig config;
  EXPECT_EQ(
      applyJson(R"({"model_type": "qwen2_moe", "num_key_value_heads": 2, "num_hidden_layers": 2,
                          "scoring_func": "sigmoid", "routed_scaling_factor": 2.5,
                          "norm_topk_prob": true, "n_group": 1, "topk_group": 1})",
                config, "qwen2_moe"),
      "");
  EXPECT_TRUE(config.sigmoidRouter());
  EXPECT_DOUBLE_EQ(config.routedScalingFactor, 2.5);
  EXPECT_EQ(
      applyJson(R"({"model_type": "mixtral", "num_key_value_heads": 2, "num_hidden_layers": 2})",
                config, "mixtral"),
      "");
  EXPECT_FALSE(config.sigmoidRouter());
  EXPECT_DOUBLE_EQ(config.routedScalingFactor, 1.0);
  EXPECT_EQ(
      configError(
          R"({"model_type": "mixtral", "num_key_value_heads": 2, "scoring_func": "sigmoid", "n_group": 8,
                            "topk_group": 4})",
          "mixtral"),
      "n_group = 8, topk_group = 4 is not supported: group-limited routing is not "
      "implemented (each token chooses among all experts); only 1 and 1");
  EXPECT_EQ(
      configError(
          R"({"model_type": "mixtral", "num_key_value_heads": 2, "scoring_func": "softplus"})",
          "mixtral"),
      "scoring_func must be softmax or sigmoid, got 'softplus'");
  EXPECT_EQ(
      configError(
          R"({"model_type": "mixtral", "num_key_value_heads": 2, "routed_scaling_factor": 0})",
          "mixtral"),
      "routed_scaling_factor must be a finite number > 0, got 0");
}

TEST(Models, Qwen2MoeConfigJson) {
  llmc::ModelConfig config;
  // Qwen/Qwen1.5-MoE-A2.7B's keys.
  EXPECT_EQ(applyJson(R"({"model_type": "qwen2_moe", "hidden_size": 2048,
                          "intermediate_size": 5632, "num_attention_heads": 16,
                          "num_key_value_heads": 16, "num_hidden_layers": 24,
                          "decoder_sparse_step": 1, "moe_intermediate_size": 1408,
                          "shared_expert_intermediate_size": 5632, "num_experts": 60,
                          "num_experts_per_tok": 4, "norm_topk_prob": false,
                          "output_router_logits": false, "router_aux_loss_coef": 0.001,
                          "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
                          "use_sliding_window": false, "sliding_window": 32768,
                          "max_window_layers": 21, "tie_word_embeddings": false,
                          "vocab_size": 151936, "hidden_act": "silu"})",
                      config, "qwen2_moe"),
            "");
  EXPECT_EQ(config.numExperts, 60);
  EXPECT_EQ(config.expertsPerToken, 4);
  EXPECT_EQ(config.moeFfnHidden, 1408);
  EXPECT_EQ(config.sharedExpertFfnHidden, 5632);
  EXPECT_EQ(config.ffnHidden, 5632);
  EXPECT_FALSE(config.normTopkProb);
  EXPECT_EQ(config.slidingWindow, 0);
  EXPECT_TRUE(config.qkvBias());
  EXPECT_TRUE(config.mlpOnlyLayers.empty());
  EXPECT_EQ(config.sparseLayerCount(), 24);
  EXPECT_EQ(applyJson(R"({"model_type": "qwen2_moe", "num_hidden_layers": 4,
                          "num_key_value_heads": 2, "mlp_only_layers": [0, 2],
                          "decoder_sparse_step": 1,
                          "norm_topk_prob": true})",
                      config, "qwen2_moe"),
            "");
  EXPECT_EQ(config.mlpOnlyLayers, (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(config.normTopkProb);
  EXPECT_EQ(config.sparseLayerCount(), 2);
  // Absent keys are Qwen2MoeConfig's defaults.
  EXPECT_EQ(applyJson(R"({"model_type": "qwen2_moe", "hidden_size": 256,
                          "num_attention_heads": 32})",
                      config, "qwen2_moe"),
            "");
  EXPECT_EQ(config.numExperts, 60);
  EXPECT_EQ(config.expertsPerToken, 4);
  EXPECT_EQ(config.moeFfnHidden, 1408);
  EXPECT_EQ(config.sharedExpertFfnHidden, 5632);
  EXPECT_EQ(config.nKvHead, 16);
  EXPECT_FALSE(config.normTopkProb);
  EXPECT_DOUBLE_EQ(config.ropeTheta, 10000.0);
  EXPECT_DOUBLE_EQ(config.routerAuxLossCoef, 0.001);
  EXPECT_EQ(configError(R"({"model_type": "qwen2_moe", "use_sliding_window": true})", "qwen2_moe"),
            "use_sliding_window = true is not supported: Qwen2's per-layer sliding window "
            "(max_window_layers) is not implemented");
  EXPECT_EQ(configError(R"({"model_type": "qwen2_moe", "hidden_act": "gelu"})", "qwen2_moe"),
            "hidden_act = \"gelu\" is not supported: llmc's qwen2_moe MLP is SwiGLU (silu)");
  EXPECT_EQ(configError(R"({"model_type": "qwen2_moe", "mlp_only_layers": ["0"]})", "qwen2_moe"),
            "key 'mlp_only_layers' must be a list of integers");
  EXPECT_EQ(configError(R"({"model_type": "qwen2_moe", "mlp_only_layers": 0})", "qwen2_moe"),
            "key 'mlp_only_layers' must be a list of integers");
  EXPECT_EQ(
      configError(R"({"model_type": "qwen2_moe", "moe_intermediate_size": [1]})", "qwen2_moe"),
      "key 'moe_intermediate_size' must be a number or boolean");
}

// Qwen3-30B-A3B from its config (30.5B on its model card): 48 layers of
// Qwen3 attention (q 4096 x 2048, k and v 512 x 2048, o 2048 x 4096, q/k
// norms 2 x 128: 18,874,624), two norms (4,096) and a sparse MLP
// (604,241,920: router 128 x 2048, 128 experts of three 768 x 2048
// matrices), the embedding and the untied head (2 x 151936 x 2048), the
// final norm: 30,532,122,624.
TEST(Models, Qwen3MoeParameterCountMatchesPublished) {
  EXPECT_EQ(countFor("qwen3_moe", "30B-A3B"), 30532122624);
}

TEST(Models, Qwen3MoeConfigJson) {
  llmc::ModelConfig config;
  // Qwen/Qwen3-30B-A3B's keys.
  EXPECT_EQ(applyJson(R"({"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
                          "attention_bias": false, "attention_dropout": 0.0,
                          "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu",
                          "hidden_size": 2048, "intermediate_size": 6144,
                          "max_position_embeddings": 40960, "max_window_layers": 48,
                          "mlp_only_layers": [], "moe_intermediate_size": 768,
                          "norm_topk_prob": true, "num_attention_heads": 32,
                          "num_experts": 128, "num_experts_per_tok": 8,
                          "num_hidden_layers": 48, "num_key_value_heads": 4,
                          "output_router_logits": false, "rms_norm_eps": 1e-06,
                          "rope_scaling": null, "rope_theta": 1000000.0,
                          "router_aux_loss_coef": 0.001, "sliding_window": null,
                          "tie_word_embeddings": false, "use_sliding_window": false,
                          "vocab_size": 151936})",
                      config, "qwen3_moe"),
            "");
  EXPECT_EQ(config.numExperts, 128);
  EXPECT_EQ(config.expertsPerToken, 8);
  EXPECT_EQ(config.moeFfnHidden, 768);
  EXPECT_EQ(config.expertFfnHidden(), 768);
  EXPECT_EQ(config.sharedExpertFfnHidden, 0);
  EXPECT_EQ(config.headDim(), 128);
  EXPECT_TRUE(config.normTopkProb);
  EXPECT_TRUE(config.qwen3Attention());
  EXPECT_FALSE(config.qkvBias());
  EXPECT_EQ(config.sparseLayerCount(), 48);
  EXPECT_EQ(llvm::toString(config.validate()), "");
  // Absent keys are Qwen3MoeConfig's defaults; without head_dim its
  // attention's heads are hidden_size / num_attention_heads wide.
  EXPECT_EQ(applyJson(R"({"model_type": "qwen3_moe", "hidden_size": 256,
                          "num_attention_heads": 8, "num_hidden_layers": 2})",
                      config, "qwen3_moe"),
            "");
  EXPECT_EQ(config.headDim(), 32);
  EXPECT_EQ(config.numExperts, 128);
  EXPECT_EQ(config.expertsPerToken, 8);
  EXPECT_EQ(config.moeFfnHidden, 768);
  EXPECT_EQ(config.nKvHead, 4);
  EXPECT_FALSE(config.normTopkProb);
  EXPECT_DOUBLE_EQ(config.ropeTheta, 10000.0);
  EXPECT_EQ(applyJson(R"({"model_type": "qwen3_moe", "num_key_value_heads": 2,
                          "attention_bias": true, "mlp_only_layers": [0]})",
                      config, "qwen3_moe"),
            "");
  EXPECT_TRUE(config.qkvBias());
  EXPECT_TRUE(config.outputBias());
  EXPECT_EQ(config.sparseLayerCount(), config.nLayer - 1);
  EXPECT_EQ(configError(R"({"model_type": "qwen3_moe", "use_sliding_window": true})", "qwen3_moe"),
            "use_sliding_window = true is not supported: Qwen3's per-layer sliding window "
            "(max_window_layers) is not implemented");
  EXPECT_EQ(configError(R"({"model_type": "qwen3_moe", "shared_expert_intermediate_size": 64})",
                        "qwen3_moe"),
            "shared_expert_ffn_hidden = 64 is not supported: qwen3_moe has no shared expert "
            "(Qwen3MoeSparseMoeBlock)");
  config = cantFail(llmc::presetConfig("qwen3_moe", "tiny"));
  config.moeFfnHidden = 0;
  EXPECT_EQ(llvm::toString(config.validate()), "qwen3_moe needs moe_ffn_hidden >= 1, got 0");
}

} // namespace
