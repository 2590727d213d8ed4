//===- TokenShard.h - llm.c token shards ------------------------*- C++ -*-===//
//
// The llm.c / nanoGPT format: a header of 256 little-endian int32 — [0] the
// magic 20240520, [1] version 1, [2] the token count — then that many uint16
// tokens.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_TOKENSHARD_H
#define LLMC_RUNTIME_DATA_TOKENSHARD_H

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;

/// Reads a shard; throws naming the file and the field that is wrong.
std::vector<uint16_t> readTokenShard(const std::string &path);
/// Writes a shard atomically.
void writeTokenShard(const std::string &path, const std::vector<uint16_t> &tokens);

} // namespace llmc

#endif
