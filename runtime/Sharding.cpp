//===- Sharding.cpp - where a rank's piece sits in a global tensor --------===//

#include "runtime/Sharding.h"
#include "runtime/support/Error.h"

namespace llmc {
namespace {

std::vector<int64_t> unflatten(int64_t i, const std::vector<int64_t> &shape) {
  std::vector<int64_t> c(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
  return c;
}

int64_t flatten(const std::vector<int64_t> &c, const std::vector<int64_t> &shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + c[d];
  return i;
}

} // namespace

ShardMap::ShardMap(const ShardInfo &info, const std::vector<int64_t> &localShape,
                   const Mesh &mesh)
    : info_(info), mesh_(mesh) {
  shapes_.push_back(info.sharded() ? info.globalShape : localShape);
  for (const ShardLevel &level : info.levels) {
    std::vector<int64_t> next = shapes_.back();
    if (level.dim < 0 || level.dim >= static_cast<int>(next.size()))
      fail("shard level's dimension ", level.dim, " is not one of a rank-", next.size(),
           " tensor's");
    int64_t size = next[level.dim];
    if (level.pads()) { // every rank holds the whole padded tensor so far
      if (level.padTo < size)
        fail("shard level pads a dimension of ", size, " to ", level.padTo);
      next[level.dim] = level.padTo;
      shapes_.push_back(next);
      parts_.push_back(1);
      continue;
    }
    int parts = groupPosition(mesh, 0, level.axes).second;
    // One block that the ranks do not divide is padded: every rank holds
    // ceil(size / parts), the last ones past the end hold padding.
    if (size % (static_cast<int64_t>(level.blocks) * parts) != 0 && level.blocks != 1)
      fail("shard level splits a dimension of ", size, " into ", level.blocks, " blocks over ",
           parts, " ranks");
    next[level.dim] = (size + parts - 1) / parts;
    shapes_.push_back(next);
    parts_.push_back(parts);
  }
  if (shapes_.back() != localShape)
    fail("sharding does not produce the buffer's shape");
}

int64_t ShardMap::localNumel() const {
  int64_t n = 1;
  for (int64_t d : shapes_.back()) n *= d;
  return n;
}

std::vector<int> ShardMap::positions(int rank) const {
  std::vector<int> out;
  for (const ShardLevel &level : info_.levels)
    out.push_back(level.pads() ? 0 : groupPosition(mesh_, rank, level.axes).first);
  return out;
}

bool ShardMap::lastDimWhole() const {
  int last = static_cast<int>(shapes_.front().size()) - 1;
  for (const ShardLevel &level : info_.levels)
    if (level.dim == last)
      return false;
  return true;
}

int64_t ShardMap::toGlobal(const std::vector<int> &positions, int64_t i) const {
  if (info_.levels.empty())
    return i;
  std::vector<int64_t> c = unflatten(i, shapes_.back());
  for (int k = static_cast<int>(info_.levels.size()) - 1; k >= 0; --k) {
    const ShardLevel &level = info_.levels[k];
    int64_t outer = shapes_[k][level.dim];             // size before this level
    if (level.pads()) {
      if (c[level.dim] >= outer)
        return -1; // the padded tail
      continue;
    }
    int64_t block = outer / level.blocks;              // one block
    int64_t piece = shapes_[k + 1][level.dim] / level.blocks; // one rank's part of a block
    int64_t x = c[level.dim];
    c[level.dim] = (x / piece) * block + positions[k] * piece + x % piece;
    if (c[level.dim] >= outer)
      return -1; // padding past the end of a padded split
  }
  return flatten(c, shapes_.front());
}

void ShardMap::fromGlobal(int64_t g, std::vector<int> &positions, int64_t &local) const {
  positions.assign(info_.levels.size(), 0);
  if (info_.levels.empty()) {
    local = g;
    return;
  }
  std::vector<int64_t> c = unflatten(g, shapes_.front());
  for (size_t k = 0; k < info_.levels.size(); ++k) {
    const ShardLevel &level = info_.levels[k];
    if (level.pads())
      continue; // the same index in the padded tensor
    int64_t outer = shapes_[k][level.dim];
    int64_t block = outer / level.blocks, piece = shapes_[k + 1][level.dim] / level.blocks;
    int64_t x = c[level.dim], inBlock = x % block;
    positions[k] = static_cast<int>(inBlock / piece);
    c[level.dim] = (x / block) * piece + inBlock % piece;
  }
  local = flatten(c, shapes_.back());
}

} // namespace llmc
