//===- DataLoader.h - deterministic, layout-independent batches -*- C++ -*-===//
//
// The token stream is cut into W = ⌊(N−1)/T⌋ windows of T+1 tokens (window w
// starts at w·T; inputs are its first T tokens, targets the next T). Epoch e
// visits every window once in a permutation seeded by (seed, e) with
// splitmix64 + Fisher–Yates (fully specified, so identical on every
// platform). Global sample s is window perm_{s/W}[s mod W]; row r of global
// batch b is sample b·rows + r. A batch is therefore a pure function of its
// index: resuming needs only the step, and data-parallel ranks that each
// fill their slice of rows see exactly the batch one rank would.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_DATALOADER_H
#define LLMC_RUNTIME_DATA_DATALOADER_H

#include <cstdint>
#include <vector>

namespace llmc {

class DataLoader {
public:
  /// Throws when the data holds fewer than T+1 tokens.
  DataLoader(const std::vector<uint16_t> &tokens, int64_t seqLen, uint64_t seed);

  /// Fills `rows` rows (T tokens each) of global batch `batchIndex`, which
  /// has `globalRows` rows, starting at row `firstRow`.
  void fill(int64_t batchIndex, int64_t globalRows, int64_t firstRow, int64_t rows,
            int32_t *inputs, int32_t *targets);

  int64_t windows() const { return windows_; }

private:
  const std::vector<int64_t> &permutation(int64_t epoch);

  const std::vector<uint16_t> &tokens_;
  int64_t T_, windows_;
  uint64_t seed_;
  int64_t cachedEpoch_ = -1;
  std::vector<int64_t> perm_;
};

} // namespace llmc

#endif
