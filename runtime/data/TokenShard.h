//===- TokenShard.h - llm.c token shards ------------------------*- C++ -*-===//
//
// llm.c's format: a header of 256 little-endian int32, then the
// tokens.
//
//   [0] magic    20240520: uint16 tokens (GPT-2 and any vocabulary ≤ 65,536)
//                20240801: uint32 tokens (llm.c's Llama 3 shards; any larger
//                vocabulary)
//   [1] version  1 with magic 20240520, 7 with magic 20240801 (llm.c's)
//   [2] count    tokens in the shard (so < 2^31 per shard)
//   [3] vocab    the vocabulary size of the tokenizer that wrote the shard;
//                0 = not stated (llm.c leaves it 0). llmc's writer fills it
//                so a model with a smaller vocabulary is refused at start.
//   [4..255]     0
//
// A shard is memory-mapped and checked field by field against its size; its
// tokens are never copied as a whole.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_TOKENSHARD_H
#define LLMC_RUNTIME_DATA_TOKENSHARD_H

#include "runtime/support/MappedFile.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;
inline constexpr int32_t kTokenShard32Magic = 20240801;
inline constexpr int32_t kTokenShard32Version = 7;
inline constexpr size_t kTokenShardHeaderBytes = 256 * sizeof(int32_t);

/// A validated, mapped shard.
struct TokenShard {
  std::shared_ptr<const MappedFile> file;
  const uint8_t *tokens = nullptr; ///< the first token, after the header
  int width = 2;                   ///< bytes per token: 2 or 4
  int64_t count = 0;
  int64_t vocab = 0;               ///< header[3]; 0 = not stated
};

/// Maps and validates `path`; throws naming the file and what is wrong
/// (missing, shorter than the header, bad magic or version, a token count
/// that disagrees with the file's size).
TokenShard openTokenShard(const std::string &path);

/// Writes a shard atomically: uint16 tokens when `width` is 2 (every token
/// must be < 65,536), uint32 when 4. `vocab` goes to header[3].
void writeTokenShard(const std::string &path, const uint32_t *tokens, size_t count, int width,
                     int64_t vocab);
/// The uint16 shard of `tokens` (header vocabulary not stated).
void writeTokenShard(const std::string &path, const std::vector<uint16_t> &tokens);

} // namespace llmc

#endif
