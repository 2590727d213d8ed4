//===- MeshGroup.cpp - a group of mesh axes as one rank sees it -----------===//

#include "runtime/comm/MeshGroup.h"
#include "runtime/support/Error.h"

namespace llmc {

size_t meshAxis(const Mesh &mesh, const std::string &axis, int rank) {
  for (size_t i = 0; i < mesh.size(); ++i)
    if (mesh[i].first == axis) return i;
  fail("rank ", rank, ": the mesh has no axis '", axis, "'");
}

MeshGroup meshGroup(const Mesh &mesh, const std::vector<int> &coords,
                    const std::vector<std::string> &axes, int rank) {
  MeshGroup g;
  for (const std::string &axis : axes) g.mask |= 1u << meshAxis(mesh, axis, rank);
  g.name = "[";
  for (size_t i = 0; i < mesh.size(); ++i) {
    if (g.mask >> i & 1) {
      g.axes.push_back(mesh[i].first);
      g.name += (g.name.size() > 1 ? ", " : "") + mesh[i].first;
      g.position = g.position * mesh[i].second + coords[i];
      g.size *= mesh[i].second;
    } else {
      g.color = g.color * mesh[i].second + coords[i];
    }
  }
  g.name += "]";
  return g;
}

} // namespace llmc
