//===- WriteShards.h - token shards from text or a token-id stream -*- C++ -*-===//
//
// What `llmc data` runs: reads an input (a file or stdin) streaming, in one
// of four formats, and cuts it into shards with ShardWriter.
//
//   text  bytes through the byte tokenizer (vocabulary 256)
//   ids   decimal token ids separated by whitespace (any tokenizer's output)
//   u16   raw little-endian uint16 ids
//   u32   raw little-endian uint32 ids
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_WRITESHARDS_H
#define LLMC_RUNTIME_DATA_WRITESHARDS_H

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct ShardJob {
  std::string input;              ///< a file, or "-" for stdin
  std::string format = "text";    ///< text | ids | u16 | u32
  std::string prefix;             ///< writes <prefix>_000000.bin, ...
  int64_t shardTokens = 100000000;
  int64_t vocab = 0;              ///< 0: 256 for text, else not stated
  std::string dtype;              ///< u16 | u32; empty: chosen from format and vocab
};

struct ShardReport {
  int64_t tokens = 0, vocab = 0;
  int width = 2;
  std::vector<std::string> shards;
};

/// Runs `job`; returns false with `error` naming the input position or the
/// file that is wrong (no exceptions escape: the llmc driver is built
/// without them).
bool writeShards(const ShardJob &job, ShardReport &report, std::string &error);

} // namespace llmc

#endif
