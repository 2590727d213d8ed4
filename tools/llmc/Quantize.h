//===- Quantize.h - `llmc quantize`: post-training weight export -*- C++ -*-===//
//
//   llmc quantize <ckpt-dir | hf-dir | weights.safetensors>
//       (--model <family> --preset <name> [--set k=v]... | <graph.mlir>)
//       --scheme <scheme> [--skip ...] [--ops matmul,embedding] [--no-double-quant]
//       [--scale-dtype f32|f16]
//       [--method rtn|gptq --calibration <data> --batches N [--act-order]
//        [--damp 0.01] [--gptq-block-size 128]]
//       -o out.safetensors
//
// Reads the checkpoint's latest step (or a Hugging Face model directory,
// which names its own model, or an llmc weights file; runtime/quant/
// Export.h), quantizes the weights the model's
// @forward multiplies with (and embedding tables with --ops embedding) and
// writes every parameter to one safetensors file (runtime/quant/
// QuantizedFile.h) that `llmc-run --weights` loads. Round-to-nearest by
// default; --method gptq compiles the model in-process and runs its eval
// program on calibration batches for the layer inputs GPTQ needs
// (runtime/quant/GptqCalibration.h). The file is the same either way.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TOOLS_LLMC_QUANTIZE_H
#define LLMC_TOOLS_LLMC_QUANTIZE_H

#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <string>

namespace llmc {

/// The subcommand; its options are registered with it.
extern llvm::cl::SubCommand quantizeCommand;
/// The category of its options (for --help).
llvm::cl::OptionCategory &quantizeCategory();
/// Runs the subcommand; returns the exit status.
int runQuantize();

/// 1234567 → "1,234,567" (the tool's reports).
std::string withCommas(int64_t n);

} // namespace llmc

#endif
