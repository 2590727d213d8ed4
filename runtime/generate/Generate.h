//===- Generate.h - llmc generate: text from an inference artifact -*- C++ -*-===//
//
// Runs an artifact compiled with `llmc compile --inference`: loads weights,
// admits the prompts into the decode batch as rows and cache blocks free up
// (continuous batching, runtime/generate/RequestScheduler.h), feeds each step to
// @prefill or @decode, samples, streams the text, and reports prefill and
// decode throughput.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_GENERATE_GENERATE_H
#define LLMC_RUNTIME_GENERATE_GENERATE_H

#include "runtime/ExecutionDevice.h"
#include "runtime/generate/Sampler.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct GenerateOptions {
  std::string artifact;
  /// A checkpoint directory, an llmc weights file or a Hugging Face model
  /// directory; empty: the artifact's random initialisation.
  std::string weights;
  /// Copies every parameter into the arena. Otherwise, on the CPU, one the
  /// file holds as the arena would (dtype, whole tensor) is read in place
  /// from the mapping, and the file must stay unchanged while the run lasts.
  bool copyWeights = false;
  /// A Hugging Face model directory whose tokenizer reads the prompts;
  /// empty: the weights' directory when it has one, else bytes (vocabulary
  /// 256 models).
  std::string tokenizer;
  std::vector<std::string> prompts;                 ///< texts
  std::vector<std::vector<int32_t>> promptTokens;   ///< or token ids
  int64_t maxNewTokens = 64;
  SamplingOptions sampling;
  /// Finishes a sequence (kept as its last token); -1: the tokenizer's end
  /// of text when it has one; -2: none.
  int64_t stopToken = -1;
  /// Writes every request's generated tokens and the logits each was
  /// sampled from to this safetensors file (testing, comparisons).
  std::string dumpLogits;
  double commTimeout = 300;
  CudaOptions cuda;   ///< cuda artifacts: --tf32, --attention, ...
  bool quiet = false; ///< only the generated text
  /// How errors name the tool: "llmc generate" or "llmc-generate".
  std::string tool = "llmc generate";
};

/// Runs the generation; returns the process exit code. Errors are printed
/// as one line on stderr.
int runGeneration(const GenerateOptions &options);

} // namespace llmc

#endif
