//===- ShardWriter.cpp - cut a token stream into shards -------------------===//

#include "runtime/data/ShardWriter.h"

#include "runtime/data/TokenShard.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Error.h"

#include <cstdio>

namespace llmc {

std::string shardPath(const std::string &prefix, int64_t index) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "_%06lld.bin", static_cast<long long>(index));
  return prefix + suffix;
}

ShardWriter::ShardWriter(std::string prefix, int64_t shardTokens, int width, int64_t vocab)
    : prefix_(std::move(prefix)), shardTokens_(shardTokens), width_(width), vocab_(vocab) {
  if (shardTokens_ < 1 || shardTokens_ > INT32_MAX)
    fail("shard size must be between 1 and ", INT32_MAX, " tokens, not ", shardTokens_);
  if (width_ != 2 && width_ != 4)
    fail("token width must be 2 (uint16) or 4 (uint32) bytes, not ", width_);
  if (vocab_ < 0 || (width_ == 2 && vocab_ > 65536))
    fail("a vocabulary of ", vocab_, " tokens needs uint32 shards");
  size_t slash = prefix_.rfind('/');
  if (slash != std::string::npos && slash > 0)
    makeDirectories(prefix_.substr(0, slash));
}

void ShardWriter::add(uint32_t token) {
  if (vocab_ > 0 && token >= static_cast<uint64_t>(vocab_))
    fail("token ", token, " at position ", total_, " of the input is outside the vocabulary of ",
         vocab_);
  if (width_ == 2 && token > 0xFFFF)
    fail("token ", token, " at position ", total_,
         " of the input does not fit uint16 (write uint32 shards)");
  buffer_.push_back(token);
  ++total_;
  if (static_cast<int64_t>(buffer_.size()) == shardTokens_)
    flush();
}

void ShardWriter::flush() {
  std::string path = shardPath(prefix_, static_cast<int64_t>(written_.size()));
  writeTokenShard(path, buffer_.data(), buffer_.size(), width_, vocab_);
  written_.push_back(path);
  buffer_.clear();
}

std::vector<std::string> ShardWriter::finish() {
  if (total_ == 0)
    fail("no tokens to write to '", prefix_, "_*.bin'");
  if (!buffer_.empty())
    flush();
  return written_;
}

} // namespace llmc
