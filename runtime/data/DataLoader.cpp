//===- DataLoader.cpp - deterministic, layout-independent batches ---------===//

#include "runtime/data/DataLoader.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <numeric>

namespace llmc {
namespace {
uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T> void shuffle(std::vector<T> &v, uint64_t state) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(i + 1));
    std::swap(v[i], v[j]);
  }
}
} // namespace

DataLoader::DataLoader(const Dataset &data, int64_t seqLen, uint64_t seed, int64_t vocab)
    : data_(data), T_(seqLen), vocab_(vocab), seed_(seed) {
  if (T_ < 1)
    fail("data loader: sequence length must be >= 1");
  for (const TokenSpan &s : data.shards) {
    shardWindows_.push_back(s.count > T_ ? (s.count - 1) / T_ : 0);
    windows_ += shardWindows_.back();
  }
  if (windows_ == 0) {
    if (data.shards.size() == 1)
      fail("data has ", data.shards[0].count, " tokens; need at least T+1 = ", T_ + 1);
    fail("no shard of the data holds T+1 = ", T_ + 1, " tokens");
  }
}

std::pair<int64_t, int64_t> DataLoader::locate(int64_t epoch, int64_t pos) {
  if (epoch != orderEpoch_) {
    shardOrder_.resize(data_.shards.size());
    std::iota(shardOrder_.begin(), shardOrder_.end(), 0);
    // A stream of its own, so the window permutations below stay those of
    // the one-shard order.
    shuffle(shardOrder_, (seed_ ^ 0x5851F42D4C957F2Dull) * 0xD1B54A32D192ED03ull +
                             static_cast<uint64_t>(epoch));
    orderEnd_.clear();
    int64_t sum = 0;
    for (int64_t s : shardOrder_) orderEnd_.push_back(sum += shardWindows_[s]);
    orderEpoch_ = epoch;
  }
  size_t k = static_cast<size_t>(std::upper_bound(orderEnd_.begin(), orderEnd_.end(), pos) -
                                 orderEnd_.begin());
  int64_t shard = shardOrder_[k];
  int64_t first = orderEnd_[k] - shardWindows_[shard];
  return {shard, windowOrder(epoch, shard)[static_cast<size_t>(pos - first)]};
}

const std::vector<uint32_t> &DataLoader::windowOrder(int64_t epoch, int64_t shard) {
  if (cache_[0].epoch == epoch && cache_[0].shard == shard)
    return cache_[0].order;
  std::swap(cache_[0], cache_[1]);
  if (cache_[0].epoch == epoch && cache_[0].shard == shard)
    return cache_[0].order;
  // The entry about to be dropped: its shard's pages go back unless the
  // other entry still reads it.
  Permutation &old = cache_[0];
  if (old.shard >= 0 && old.shard != cache_[1].shard && old.shard != shard)
    data_.shards[static_cast<size_t>(old.shard)].release();
  old.epoch = epoch;
  old.shard = shard;
  old.order.resize(static_cast<size_t>(shardWindows_[shard]));
  std::iota(old.order.begin(), old.order.end(), 0u);
  uint64_t state = seed_ * 0xD1B54A32D192ED03ull + static_cast<uint64_t>(epoch);
  if (shard > 0) {
    uint64_t s = static_cast<uint64_t>(shard);
    state ^= splitmix64(s);
  }
  shuffle(old.order, state);
  return old.order;
}

void DataLoader::fill(int64_t batchIndex, int64_t globalRows, int64_t firstRow, int64_t rows,
                      int32_t *inputs, int32_t *targets) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t sample = batchIndex * globalRows + firstRow + r;
    auto [shard, window] = locate(sample / windows_, sample % windows_);
    const TokenSpan &span = data_.shards[static_cast<size_t>(shard)];
    int64_t start = window * T_;
    int32_t *x = inputs + r * T_, *y = targets + r * T_;
    for (int64_t t = 0; t <= T_; ++t) {
      uint32_t token = span.at(start + t);
      if (vocab_ > 0 && token >= static_cast<uint64_t>(vocab_))
        fail(span.name, ": token ", token, " at token offset ", span.begin + start + t,
             " is outside the model's vocabulary of ", vocab_);
      if (t < T_) x[t] = static_cast<int32_t>(token);
      if (t > 0) y[t - 1] = static_cast<int32_t>(token);
    }
  }
}

} // namespace llmc
