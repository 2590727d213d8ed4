//===- GenerateCommand.h - the generate command line -----------*- C++ -*-===//
//
//   llmc-generate <model.llmc> [--weights <ckpt-dir|file.safetensors|hf-dir>]
//       (--prompt S | --prompts FILE | --prompt-tokens 1,2,3)...
//       [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
//       [--tf32] [--attention I] [--device-comm C] [--no-gemm-timing]
//
// One reading of the flags for `llmc generate` (the compiler's driver) and
// llmc-generate (the runtime alone, no LLVM: what a machine without the
// compiler runs). docs/inference.md.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_GENERATE_GENERATECOMMAND_H
#define LLMC_RUNTIME_GENERATE_GENERATECOMMAND_H

#include <string>

namespace llmc {

/// Reads argv[1..argc) (argv[0] is the command's name) and generates;
/// returns the exit status. `tool` names the command in messages and help.
int generateMain(const std::string &tool, int argc, char **argv);

} // namespace llmc

#endif
