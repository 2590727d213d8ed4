//===- ShardWriter.h - cut a token stream into shards -----------*- C++ -*-===//
//
// Writes <prefix>_000000.bin, <prefix>_000001.bin, ... of at most
// `shardTokens` tokens each, as tokens arrive: only the shard being filled
// is held in memory, so any stream length works. `llmc data` and the tests
// build their datasets with it.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_SHARDWRITER_H
#define LLMC_RUNTIME_DATA_SHARDWRITER_H

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

class ShardWriter {
public:
  /// `width` 2 (uint16) or 4 (uint32) bytes per token; `vocab` > 0 is
  /// stated in every header and every token must be below it.
  ShardWriter(std::string prefix, int64_t shardTokens, int width, int64_t vocab);

  /// Throws naming the token's position in the stream when it is outside
  /// the vocabulary or does not fit the width.
  void add(uint32_t token);
  /// Writes the last, partial shard; returns every shard's path.
  std::vector<std::string> finish();

  int64_t tokens() const { return total_; }

private:
  void flush();

  std::string prefix_;
  int64_t shardTokens_;
  int width_;
  int64_t vocab_, total_ = 0;
  std::vector<uint32_t> buffer_;
  std::vector<std::string> written_;
};

/// The name of shard `index` of `prefix`: "<prefix>_000042.bin".
std::string shardPath(const std::string &prefix, int64_t index);

} // namespace llmc

#endif
