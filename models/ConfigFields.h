//===- ConfigFields.h - the keys a model config sets ------------*- C++ -*-===//
//
// The table of settable keys (llmc's names, Hugging Face's as aliases) that
// `key=value` overrides and config.json files share, and the error the
// model-config files return. Private to models/.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_MODELS_CONFIGFIELDS_H
#define LLMC_MODELS_CONFIGFIELDS_H

#include "models/ModelConfig.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <vector>

namespace llmc {

/// A settable key: our name, HF aliases, and how to parse its value.
struct ConfigField {
  const char *name;
  std::vector<const char *> aliases;
  const char *help;
  std::function<bool(ModelConfig &, llvm::StringRef)> set;
  bool list = false; ///< config.json gives it as an array of integers
};

const std::vector<ConfigField> &configFields();

/// The field named `key` or one of its aliases; null when there is none.
const ConfigField *findConfigField(llvm::StringRef key);

/// Gemma 3 keeps Gemma 2's key but not its use: transformers 4.51's
/// Gemma3Attention never passes attn_logit_softcapping to the attention, so
/// a value would build one model here and another there.
inline constexpr const char *kGemma3NoAttnSoftcap =
    "transformers' Gemma3Attention never applies it (Gemma 3's checkpoints leave it null)";

inline llvm::Error configError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

} // namespace llmc

#endif // LLMC_MODELS_CONFIGFIELDS_H
