//===- GenerateCommand.cpp - the generate command line --------------------===//

#include "runtime/generate/GenerateCommand.h"

#include "runtime/CudaFlags.h"
#include "runtime/generate/Generate.h"
#include "runtime/support/ArgParser.h"

#include <fstream>
#include <iostream>

namespace llmc {
namespace {

const char *kUsageHead = R"( <model.llmc> [options]

Generates text with an artifact compiled with `llmc compile --inference`:
prefill, then decode over a paged KV cache, prompts admitted as rows and
cache blocks free up (docs/inference.md).

weights and prompts
  --weights W        checkpoint directory, weights .safetensors or Hugging Face
                     model directory (default: random initialisation)
  --copy-weights     copy every parameter into the arena (default on the CPU:
                     parameters the file holds as the model does are read in
                     place from the mapped file, which must not change meanwhile)
  --prompt S         a prompt (repeatable)
  --prompts FILE     a file of prompts, one per line
  --prompt-tokens L  a prompt as comma-separated token ids (repeatable)
  --tokenizer DIR    Hugging Face model directory whose tokenizer reads the
                     prompts (default: the --weights directory's, else bytes
                     for a 256-token vocabulary)
sampling
  --max-new-tokens N tokens to generate per prompt (default 64)
  --temperature T    sampling temperature (0: greedy; default 0.8)
  --top-k K          sample from the K most likely tokens (0: all; default 40)
  --top-p P          nucleus sampling: the smallest set of tokens whose
                     probability reaches P (1: off, the default)
  --seed S           sampling seed (default 1337)
  --stop-token ID    token id that ends a sequence (default -1: the tokenizer's
                     end of text, if any; -2: none)
output
  --dump-logits F    write each prompt's generated tokens and the logits they
                     were sampled from to this safetensors file
  --quiet            print only the generated text
GPUs
)";

const char *kUsageTail = R"(several ranks (mpirun -np N, or N processes with RANK, WORLD_SIZE,
              MASTER_ADDR, MASTER_PORT set)
  --comm-timeout S   abort when a collective takes longer than S seconds (default 300)
  -h, --help         this text
)";

/// "1,2,3" as token ids; false (with `error` set) for anything else.
bool parseTokenIds(const std::string &list, std::vector<int32_t> &ids, std::string &error) {
  std::vector<int64_t> values;
  std::string bad;
  bool read = ArgParser::integerList(list, values, bad);
  for (size_t i = 0; read && i < values.size(); ++i)
    if (values[i] < 0 || values[i] > INT32_MAX) {
      bad = std::to_string(values[i]);
      read = false;
    }
  if (!read) {
    error = "--prompt-tokens: '" + bad + "' is not a token id (in '" + list + "')";
    return false;
  }
  ids.assign(values.begin(), values.end());
  return true;
}

} // namespace

int generateMain(const std::string &tool, int argc, char **argv) {
  auto usageError = [&](const std::string &message) {
    std::cerr << tool << ": error: " << message << "\n(see " << tool << " --help)\n";
    return 1;
  };
  GenerateOptions o;
  o.tool = tool;
  std::string promptsFile;
  std::vector<std::string> tokenLists;
  int64_t seed = 1337;
  ArgParser args;
  args.option("--weights", ArgParser::text(o.weights));
  args.flag("--copy-weights", o.copyWeights);
  args.option("--prompt", ArgParser::append(o.prompts));
  args.option("--prompts", ArgParser::text(promptsFile));
  args.option("--prompt-tokens", ArgParser::append(tokenLists));
  args.option("--tokenizer", ArgParser::text(o.tokenizer));
  args.option("--max-new-tokens", ArgParser::integer(o.maxNewTokens));
  args.option("--temperature", ArgParser::number(o.sampling.temperature));
  args.option("--top-k", ArgParser::integer(o.sampling.topK));
  args.option("--top-p", ArgParser::number(o.sampling.topP));
  args.option("--seed", ArgParser::integer(seed));
  args.option("--stop-token", ArgParser::integer(o.stopToken));
  args.option("--dump-logits", ArgParser::text(o.dumpLogits));
  args.flag("--quiet", o.quiet);
  args.option("--comm-timeout", ArgParser::number(o.commTimeout));
  addCudaFlags(args, o.cuda);
  o.sampling.temperature = 0.8;
  o.sampling.topK = 40;
  if (std::string error = args.parse(argc, argv, "artifact", o.artifact); !error.empty())
    return usageError(error);
  if (args.helpRequested()) {
    std::cout << "usage: " << tool << kUsageHead << kCudaFlagsHelp << kUsageTail;
    return 0;
  }
  if (o.artifact.empty())
    return usageError("no artifact given");
  if (!promptsFile.empty()) {
    std::ifstream in(promptsFile);
    if (!in)
      return usageError("--prompts: cannot open '" + promptsFile + "'");
    for (std::string line; std::getline(in, line);)
      if (!line.empty())
        o.prompts.push_back(line);
  }
  for (const std::string &list : tokenLists) {
    std::vector<int32_t> ids;
    std::string error;
    if (!parseTokenIds(list, ids, error))
      return usageError(error);
    o.promptTokens.push_back(std::move(ids));
  }
  if (o.maxNewTokens < 1)
    return usageError("--max-new-tokens must be >= 1");
  if (o.stopToken < -2)
    return usageError("--stop-token must be a token id, -1 or -2");
  if (seed < 0)
    return usageError("--seed must be >= 0");
  o.sampling.seed = static_cast<uint64_t>(seed);
  return runGeneration(o);
}

} // namespace llmc
