//===- BpeTokenizer.h - Hugging Face's BPE tokenizers -----------*- C++ -*-===//
//
// The BPE tokenizers of Hugging Face `tokenizers` (what transformers'
// `*TokenizerFast` run), read from a model directory and giving the
// library's ids for every part of its pipeline listed here:
//
//   added tokens    matched literally before anything else, leftmost-longest,
//                   with their single_word / lstrip / rstrip / normalized flags
//   normalizer      none, Prepend, Replace (string patterns), Sequence
//   pre-tokenizer   none, ByteLevel (GPT-2's regex or none, add_prefix_space),
//                   Split with GPT-2's or cl100k's regex (Isolated),
//                   Metaspace (replacement, prepend_scheme, split), Sequence
//   model           BPE: merges by rank (lowest first, leftmost among equals),
//                   unk_token / fuse_unk, byte_fallback (<0xNN> tokens),
//                   ignore_merges, continuing_subword_prefix, end_of_word_suffix
//   decoder         none, ByteLevel, Metaspace, Replace, ByteFallback, Fuse,
//                   Strip, Sequence
//   post-processor  none, ByteLevel, TemplateProcessing (its leading special
//                   token is bosId), RobertaProcessing / BertProcessing (cls
//                   is bosId), Sequence
//
// which covers GPT-2 and RoBERTa (ByteLevel), Llama 3 (Split with cl100k's
// regex, then ByteLevel), Llama 1/2 and Mistral (sentencepiece-style BPE
// with byte fallback). Anything else is refused when loading, naming the
// file and the component ("not supported: normalizer NFKC"), never
// tokenized differently. BPE dropout (training-time noise) is ignored.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_BPETOKENIZER_H
#define LLMC_RUNTIME_DATA_BPETOKENIZER_H

#include "runtime/data/Tokenizer.h"

#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace llmc {

namespace json {
class Value;
}

class BpeTokenizer : public Tokenizer {
public:
  /// Reads `tokenizer.json` if `dir` has one, else GPT-2's `vocab.json` and
  /// `merges.txt` with a ByteLevel pre-tokenizer and decoder (the added
  /// tokens and their flags from `tokenizer_config.json`'s
  /// `added_tokens_decoder`, or else `<|endoftext|>` when in the vocabulary).
  /// bosId/eosId: `tokenizer_config.json`'s bos/eos_token where the
  /// post-processor or the file names them, else `<|endoftext|>` or `</s>`.
  static std::unique_ptr<BpeTokenizer> load(const std::string &dir);
  /// A tokenizer.json's contents; `source` names it in errors.
  static std::unique_ptr<BpeTokenizer> fromTokenizerJson(const std::string &text,
                                                         const std::string &source);
  /// vocab.json's and merges.txt's contents (GPT-2: ByteLevel pre-tokenizer
  /// and decoder), no added tokens; the sources name them in errors.
  static std::unique_ptr<BpeTokenizer> fromVocabAndMerges(const std::string &vocabJson,
                                                          const std::string &vocabSource,
                                                          const std::string &merges,
                                                          const std::string &mergesSource);
  ~BpeTokenizer() override;

  std::vector<int32_t> encode(const std::string &text) const override;
  std::string decode(const std::vector<int32_t> &ids) const override;
  int64_t vocabSize() const override { return static_cast<int64_t>(tokens_.size()); }

  /// What BPE runs on: the pieces of `text` after the added tokens are split
  /// off (each a piece of its own), normalization and pre-tokenization,
  /// spelled in the vocabulary's alphabet (byte-level: 'Ġ' for a space).
  std::vector<std::string> words(const std::string &text) const;

  /// The id of a token (added or in the model's vocabulary), or -1.
  int32_t idOf(const std::string &token) const;
  /// The token of an id, as spelled in the vocabulary; empty for an id
  /// without one.
  const std::string &tokenOf(int32_t id) const;

  struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool special = false, singleWord = false, lstrip = false, rstrip = false, normalized = false;
  };
  /// Adds an added token (or, for content already added, replaces its
  /// flags). Its id is the library's: the vocabulary's when the token is
  /// there, else the next after all ids so far; `token.id` is ignored.
  void addToken(AddedToken token);

private:
  BpeTokenizer() = default;

  struct Step; // one normalizer, pre-tokenizer or decoder (BpeTokenizerStep.h)
  struct Piece {
    size_t begin, end;
    int32_t id; // an added token's, or -1 for text between them
  };

  void parseModel(const json::Value &model, const std::string &source);
  void setVocab(const json::Value &vocab, const std::string &where);
  void addMerge(const std::string &a, const std::string &b, const std::string &source);
  void finishModel(const std::string &source);
  // tokenizer.json's pipeline: each parses one entry (recursing into a
  // "Sequence") and appends its steps; `where` names the entry in errors,
  // `source` the file.
  void parseNormalizer(const json::Value &v, const std::string &where, const std::string &source);
  void parsePreTokenizer(const json::Value &v, const std::string &where, const std::string &source);
  void parseDecoder(const json::Value &v, const std::string &where, const std::string &source);
  void parseAddedTokens(const json::Value &list, const std::string &source);
  void parsePostProcessor(const json::Value &v, const std::string &where,
                          const std::string &source);
  static Step replaceStep(const json::Value &v, const std::string &where,
                          const std::string &source);
  static Step metaspaceStep(const json::Value &v, const std::string &where,
                            const std::string &source);
  static Step splitStep(const json::Value &v, const std::string &where, const std::string &source);
  static std::vector<int32_t> templateLeadingIds(const json::Value &v, const std::string &where);
  void
  forEachWord(const std::string &text,
              const std::function<void(const std::string &word, int32_t addedId)> &visit) const;
  std::vector<Piece> splitAddedTokens(const std::string &text, bool normalized) const;
  std::string normalize(std::string text) const;
  std::vector<std::string> preTokenize(const std::string &text, bool atStart) const;
  void encodeWord(const std::string &word, std::vector<int32_t> &ids) const;
  std::vector<int32_t> mergeWord(const std::string &word) const;

  // The model.
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_; // by id: the model's and the added tokens
  struct Merge {
    int32_t rank, id;
  };
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t mergeCount_ = 0;
  int32_t unkId_ = -1;
  std::string unkToken_;
  bool fuseUnk_ = false, byteFallback_ = false, ignoreMerges_ = false;
  std::string continuingSubwordPrefix_, endOfWordSuffix_;
  int32_t byteIds_[256];

  std::vector<AddedToken> added_;
  std::unordered_map<int32_t, size_t> addedById_;
  std::unordered_map<std::string, size_t> addedByContent_;
  int32_t maxAddedId_ = -1;
  void insertAddedToken(AddedToken token); // without refreshAddedPatterns()
  // By first byte: (pattern, index in added_); empty when there are none.
  using Patterns = std::vector<std::vector<std::pair<std::string, size_t>>>;
  Patterns rawPatterns_, normalizedPatterns_;
  void refreshAddedPatterns();

  std::vector<Step> normalizers_, preTokenizers_, decoders_;
  bool hasDecoder_ = false;

  mutable std::mutex cacheMutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

} // namespace llmc

#endif
