//===- ByteTokenizer.cpp - one token per byte -----------------------------===//

#include "runtime/data/ByteTokenizer.h"
#include "runtime/support/Error.h"

namespace llmc {

std::vector<uint16_t> ByteTokenizer::encode(const std::string &text) {
  std::vector<uint16_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i)
    tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string ByteTokenizer::decode(const std::vector<uint16_t> &tokens) {
  std::string text(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= kVocabSize)
      fail("byte tokenizer: token ", tokens[i], " at position ", i, " is not a byte");
    text[i] = static_cast<char>(tokens[i]);
  }
  return text;
}

} // namespace llmc
