//===- Mesh.h - rank <-> mesh coordinates -----------------------*- C++ -*-===//
//
// Ranks are laid out on the mesh row-major, last axis fastest. A group over
// axes S is the ranks whose coordinates agree outside S; a member's position
// is its coordinate index over S, in mesh order (the order all_gather
// concatenates and all_slice / reduce_scatter hand out chunks). Header-only:
// the compiler's collective verifier uses the same mapping.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_MESH_H
#define LLMC_COMMON_MESH_H

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace llmc {

using Mesh = std::vector<std::pair<std::string, int>>;

/// Coordinates of `rank` (last axis fastest).
inline std::vector<int> meshCoordinates(const Mesh &mesh, int rank) {
  std::vector<int> coords(mesh.size());
  for (int i = static_cast<int>(mesh.size()) - 1; i >= 0; --i) {
    coords[i] = rank % mesh[i].second;
    rank /= mesh[i].second;
  }
  return coords;
}

/// The rank whose coordinates are `coords` but `shift` further along axis
/// `axis` (cyclically): a pipeline neighbour. Allocates nothing.
inline int meshNeighbour(const Mesh &mesh, const std::vector<int> &coords, size_t axis,
                         int shift) {
  int rank = 0;
  for (size_t d = 0; d < mesh.size(); ++d) {
    int size = mesh[d].second, c = coords[d];
    if (d == axis) c = ((c + shift) % size + size) % size;
    rank = rank * size + c;
  }
  return rank;
}

/// Position of `rank` inside its group over `axes`, and the group's size.
inline std::pair<int, int> groupPosition(const Mesh &mesh, int rank,
                                         const std::vector<std::string> &axes) {
  std::vector<int> coords = meshCoordinates(mesh, rank);
  int position = 0, size = 1;
  for (size_t i = 0; i < mesh.size(); ++i)
    if (std::find(axes.begin(), axes.end(), mesh[i].first) != axes.end()) {
      position = position * mesh[i].second + coords[i];
      size *= mesh[i].second;
    }
  return {position, size};
}

} // namespace llmc

#endif
