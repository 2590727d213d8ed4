//===- BlockAllocator.cpp - KV cache blocks per sequence ------------------===//

#include "runtime/generate/BlockAllocator.h"

#include "runtime/support/Error.h"

#include <limits>

namespace llmc {

BlockAllocator::BlockAllocator(int64_t numBlocks, int64_t blockSize, int64_t maxBlocksPerSequence)
    : numBlocks_(numBlocks), blockSize_(blockSize), maxBlocksPerSequence_(maxBlocksPerSequence) {
  // Block ids travel to the program as int32 block-table entries.
  if (numBlocks < 1 || numBlocks > std::numeric_limits<int32_t>::max())
    fail("kv cache: ", numBlocks, " blocks; expected 1 to ", std::numeric_limits<int32_t>::max());
  if (blockSize < 1)
    fail("kv cache: block size ", blockSize, "; expected at least 1 token");
  if (maxBlocksPerSequence < 1)
    fail("kv cache: ", maxBlocksPerSequence, " blocks per sequence; expected at least 1");
  for (int64_t b = 0; b < numBlocks; ++b)
    free_.push(static_cast<int32_t>(b));
}

int64_t BlockAllocator::blocksFor(int64_t tokens) const {
  return tokens <= 0 ? 0 : (tokens + blockSize_ - 1) / blockSize_;
}

bool BlockAllocator::fits(int64_t tokens) const {
  return tokens <= maxContext() && blocksFor(tokens) <= freeBlocks();
}

void BlockAllocator::grow(int64_t sequence, int64_t tokens) {
  if (tokens > maxContext())
    fail("kv cache: sequence ", sequence, " needs ", tokens, " tokens, more than the context of ",
         maxContext(), " (", maxBlocksPerSequence_, " blocks of ", blockSize_, " tokens)");
  auto found = owned_.find(sequence);
  int64_t held = found == owned_.end() ? 0 : static_cast<int64_t>(found->second.size());
  int64_t more = blocksFor(tokens) - held;
  if (more <= 0)
    return;
  // Checked before taking any block: a failed grow changes nothing.
  if (more > freeBlocks())
    fail("kv cache full: sequence ", sequence, " needs ", more, " more blocks, ", freeBlocks(),
         " of ", numBlocks_, " are free");
  std::vector<int32_t> &list = owned_[sequence];
  for (int64_t i = 0; i < more; ++i) {
    list.push_back(free_.top());
    free_.pop();
  }
}

void BlockAllocator::release(int64_t sequence) {
  auto found = owned_.find(sequence);
  if (found == owned_.end())
    fail("kv cache: sequence ", sequence, " holds no blocks");
  for (int32_t b : found->second)
    free_.push(b);
  owned_.erase(found);
}

const std::vector<int32_t> &BlockAllocator::blocks(int64_t sequence) const {
  static const std::vector<int32_t> none;
  auto found = owned_.find(sequence);
  return found == owned_.end() ? none : found->second;
}

} // namespace llmc
