//===- Normalize.h - Unicode normalization form C ---------------*- C++ -*-===//
//
// The NFC normalizer of Hugging Face tokenizers (Qwen2's tokenizer.json
// starts with one): canonical decomposition, canonical ordering of
// combining marks, then canonical composition (Unicode Standard Annex #15),
// over Unicode 14.0's data (scripts/gen-normalization-tables.py) and the
// Hangul syllables' arithmetic.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_SUPPORT_NORMALIZE_H
#define LLMC_RUNTIME_SUPPORT_NORMALIZE_H

#include <string>

namespace llmc::unicode {

/// `text` (UTF-8) in normalization form C. Bytes that are not well-formed
/// UTF-8 pass through unchanged, each ending the run of characters around
/// it, so text that is not UTF-8 still tokenizes byte by byte.
std::string toNfc(const std::string &text);

} // namespace llmc::unicode

#endif
