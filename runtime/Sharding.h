//===- Sharding.h - where a rank's piece sits in a global tensor -*- C++ -*-===//
//
// A sharded tensor (ShardInfo) is the global tensor split level by level;
// these functions map element indices between a rank's piece and the global
// tensor, in both directions. A level that splits one block over ranks that
// do not divide it is padded, as FSDP pads: each rank holds ceil(size/parts)
// and the tail of the last pieces is padding (zero, never saved as data). A
// padding level (ShardLevel::padTo) grows a dimension for every rank alike
// (the vocabulary padded inside the artifact); later levels split the
// padded tensor. Initialisation uses them to give every piece
// the values one rank would have; checkpoints use them to move pieces
// between layouts.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_SHARDING_H
#define LLMC_RUNTIME_SHARDING_H

#include "common/Mesh.h"
#include "runtime/Artifact.h"

#include <cstdint>
#include <vector>

namespace llmc {

/// A ShardInfo resolved against a mesh.
class ShardMap {
public:
  /// `globalShape` when `info` has no levels; `localShape` is this rank's.
  ShardMap(const ShardInfo &info, const std::vector<int64_t> &localShape, const Mesh &mesh);

  /// Group sizes per level.
  const std::vector<int> &parts() const { return parts_; }
  const std::vector<int64_t> &globalShape() const { return shapes_.front(); }
  const std::vector<int64_t> &localShape() const { return shapes_.back(); }
  /// The shape after the first `levels` levels (0: the global shape).
  const std::vector<int64_t> &shapeAfter(size_t levels) const { return shapes_.at(levels); }
  int64_t localNumel() const;

  /// Positions of `rank` in each level's group.
  std::vector<int> positions(int rank) const;
  /// Global flat index of local flat element `i` of the piece at `positions`,
  /// or -1 for padding (a split the ranks do not divide is padded at the end).
  int64_t toGlobal(const std::vector<int> &positions, int64_t i) const;
  /// Which piece holds global flat element `g`, and where in it.
  void fromGlobal(int64_t g, std::vector<int> &positions, int64_t &local) const;
  /// True when no level splits the last dimension (rows are contiguous).
  bool lastDimWhole() const;

private:
  ShardInfo info_;
  const Mesh &mesh_;
  std::vector<std::vector<int64_t>> shapes_; ///< [0] global ... [levels] local
  std::vector<int> parts_;
};

} // namespace llmc

#endif
