//===- DataLoader.cpp - deterministic, layout-independent batches ---------===//

#include "runtime/data/DataLoader.h"
#include "runtime/support/Error.h"

#include <numeric>

namespace llmc {
namespace {
uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
} // namespace

DataLoader::DataLoader(const std::vector<uint16_t> &tokens, int64_t seqLen, uint64_t seed)
    : tokens_(tokens), T_(seqLen), seed_(seed) {
  if (T_ < 1)
    fail("data loader: sequence length must be >= 1");
  if (static_cast<int64_t>(tokens.size()) < T_ + 1)
    fail("data has ", tokens.size(), " tokens; need at least T+1 = ", T_ + 1);
  windows_ = (static_cast<int64_t>(tokens.size()) - 1) / T_;
}

const std::vector<int64_t> &DataLoader::permutation(int64_t epoch) {
  if (epoch == cachedEpoch_)
    return perm_;
  perm_.resize(static_cast<size_t>(windows_));
  std::iota(perm_.begin(), perm_.end(), 0);
  uint64_t state = seed_ * 0xD1B54A32D192ED03ull + static_cast<uint64_t>(epoch);
  for (int64_t i = windows_ - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(i + 1));
    std::swap(perm_[i], perm_[j]);
  }
  cachedEpoch_ = epoch;
  return perm_;
}

void DataLoader::fill(int64_t batchIndex, int64_t globalRows, int64_t firstRow, int64_t rows,
                      int32_t *inputs, int32_t *targets) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t sample = batchIndex * globalRows + firstRow + r;
    int64_t window = permutation(sample / windows_)[static_cast<size_t>(sample % windows_)];
    const uint16_t *src = tokens_.data() + window * T_;
    for (int64_t t = 0; t < T_; ++t) {
      inputs[r * T_ + t] = src[t];
      targets[r * T_ + t] = src[t + 1];
    }
  }
}

} // namespace llmc
