//===- Generate.cpp - `llmc generate`: text from an inference artifact ----===//

#include "tools/llmc/Generate.h"

#include "runtime/generate/Generate.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>

using namespace llvm;

namespace llmc {

cl::SubCommand generateCommand("generate",
                               "Generate text with an artifact compiled with --inference "
                               "(prefill, then decode over a paged KV cache; docs/inference.md)");

cl::OptionCategory &generateCategory() {
  static cl::OptionCategory category("llmc generate options");
  return category;
}

namespace {

#define GEN_OPT cl::sub(generateCommand), cl::cat(generateCategory())
cl::opt<std::string> artifact(cl::Positional, cl::desc("<model.llmc>"), cl::Required, GEN_OPT);
cl::opt<std::string> weights("weights",
                             cl::desc("Checkpoint directory, weights .safetensors or Hugging Face "
                                      "model directory (default: random initialisation)"),
                             GEN_OPT);
cl::opt<bool> copyWeights("copy-weights",
                          cl::desc("Copy every parameter into the arena (default on the CPU: "
                                   "parameters the file holds as the model does are read in "
                                   "place from the mapped file, which must not change meanwhile)"),
                          GEN_OPT);
cl::list<std::string> prompts("prompt", cl::desc("A prompt (repeatable)"), GEN_OPT);
cl::opt<std::string> promptsFile("prompts", cl::desc("A file of prompts, one per line"),
                                 GEN_OPT);
cl::list<std::string> promptTokens("prompt-tokens",
                                   cl::desc("A prompt as comma-separated token ids (repeatable)"),
                                   GEN_OPT);
cl::opt<int64_t> maxNewTokens("max-new-tokens", cl::desc("Tokens to generate per prompt"),
                              cl::init(64), GEN_OPT);
cl::opt<double> temperature("temperature", cl::desc("Sampling temperature (0: greedy)"),
                            cl::init(0.8), GEN_OPT);
cl::opt<int64_t> topK("top-k", cl::desc("Sample from the K most likely tokens (0: all)"),
                      cl::init(40), GEN_OPT);
cl::opt<double> topP("top-p", cl::desc("Nucleus sampling: the smallest set of tokens whose "
                                       "probability reaches P (1: off)"),
                     cl::init(1.0), GEN_OPT);
cl::opt<uint64_t> seed("seed", cl::desc("Sampling seed"), cl::init(1337), GEN_OPT);
cl::opt<int64_t> stopToken("stop-token",
                           cl::desc("Token id that ends a sequence (default -1: the tokenizer's "
                                    "end of text, if any; -2: none)"),
                           cl::init(-1), GEN_OPT);
cl::opt<std::string> tokenizer("tokenizer",
                               cl::desc("Hugging Face model directory whose tokenizer reads the "
                                        "prompts (default: the --weights directory's, else bytes "
                                        "for a 256-token vocabulary)"),
                               GEN_OPT);
cl::opt<std::string> dumpLogits("dump-logits",
                                cl::desc("Write each prompt's generated tokens and the logits "
                                         "they were sampled from to this safetensors file"),
                                GEN_OPT);
cl::opt<bool> quiet("quiet", cl::desc("Print only the generated text"), GEN_OPT);

int usage(const Twine &message) {
  WithColor::error(errs(), "llmc generate") << message << "\n";
  return 1;
}

} // namespace

int runGenerate() {
  GenerateOptions o;
  o.artifact = artifact;
  o.weights = weights;
  o.copyWeights = copyWeights;
  o.prompts.assign(prompts.begin(), prompts.end());
  if (!promptsFile.empty()) {
    std::ifstream in(promptsFile);
    if (!in)
      return usage("--prompts: cannot open '" + promptsFile + "'");
    for (std::string line; std::getline(in, line);)
      if (!line.empty())
        o.prompts.push_back(line);
  }
  for (const std::string &list : promptTokens) {
    std::vector<int32_t> ids;
    for (StringRef item : split(list, ',')) {
      int32_t id;
      if (item.trim().getAsInteger(10, id) || id < 0)
        return usage("--prompt-tokens: '" + item + "' is not a token id (in '" + list + "')");
      ids.push_back(id);
    }
    o.promptTokens.push_back(std::move(ids));
  }
  if (maxNewTokens < 1)
    return usage("--max-new-tokens must be >= 1");
  o.maxNewTokens = maxNewTokens;
  o.sampling.temperature = temperature;
  o.sampling.topK = topK;
  o.sampling.topP = topP;
  o.sampling.seed = seed;
  if (stopToken < -2)
    return usage("--stop-token must be a token id, -1 or -2");
  o.stopToken = stopToken;
  o.tokenizer = tokenizer;
  o.dumpLogits = dumpLogits;
  o.quiet = quiet;
  return runGeneration(o);
}

} // namespace llmc
