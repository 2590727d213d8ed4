//===- BlockAllocator.h - KV cache blocks per sequence ----------*- C++ -*-===//
//
// A generation artifact keeps its KV cache as one pool of NB blocks of P
// token slots, shared by every row of the batch. A sequence's keys and
// values live in a list of pool blocks: block i of the list holds its
// positions [i·P, (i+1)·P), and the program finds them through the row's
// block table. So sequences of very different lengths share the pool
// without each reserving the model's whole context, and a finished
// sequence's blocks go straight to the next one.
//
// The allocator only does the bookkeeping: which blocks are free, which
// belong to which sequence. A block belongs to at most one sequence at a
// time; growing a sequence either gets all the blocks it asks for or
// changes nothing, so a failed request leaves the cache as it was.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_GENERATE_BLOCKALLOCATOR_H
#define LLMC_RUNTIME_GENERATE_BLOCKALLOCATOR_H

#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>
#include <vector>

namespace llmc {

class BlockAllocator {
public:
  /// A pool of `numBlocks` blocks of `blockSize` tokens; a sequence may use
  /// at most `maxBlocksPerSequence` of them (the width M of a block table).
  BlockAllocator(int64_t numBlocks, int64_t blockSize, int64_t maxBlocksPerSequence);

  int64_t numBlocks() const { return numBlocks_; }
  int64_t blockSize() const { return blockSize_; }
  int64_t maxBlocksPerSequence() const { return maxBlocksPerSequence_; }
  /// The longest sequence a block table can address: M·P tokens.
  int64_t maxContext() const { return blockSize_ * maxBlocksPerSequence_; }
  int64_t freeBlocks() const { return static_cast<int64_t>(free_.size()); }

  /// Blocks that hold `tokens` tokens: ⌈tokens / P⌉.
  int64_t blocksFor(int64_t tokens) const;
  /// Whether a new sequence of `tokens` tokens would get its blocks now.
  bool fits(int64_t tokens) const;

  /// Grows `sequence`'s blocks to hold `tokens` tokens, allocating its first
  /// ones if it holds none; never shrinks. Throws RuntimeError, changing
  /// nothing, when `tokens` exceeds maxContext() or the pool lacks blocks.
  void grow(int64_t sequence, int64_t tokens);
  /// Returns all of `sequence`'s blocks to the pool.
  void release(int64_t sequence);

  bool holds(int64_t sequence) const { return owned_.count(sequence) != 0; }
  /// `sequence`'s blocks, in position order (empty when it holds none).
  const std::vector<int32_t> &blocks(int64_t sequence) const;

private:
  int64_t numBlocks_, blockSize_, maxBlocksPerSequence_;
  /// Lowest block first, so the same requests get the same blocks on every
  /// run (a reproducible layout is easier to debug).
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<int32_t>> free_;
  std::unordered_map<int64_t, std::vector<int32_t>> owned_;
};

} // namespace llmc

#endif
