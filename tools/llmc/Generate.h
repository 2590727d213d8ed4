//===- Generate.h - `llmc generate`: text from an inference artifact -*- C++ -*-===//
//
//   llmc generate <model.llmc> [--weights <ckpt-dir|file.safetensors|hf-dir>]
//       (--prompt S | --prompts FILE | --prompt-tokens 1,2,3)...
//       [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
//
// The flags of runtime/generate/Generate.h; docs/inference.md.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TOOLS_LLMC_GENERATE_H
#define LLMC_TOOLS_LLMC_GENERATE_H

#include "llvm/Support/CommandLine.h"

namespace llmc {

/// The subcommand; its options are registered with it.
extern llvm::cl::SubCommand generateCommand;
/// The category of its options (for --help).
llvm::cl::OptionCategory &generateCategory();
/// Runs the subcommand; returns the exit status.
int runGenerate();

} // namespace llmc

#endif
