//===- Mesh.h - rank <-> mesh coordinates -----------------------*- C++ -*-===//
//
// Ranks are laid out on the mesh row-major, last axis fastest. A group over
// axes S is the ranks whose coordinates agree outside S; a member's position
// is its coordinate index over S, in mesh order (the order all_gather
// concatenates and all_slice / reduce_scatter hand out chunks).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_MESH_H
#define LLMC_RUNTIME_MESH_H

#include <string>
#include <utility>
#include <vector>

namespace llmc {

using Mesh = std::vector<std::pair<std::string, int>>;

/// Coordinates of `rank` (last axis fastest).
std::vector<int> meshCoordinates(const Mesh &mesh, int rank);

/// Position of `rank` inside its group over `axes`, and the group's size.
std::pair<int, int> groupPosition(const Mesh &mesh, int rank, const std::vector<std::string> &axes);

} // namespace llmc

#endif
