//===- Dataset.h - where training tokens come from --------------*- C++ -*-===//
//
// A dataset is an ordered list of token spans, each a range of one
// memory-mapped file: a `.bin` shard (uint16 or uint32 tokens) or a text
// file read through the byte tokenizer (one byte = one token, mapped as is).
// Nothing is read whole; opening costs one header per shard.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_DATASET_H
#define LLMC_RUNTIME_DATA_DATASET_H

#include "runtime/support/MappedFile.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

/// Tokens [begin, begin + count) of one mapped file.
struct TokenSpan {
  std::shared_ptr<const MappedFile> file;
  std::string name;              ///< the file, for errors
  const uint8_t *base = nullptr; ///< token 0 of the file (after any header)
  int width = 1;                 ///< bytes per token: 1 text, 2 or 4 shard
  int64_t begin = 0, count = 0;
  int64_t vocab = 0;             ///< what the file states; 0 = not stated

  /// Token `i` of the span (0 ≤ i < count).
  uint32_t at(int64_t i) const {
    const uint8_t *p = base + (begin + i) * width;
    if (width == 1) return *p;
    if (width == 2) return *reinterpret_cast<const uint16_t *>(p);
    return *reinterpret_cast<const uint32_t *>(p);
  }
  /// Hands the span's pages back to the system (MappedFile::release).
  void release() const;
};

struct Dataset {
  std::vector<TokenSpan> shards;
  int64_t tokens() const;
};

/// Path of the bundled corpus (data/tinytales.txt; LLMC_DATA_DIR overrides
/// the directory).
std::string bundledCorpusPath();

/// The files `spec` names, in order: "bundled"; a file; a directory (its
/// `*.bin` files, sorted by name); or a glob pattern (its matches, sorted).
/// Throws when nothing matches.
std::vector<std::string> expandDataSpec(const std::string &spec);

/// Opens every file of `spec`: `.bin` files as token shards, anything else
/// as text. Throws naming the file that is missing, empty or corrupt.
Dataset openDataset(const std::string &spec);

/// Moves the last `n` shards of `train` into the returned validation set.
Dataset holdOutShards(Dataset &train, int64_t n, const std::string &spec);

/// One-shard data: moves the last 10% of its tokens (at least one window of
/// T+1) into the returned validation set.
Dataset holdOutTail(Dataset &train, int64_t seqLen);

/// Throws when a shard's header states a vocabulary larger than the
/// model's (tokens themselves are checked as they are read).
void checkVocabulary(const Dataset &data, int64_t vocab);

/// The tokens of a whole dataset (small data: tests and tools).
std::vector<uint32_t> readAll(const Dataset &data);

} // namespace llmc

#endif
