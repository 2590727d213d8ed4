//===- BpeTokenizerStep.h - one stage of a BPE tokenizer ------*- C++ -*-===//
//
// Private to BpeTokenizer*.cpp: what loading tokenizer.json makes of a
// normalizer, pre-tokenizer or decoder, and what encoding and decoding run.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_BPETOKENIZERSTEP_H
#define LLMC_RUNTIME_DATA_BPETOKENIZERSTEP_H

#include "runtime/data/BpeTokenizer.h"

#include <string>
#include <utility>
#include <vector>

namespace llmc {

// One normalizer, pre-tokenizer or decoder of the pipeline.
struct BpeTokenizer::Step {
  enum class Kind {
    Prepend,      // normalizer: `text` before non-empty text
    Nfc,          // normalizer: Unicode normalization form C
    Replace,      // normalizer, decoder: every `text` by `content`
    ByteLevel,    // pre-tokenizer, decoder
    Split,        // pre-tokenizer: `split`'s pieces, no byte mapping
    Metaspace,    // pre-tokenizer, decoder: `text` is the replacement of ' '
    ByteFallback, // decoder: <0xNN> tokens to bytes
    Fuse,         // decoder: all tokens into one
    Strip,        // decoder: `start`/`stop` leading/trailing `text`s off each token
  };
  enum class PrependScheme { Always, First, Never };
  Kind kind;
  std::string text, content;
  bool addPrefixSpace = false, split = true;
  PrependScheme prependScheme = PrependScheme::Always;
  size_t start = 0, stop = 0;
  std::vector<std::pair<size_t, size_t>> (*splitter)(const std::string &) = nullptr;
};

} // namespace llmc

#endif // LLMC_RUNTIME_DATA_BPETOKENIZERSTEP_H
