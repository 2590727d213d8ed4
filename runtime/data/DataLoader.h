//===- DataLoader.h - deterministic, layout-independent batches -*- C++ -*-===//
//
// Shard i of Tᵢ tokens holds Wᵢ = ⌊(Tᵢ−1)/T⌋ windows of T+1 tokens (window w
// starts at token w·T of its shard; inputs are its first T tokens, targets
// the next T); windows never cross shards. W = ΣWᵢ windows make an epoch.
//
// Epoch e visits the shards in an order drawn from (seed, e) and, inside
// each shard, its windows in a permutation drawn from (seed, e, shard), both
// with splitmix64 + Fisher–Yates (fully specified, so identical on every
// platform). Global sample s is position s mod W of epoch s/W; row r of
// global batch b is sample b·rows + r. A batch is therefore a pure function
// of its index: resuming needs only the step, whatever shard boundary it
// falls on, and data-parallel ranks that each fill their slice of rows see
// exactly the batch one rank would, for any number of ranks.
//
// Visiting one shard at a time keeps the loader's memory bounded by the
// shard, not the dataset: it holds one window permutation per shard in use
// (4 bytes a window) and hands back the pages of shards it has left. With a
// single shard the order is exactly the one-permutation order earlier
// versions used (and test/reference/torch_reference.py replays).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_DATALOADER_H
#define LLMC_RUNTIME_DATA_DATALOADER_H

#include "runtime/data/Dataset.h"

#include <cstdint>
#include <vector>

namespace llmc {

class DataLoader {
public:
  /// `vocab` > 0: every token read is checked against it. Throws when no
  /// shard holds T+1 tokens.
  DataLoader(const Dataset &data, int64_t seqLen, uint64_t seed, int64_t vocab = 0);

  /// Fills `rows` rows (T tokens each) of global batch `batchIndex`, which
  /// has `globalRows` rows, starting at row `firstRow`. Throws naming the
  /// shard and token offset of a token outside the vocabulary.
  void fill(int64_t batchIndex, int64_t globalRows, int64_t firstRow, int64_t rows,
            int32_t *inputs, int32_t *targets);

  int64_t windows() const { return windows_; }

private:
  struct Permutation {
    int64_t epoch = -1, shard = -1;
    std::vector<uint32_t> order;
  };
  /// The shard and its window holding position `pos` of epoch `epoch`.
  std::pair<int64_t, int64_t> locate(int64_t epoch, int64_t pos);
  const std::vector<uint32_t> &windowOrder(int64_t epoch, int64_t shard);

  const Dataset &data_;
  int64_t T_, windows_ = 0, vocab_;
  uint64_t seed_;
  std::vector<int64_t> shardWindows_;
  int64_t orderEpoch_ = -1;
  std::vector<int64_t> shardOrder_, orderEnd_; ///< epoch's shard order; running window sums
  /// The two most recently used shards' permutations ([0] the latest).
  Permutation cache_[2];
};

} // namespace llmc

#endif
