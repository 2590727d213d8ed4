//===- Tokenizer.cpp - text to token ids and back -------------------------===//

#include "runtime/data/Tokenizer.h"
#include "runtime/data/BpeTokenizer.h"
#include "runtime/data/ByteTokenizer.h"
#include "runtime/support/Error.h"

namespace llmc {

namespace {

class ByteTokenizerAdapter : public Tokenizer {
public:
  std::vector<int32_t> encode(const std::string &text) const override {
    std::vector<uint16_t> bytes = ByteTokenizer::encode(text);
    return std::vector<int32_t>(bytes.begin(), bytes.end());
  }
  std::string decode(const std::vector<int32_t> &ids) const override {
    std::string text(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= ByteTokenizer::kVocabSize)
        fail("byte tokenizer: token ", ids[i], " at position ", i, " is not a byte");
      text[i] = static_cast<char>(ids[i]);
    }
    return text;
  }
  int64_t vocabSize() const override { return ByteTokenizer::kVocabSize; }
};

} // namespace

std::unique_ptr<Tokenizer> makeByteTokenizer() { return std::make_unique<ByteTokenizerAdapter>(); }

std::unique_ptr<Tokenizer> loadTokenizer(const std::string &hfDir) {
  return BpeTokenizer::load(hfDir);
}

std::unique_ptr<Tokenizer> loadTokenizer(const std::string &hfDir, std::string &error) {
  std::unique_ptr<Tokenizer> tok;
  if (!catchErrors(error, [&] { tok = loadTokenizer(hfDir); }))
    return nullptr;
  return tok;
}

} // namespace llmc
