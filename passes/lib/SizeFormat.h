//===- SizeFormat.h - sizes and memory categories in reports ----*- C++ -*-===//
//
// How memory reads in errors and reports: --memory-budget, llmc plan,
// the memory plan's summary.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_SIZEFORMAT_H
#define LLMC_PASSES_LIB_SIZEFORMAT_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace llmc {

/// 512 B, 3.5 KiB, 45.7 MiB, 1.2 GiB.
std::string formatSize(int64_t bytes);

/// How the memory plan's category names read in reports ("activation" →
/// "activations", "communication" → "communication buffers").
inline std::string memoryCategoryLabel(llvm::StringRef category) {
  if (category == "activation")
    return "activations";
  if (category == "grad")
    return "gradients";
  if (category == "input")
    return "inputs";
  if (category == "output")
    return "outputs";
  if (category == "communication")
    return "communication buffers";
  return category.str();
}

} // namespace llmc

#endif
