//===- Mesh.cpp - rank <-> mesh coordinates -------------------------------===//

#include "runtime/Mesh.h"

#include <algorithm>

namespace llmc {

std::vector<int> meshCoordinates(const Mesh &mesh, int rank) {
  std::vector<int> coords(mesh.size());
  for (int i = static_cast<int>(mesh.size()) - 1; i >= 0; --i) {
    coords[i] = rank % mesh[i].second;
    rank /= mesh[i].second;
  }
  return coords;
}

std::pair<int, int> groupPosition(const Mesh &mesh, int rank,
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
