//===- PagedCacheLayout.h - block tables and positions for paged tests -*- C++ -*-===//
//
// The CPU and CUDA tests of kv_cache_write and paged_attention lay sequences
// out the same way: on shuffled pages of a pool with spare pages, queried
// at each row's last positions.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_PAGEDCACHELAYOUT_H
#define LLMC_TEST_UNIT_KERNELS_PAGEDCACHELAYOUT_H

#include "KernelTest.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace llmc::test {

/// Sequences of the given lengths on shuffled pages of a pool with spare
/// pages; table entries past a sequence's pages are −1.
struct Pages {
  int64_t page = 1, blocks = 0, maxBlocks = 0;
  RefTensor table; ///< [B, M]
};

inline Pages shuffledPages(const std::vector<int64_t> &lengths, int64_t page, uint64_t seed) {
  Pages pages;
  pages.page = page;
  int64_t used = 0;
  for (int64_t length : lengths) {
    int64_t n = (length + page - 1) / page;
    pages.maxBlocks = std::max(pages.maxBlocks, n + 1);
    used += n;
  }
  pages.blocks = used + 3;
  std::vector<int64_t> order(pages.blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  const int64_t b = static_cast<int64_t>(lengths.size());
  pages.table = RefTensor::zeros({b, pages.maxBlocks});
  std::fill(pages.table.data.begin(), pages.table.data.end(), -1.0);
  int64_t next = 0;
  for (int64_t row = 0; row < b; ++row)
    for (int64_t i = 0; i < (lengths[row] + page - 1) / page; ++i)
      pages.table.data[row * pages.maxBlocks + i] = static_cast<double>(order[next++]);
  return pages;
}

/// Positions [B, T]: row b holds its last min(T, L_b) positions, then padding.
inline RefTensor lastPositions(const std::vector<int64_t> &lengths, int64_t t) {
  const int64_t b = static_cast<int64_t>(lengths.size());
  RefTensor positions = RefTensor::zeros({b, t});
  for (int64_t row = 0; row < b; ++row) {
    int64_t n = std::min(t, lengths[row]);
    for (int64_t i = 0; i < t; ++i)
      positions.data[row * t + i] = i < n ? static_cast<double>(lengths[row] - n + i) : -1.0;
  }
  return positions;
}

} // namespace llmc::test

#endif
