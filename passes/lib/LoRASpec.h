//===- LoRASpec.h - the --lora spec ---------------------------*- C++ -*-===//
//
// "rank=8, alpha=16, targets=qkv,proj,mlp": parsed once for the llmc-lora
// pass and for the artifact's metadata (the merge scale alpha / rank).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_LORASPEC_H
#define LLMC_PASSES_LIB_LORASPEC_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace llmc {

struct LoRASpec {
  int64_t rank = 8;
  double alpha = 16;
  llvm::SmallVector<std::string> targets{"qkv", "proj", "mlp"};
  bool targetsGiven = false; ///< false: the defaults, which need not all match

  /// What the adapter branch is multiplied by.
  double scale() const { return alpha / static_cast<double>(rank); }
};

/// Parses a spec; items without '=' extend the previous key's list.
/// std::nullopt with `error` set on a bad spec.
std::optional<LoRASpec> parseLoRASpec(llvm::StringRef text, std::string &error);

} // namespace llmc

#endif
