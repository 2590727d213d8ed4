//===- IntCounts.h - sizes for libraries that count in int -----*- C++ -*-===//
//
// MPI counts elements (and bytes) in int. An element-wise operation on more
// runs in pieces of at most INT_MAX; one whose layout interleaves the
// ranks' pieces (all-gather, reduce-scatter, all-to-all) cannot be cut
// that way and is refused with the count, rather than truncated.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_INTCOUNTS_H
#define LLMC_RUNTIME_COMM_INTCOUNTS_H

#include <algorithm>
#include <climits>
#include <cstddef>

namespace llmc {

/// fn(first, count) for consecutive pieces of [0, n), each at most `most`
/// long; once with count 0 when n is 0 (a collective every rank joins).
template <typename F>
void forEachIntPiece(size_t n, F &&fn, size_t most = static_cast<size_t>(INT_MAX)) {
  size_t first = 0;
  do {
    const size_t count = std::min(n - first, most);
    fn(first, static_cast<int>(count));
    first += count;
  } while (first < n);
}

/// Whether n fits an int count.
inline bool fitsIntCount(size_t n) { return n <= static_cast<size_t>(INT_MAX); }

} // namespace llmc

#endif
