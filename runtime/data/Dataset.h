//===- Dataset.h - where training tokens come from --------------*- C++ -*-===//
#ifndef LLMC_RUNTIME_DATA_DATASET_H
#define LLMC_RUNTIME_DATA_DATASET_H

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

/// Path of the bundled corpus (data/tinytales.txt; LLMC_DATA_DIR overrides
/// the directory).
std::string bundledCorpusPath();

/// `spec` is "bundled", a `.bin` llm.c token shard, or any other file read as
/// text through the byte tokenizer.
std::vector<uint16_t> loadTokens(const std::string &spec);

/// Throws naming `source` and the first position whose token is >= vocab.
void validateTokens(const std::vector<uint16_t> &tokens, int64_t vocab,
                    const std::string &source);

} // namespace llmc

#endif
