//===- ByteTokenizer.h - one token per byte ---------------------*- C++ -*-===//
//
// The tokenizer of the bundled corpus and the tiny presets: vocabulary 256,
// token = byte value. Lossless for any text.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_BYTETOKENIZER_H
#define LLMC_RUNTIME_DATA_BYTETOKENIZER_H

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct ByteTokenizer {
  static constexpr int64_t kVocabSize = 256;
  static std::vector<uint16_t> encode(const std::string &text);
  /// Tokens >= 256 are an error (they cannot come from this tokenizer).
  static std::string decode(const std::vector<uint16_t> &tokens);
};

} // namespace llmc

#endif
