//===- Tokenizer.h - text to token ids and back -----------------*- C++ -*-===//
//
// One interface over llmc's byte tokenizer (vocabulary 256, the bundled
// corpus and the tiny presets) and a Hugging Face model's own tokenizer,
// loaded from its directory (BpeTokenizer.h): prompts and generated text go
// through whichever the model was trained with.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_TOKENIZER_H
#define LLMC_RUNTIME_DATA_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace llmc {

class Tokenizer {
public:
  virtual ~Tokenizer() = default;

  /// The ids of `text` alone, without the special tokens a sequence may
  /// start with (transformers' `add_special_tokens=False`); prepend bosId
  /// for a prompt. Any bytes are accepted, valid UTF-8 or not.
  virtual std::vector<int32_t> encode(const std::string &text) const = 0;
  /// The bytes of `ids` concatenated: UTF-8 when the ids spell whole
  /// characters; a sequence cut inside a character comes back as its bytes,
  /// never replaced. An id outside the vocabulary is an error naming it and
  /// its position.
  virtual std::string decode(const std::vector<int32_t> &ids) const = 0;
  /// Ids run from 0 to vocabSize() - 1 (added tokens included).
  virtual int64_t vocabSize() const = 0;

  /// The token each sequence starts with (Llama's `<s>`, which transformers
  /// adds with `add_special_tokens=True`); none when the tokenizer adds
  /// none (GPT-2).
  std::optional<int32_t> bosId;
  /// The end-of-text token (`<|endoftext|>`, `</s>`), when there is one.
  std::optional<int32_t> eosId;
};

/// The byte tokenizer (ByteTokenizer.h) behind the interface.
std::unique_ptr<Tokenizer> makeByteTokenizer();

/// The tokenizer of a Hugging Face model directory: `tokenizer.json`, or
/// GPT-2's `vocab.json` + `merges.txt` (BpeTokenizer.h says what is
/// supported). Throws RuntimeError naming the file and what is wrong.
std::unique_ptr<Tokenizer> loadTokenizer(const std::string &hfDir);
/// The same, for callers without exceptions: null with the message in `error`.
std::unique_ptr<Tokenizer> loadTokenizer(const std::string &hfDir, std::string &error);

} // namespace llmc

#endif
