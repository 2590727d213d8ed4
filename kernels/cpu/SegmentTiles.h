//===- SegmentTiles.h - which attention tiles packed sequences hide -*- C++ -*-===//
//
// With segment ids a query sees only keys of its own id. Packed rows hold
// documents one after another, so a tile's ids form a short range, and a
// query tile and a key tile whose ranges do not meet hide every score from
// each other: skipping them makes attention over documents of s_i tokens
// cost Σ s_i² instead of (Σ s_i)². Only the ranges are compared, so ids in
// any order stay correct (interleaved ids merely skip nothing).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_SEGMENTTILES_H
#define LLMC_KERNELS_CPU_SEGMENTTILES_H

#include "kernels/cpu/Common.h"

#include <algorithm>
#include <vector>

namespace llmc::cpu {

class SegmentTiles {
public:
  /// Tiles of `tile` positions over rows of `t`, for `rows` rows.
  void resize(int64_t rows, int64_t t, int64_t tile) {
    t_ = t, tile_ = tile, tiles_ = (t + tile - 1) / tile;
    lo_.assign(static_cast<size_t>(rows * tiles_), 0);
    hi_.assign(static_cast<size_t>(rows * tiles_), 0);
  }

  /// Reads the id range of every tile; ids are [rows, t].
  void update(const IdView &ids) {
    for (int64_t k = 0; k < static_cast<int64_t>(lo_.size()); ++k) {
      int64_t b = k / tiles_, first = k % tiles_ * tile_, end = std::min(t_, first + tile_);
      int64_t lo = ids[b * t_ + first], hi = lo;
      for (int64_t i = first + 1; i < end; ++i) {
        lo = std::min(lo, ids[b * t_ + i]);
        hi = std::max(hi, ids[b * t_ + i]);
      }
      lo_[static_cast<size_t>(k)] = lo, hi_[static_cast<size_t>(k)] = hi;
    }
  }

  /// Whether the tiles starting at positions i0 and j0 of row b can share an id.
  bool meet(int64_t b, int64_t i0, int64_t j0) const {
    size_t q = static_cast<size_t>(b * tiles_ + i0 / tile_);
    size_t k = static_cast<size_t>(b * tiles_ + j0 / tile_);
    return lo_[k] <= hi_[q] && lo_[q] <= hi_[k];
  }

private:
  int64_t t_ = 0, tile_ = 1, tiles_ = 0;
  std::vector<int64_t> lo_, hi_; // [rows, tiles]
};

} // namespace llmc::cpu

#endif
