//===- MeshGroup.h - a group of mesh axes as one rank sees it ---*- C++ -*-===//
//
// Every communicator (MPI, TCP, NCCL) turns the axes a program names into a
// group the same way: which axes are inside (the key its groups are kept
// under), the name messages use, and this rank's place — the coordinates
// outside the group (the split color: ranks agreeing there share a group)
// and the position inside it, in mesh order (the order all_gather
// concatenates in).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_MESHGROUP_H
#define LLMC_RUNTIME_COMM_MESHGROUP_H

#include "common/Mesh.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct MeshGroup {
  uint32_t mask = 0; ///< bit i set: mesh axis i is inside the group
  std::string name;  ///< "[dp, tp]"
  int color = 0;     ///< this rank's coordinates outside the group
  int position = 0;  ///< this rank's index inside the group
  int size = 1;      ///< members
  std::vector<std::string> axes; ///< inside, in mesh order
};

/// The index of `axis` in `mesh`; throws RuntimeError naming `rank` when the
/// mesh has no such axis.
size_t meshAxis(const Mesh &mesh, const std::string &axis, int rank);

/// The group over `axes` (any order, repeats allowed) of the rank at
/// `coords`; throws like meshAxis.
MeshGroup meshGroup(const Mesh &mesh, const std::vector<int> &coords,
                    const std::vector<std::string> &axes, int rank);

} // namespace llmc

#endif
