//===- ModelPresets.cpp - each family's named sizes -------------------===//

#include "models/ConfigFields.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace llvm;

namespace llmc {
namespace {

/// The sizes every preset sets. The graph's T is also its position limit.
struct Shape {
  int64_t vocab, layers, heads, kvHeads, width, ffn, seqLen, batch;
};

void setShape(ModelConfig &c, const Shape &s) {
  c.vocabSize = s.vocab;
  c.nLayer = s.layers;
  c.nHead = s.heads;
  c.nKvHead = s.kvHeads;
  c.nEmbd = s.width;
  c.ffnHidden = s.ffn;
  c.seqLen = s.seqLen;
  c.maxPositions = s.seqLen;
  c.batchSize = s.batch;
}

/// llmc's tiny models: a byte vocabulary, four layers of four query heads
/// over two kv heads (so tp=2 splits them), 128 wide, T = 128, B = 8.
Shape tinyShape(int64_t ffn) { return {256, 4, 4, 2, 128, ffn, 128, 8}; }

/// Qwen2/2.5: Llama with q/k/v biases, RoPE base 10⁶, RMSNorm ε 10⁻⁶.
void qwen2Preset(ModelConfig &c, StringRef preset) {
  c.ropeTheta = 1e6;
  c.normEps = 1e-6;
  c.tieEmbeddings = true;
  if (preset == "tiny")
    setShape(c, tinyShape(352));
  else // "0.5B": Qwen2.5-0.5B
    setShape(c, {151936, 24, 14, 2, 896, 4864, 2048, 1});
}

/// Qwen3: Qwen2's block without q/k/v biases, heads head_dim wide (not
/// hidden / heads), an RMSNorm of each head's q and k before RoPE; RoPE base
/// 10⁶, RMSNorm ε 10⁻⁶.
void qwen3Preset(ModelConfig &c, StringRef preset) {
  c.ropeTheta = 1e6;
  c.normEps = 1e-6;
  c.tieEmbeddings = true;
  if (preset == "tiny") {
    setShape(c, tinyShape(352));
    c.headDimension = 48; // not n_embd / n_head, as Qwen3-0.6B's heads
  } else { // "0.6B": Qwen/Qwen3-0.6B
    setShape(c, {151936, 28, 16, 8, 1024, 3072, 4096, 1});
    c.headDimension = 128;
  }
}

/// Mistral: Llama with sliding-window attention (v0.1's 4096 keys).
void mistralPreset(ModelConfig &c, StringRef preset) {
  c.tieEmbeddings = false;
  if (preset == "tiny") {
    setShape(c, tinyShape(352));
    c.slidingWindow = 64; // half the sequence: the window shapes every batch
  } else { // "7B": Mistral-7B-v0.1
    setShape(c, {32000, 32, 32, 8, 4096, 14336, 4096, 1});
    c.slidingWindow = 4096;
  }
}

/// Mixtral: Mistral's block with a mixture of top-2 SwiGLU experts as its
/// MLP; RoPE base 10⁶, no window (v0.1's sliding_window is null).
void mixtralPreset(ModelConfig &c, StringRef preset) {
  c.ropeTheta = 1e6;
  c.tieEmbeddings = false;
  c.expertsPerToken = 2;
  c.routerAuxLossCoef = 0.02;
  if (preset == "tiny") {
    setShape(c, tinyShape(176));
    c.numExperts = 4;
    c.outputRouterLogits = true; // train with the load-balancing loss
  } else { // "8x7B": Mixtral-8x7B-v0.1 (its config.json leaves output_router_logits off)
    setShape(c, {32000, 32, 32, 8, 4096, 14336, 4096, 1});
    c.numExperts = 8;
  }
}

/// Gemma 2: GeGLU MLP, (1 + w) RMSNorms before and after each sublayer,
/// scaled embeddings, soft-capped attention scores and logits, a sliding
/// window on every other layer; RoPE base 10⁴, RMSNorm ε 10⁻⁶, tied head.
void gemma2Preset(ModelConfig &c, StringRef preset) {
  c.normEps = 1e-6;
  c.ropeTheta = 10000.0;
  c.tieEmbeddings = true;
  c.attnSoftcap = 50.0;
  c.finalSoftcap = 30.0;
  if (preset == "tiny") {
    setShape(c, tinyShape(352));
    c.headDimension = 48; // not n_embd / n_head, as Gemma's heads
    c.queryPreAttnScalar = 48;
    c.slidingWindow = 64; // half the sequence, on layers 0 and 2
  } else { // "2B": google/gemma-2-2b
    setShape(c, {256000, 26, 8, 4, 2304, 9216, 8192, 1});
    c.headDimension = 256;
    c.queryPreAttnScalar = 256;
    c.slidingWindow = 4096;
  }
}

/// Gemma 3's text model: Gemma 2's block with per-head q/k RMSNorms and
/// five local (windowed, RoPE base 10⁴) layers per global one (RoPE base
/// 10⁶); no soft-caps, tied head, RMSNorm ε 10⁻⁶.
void gemma3Preset(ModelConfig &c, StringRef preset) {
  c.normEps = 1e-6;
  c.ropeTheta = 1e6;
  c.ropeLocalTheta = 10000.0;
  c.tieEmbeddings = true;
  if (preset == "tiny") {
    setShape(c, tinyShape(352));
    c.headDimension = 48; // not n_embd / n_head, as Gemma's heads
    c.queryPreAttnScalar = 48;
    c.slidingWindow = 64;       // half the sequence,
    c.slidingWindowPattern = 2; // on layers 0 and 2
  } else { // "1B": google/gemma-3-1b-pt
    setShape(c, {262144, 26, 4, 1, 1152, 6912, 32768, 1});
    c.headDimension = 256;
    c.queryPreAttnScalar = 256;
    c.slidingWindow = 512;
    c.slidingWindowPattern = 6;
  }
}

/// Qwen-MoE (Qwen1.5-MoE, Qwen2-MoE): Qwen2's attention (q/k/v biases)
/// and RMSNorm with a mixture of top-k SwiGLU experts plus a gated shared
/// expert as the MLP; transformers' Qwen2MoeConfig leaves norm_topk_prob off.
void qwen2MoePreset(ModelConfig &c, StringRef preset) {
  c.normEps = 1e-6;
  c.ropeTheta = 1e6;
  c.tieEmbeddings = false;
  c.normTopkProb = false;
  c.routerAuxLossCoef = 0.001;
  if (preset == "tiny") {
    setShape(c, tinyShape(352));
    c.numExperts = 8;
    c.expertsPerToken = 2;
    c.moeFfnHidden = 64;
    c.sharedExpertFfnHidden = 128;
    c.mlpOnlyLayers = {0}; // one dense layer beside the sparse ones
    c.outputRouterLogits = true; // train with the load-balancing loss
  } else { // "A2.7B": Qwen1.5-MoE-A2.7B (its config.json leaves output_router_logits off)
    setShape(c, {151936, 24, 16, 16, 2048, 5632, 4096, 1});
    c.numExperts = 60;
    c.expertsPerToken = 4;
    c.moeFfnHidden = 1408;
    c.sharedExpertFfnHidden = 5632;
  }
}

/// Qwen3-MoE: Qwen3's attention (q/k norms, heads head_dim wide, no
/// biases) with top-k SwiGLU experts in every layer and no shared expert;
/// the chosen experts' weights renormalised, as the released models set
/// norm_topk_prob (Qwen3MoeConfig's default leaves it off).
void qwen3MoePreset(ModelConfig &c, StringRef preset) {
  c.ropeTheta = 1e6;
  c.normEps = 1e-6;
  c.tieEmbeddings = false;
  c.normTopkProb = true;
  c.routerAuxLossCoef = 0.001;
  if (preset == "tiny") {
    setShape(c, tinyShape(352));
    c.headDimension = 48; // not n_embd / n_head, as the released models' heads
    c.numExperts = 8;
    c.expertsPerToken = 2;
    c.moeFfnHidden = 64;
    c.outputRouterLogits = true; // train with the load-balancing loss
  } else { // "30B-A3B": Qwen/Qwen3-30B-A3B (its config.json leaves output_router_logits off)
    setShape(c, {151936, 48, 32, 4, 2048, 6144, 4096, 1});
    c.headDimension = 128;
    c.numExperts = 128;
    c.expertsPerToken = 8;
    c.moeFfnHidden = 768;
  }
}

/// GPT-2's four sizes as OpenAI released them (every head its own keys and
/// values, the MLP 4 · n_embd wide, 1024 positions); "tiny" is llmc's.
void gpt2Preset(ModelConfig &c, StringRef preset) {
  struct Size {
    const char *name;
    int64_t layers, heads, width;
  };
  const Size sizes[] = {{"124M", 12, 12, 768},
                        {"350M", 24, 16, 1024},
                        {"774M", 36, 20, 1280},
                        {"1.5B", 48, 25, 1600}};
  c.tieEmbeddings = true;
  if (preset == "tiny")
    setShape(c, {256, 4, 4, 4, 128, 4 * 128, 128, 8});
  for (const Size &s : sizes)
    if (preset == s.name)
      setShape(c, {50257, s.layers, s.heads, s.heads, s.width, 4 * s.width, 1024, 4});
}

void llamaPreset(ModelConfig &c, StringRef preset) {
  if (preset == "tiny") {
    setShape(c, tinyShape(352));
    c.tieEmbeddings = false;
  } else { // "1B": Llama 3.2 1B
    setShape(c, {128256, 16, 32, 8, 2048, 8192, 2048, 1});
    c.ropeTheta = 500000.0;
    c.tieEmbeddings = true;
    c.ropeScaling = "llama3";
    c.ropeFactor = 32.0;
  }
}

/// A family the builders know: its model_type, its presets (the first is
/// always "tiny") and what each sets.
struct Family {
  const char *name;
  std::vector<std::string> presets;
  void (*apply)(ModelConfig &, StringRef preset);
};

const std::vector<Family> &families() {
  static const std::vector<Family> table = {
      {"gpt2", {"tiny", "124M", "350M", "774M", "1.5B"}, gpt2Preset},
      {"llama", {"tiny", "1B"}, llamaPreset},
      {"qwen2", {"tiny", "0.5B"}, qwen2Preset},
      {"qwen3", {"tiny", "0.6B"}, qwen3Preset},
      {"mistral", {"tiny", "7B"}, mistralPreset},
      {"gemma2", {"tiny", "2B"}, gemma2Preset},
      {"gemma3_text", {"tiny", "1B"}, gemma3Preset},
      {"mixtral", {"tiny", "8x7B"}, mixtralPreset},
      {"qwen2_moe", {"tiny", "A2.7B"}, qwen2MoePreset},
      {"qwen3_moe", {"tiny", "30B-A3B"}, qwen3MoePreset},
  };
  return table;
}

const Family *findFamily(StringRef name) {
  for (const Family &f : families())
    if (name == f.name)
      return &f;
  return nullptr;
}

} // namespace

std::vector<std::string> presetNames(const std::string &family) {
  const Family *f = findFamily(family);
  return f ? f->presets : std::vector<std::string>{};
}

Expected<ModelConfig> presetConfig(const std::string &family, const std::string &preset) {
  const Family *f = findFamily(family);
  if (!f && family == "gemma3")
    return configError(
        "model family 'gemma3' is Gemma3ForConditionalGeneration (a vision tower and "
        "the language model, its tensors under language_model.); llmc builds the text "
        "model alone: model_type gemma3_text (Gemma3ForCausalLM; docs/models.md)");
  if (!f) {
    std::string known;
    for (size_t i = 0; i < families().size(); ++i)
      known += std::string(i == 0                       ? ""
                           : i + 1 == families().size() ? " or "
                                                        : ", ") +
               families()[i].name;
    return configError("unknown model family '" + family + "' (expected " + known + ")");
  }
  if (!is_contained(f->presets, preset))
    return configError("unknown preset '" + preset + "' for " + family +
                       " (expected one of: " + join(f->presets, ", ") + ")");
  ModelConfig c;
  c.family = family;
  f->apply(c, preset);
  return c;
}

} // namespace llmc
