//===- OpenGroups.cpp - every rank creates every group, in one order ------===//

#include "runtime/comm/OpenGroups.h"

#include "runtime/support/Error.h"

#include <algorithm>

namespace llmc {
namespace {

constexpr size_t kMaxAxes = 6; // 63 non-empty subsets: one 64-bit word

std::vector<std::string> axesOfSubset(const Artifact &artifact, uint64_t subset) {
  std::vector<std::string> axes;
  for (size_t i = 0; i < artifact.mesh.size(); ++i)
    if (subset >> i & 1)
      axes.push_back(artifact.mesh[i].first);
  return axes;
}

uint64_t subsetOf(const Artifact &artifact, const std::vector<std::string> &axes) {
  uint64_t subset = 0;
  for (const std::string &axis : axes)
    for (size_t i = 0; i < artifact.mesh.size(); ++i)
      if (artifact.mesh[i].first == axis)
        subset |= uint64_t(1) << i;
  return subset;
}

} // namespace

uint64_t groupsUsedBy(const Artifact &artifact) {
  if (artifact.mesh.size() > kMaxAxes)
    fail("the mesh has ", artifact.mesh.size(), " axes; at most ", kMaxAxes, " are supported");
  uint64_t used = 0;
  const auto use = [&](const std::vector<std::string> &axes) {
    if (uint64_t subset = subsetOf(artifact, axes))
      used |= uint64_t(1) << (subset - 1);
  };
  for (const ProgramInfo &p : artifact.programs)
    for (const InstructionInfo &inst : p.instructions) {
      if (inst.kind != InstructionKind::Kernel && !inst.group.empty())
        use(inst.group);
      // A kernel's rank offset asks its group for this rank's place when it
      // is bound; a group made then would be made by some ranks only (NCCL's
      // split is collective over the world), so it is opened here too.
      for (const RankOffsetInfo &term : inst.rankOffsets) use(term.axes);
    }
  return used;
}

void openGroupsOfEveryRank(const Artifact &artifact, Communicator &comm) {
  if (artifact.worldSize <= 1)
    return;
  uint64_t all = 0;
  for (uint64_t used : comm.allGatherWorld(groupsUsedBy(artifact)))
    all |= used;
  for (uint64_t subset = 1; subset < (uint64_t(1) << artifact.mesh.size()); ++subset)
    if (all >> (subset - 1) & 1)
      comm.group(axesOfSubset(artifact, subset));
}

} // namespace llmc
