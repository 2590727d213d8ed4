//===- CollectiveCheck.cpp - ranks agree on their collectives -------------===//

#include "runtime/comm/CollectiveCheck.h"

#include "runtime/ArtifactFormat.h"
#include "runtime/Mesh.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace llmc {

uint64_t collectiveSequenceHash(const Artifact &artifact, const std::vector<std::string> &axes) {
  std::ostringstream os;
  for (const ProgramInfo &p : artifact.programs)
    for (const InstructionInfo &inst : p.instructions) {
      if (inst.kind == InstructionKind::Kernel || inst.group != axes)
        continue;
      const BufferInfo &in = p.buffers[inst.inputs.at(0)];
      os << p.name << ':' << instructionKindName(inst.kind) << ':' << dtypeName(in.dtype) << ':'
         << TensorView{nullptr, in.dtype, in.shape}.numel() << ':' << inst.root << ':'
         << inst.reduction << ';';
    }
  std::string text = os.str();
  return fnv1a64(reinterpret_cast<const uint8_t *>(text.data()), text.size());
}

void checkCollectiveSequences(const Artifact &artifact, int rank, Communicator &comm) {
  // Every group (axis set) any program uses, in a fixed order.
  std::set<std::vector<std::string>> groups;
  for (const ProgramInfo &p : artifact.programs)
    for (const InstructionInfo &inst : p.instructions)
      if (inst.kind != InstructionKind::Kernel && !inst.group.empty())
        groups.insert(inst.group);
  // One exchange per group kind; all ranks hold the same artifact shape, so
  // they agree on how many exchanges there are only if their group sets
  // agree: exchange the group count first.
  std::vector<uint64_t> counts = comm.allGatherWorld(groups.size());
  for (int r = 0; r < static_cast<int>(counts.size()); ++r)
    if (counts[r] != counts[0])
      fail("rank ", r, " uses ", counts[r], " communication groups but rank 0 uses ", counts[0],
           ": the ranks run different programs (is every rank loading the same artifact?)");
  for (const std::vector<std::string> &axes : groups) {
    std::vector<uint64_t> hashes = comm.allGatherWorld(collectiveSequenceHash(artifact, axes));
    std::string name;
    for (const std::string &a : axes) name += (name.empty() ? "" : ",") + a;
    // Members of one group: ranks whose coordinates agree outside `axes`.
    for (int a = 0; a < static_cast<int>(hashes.size()); ++a)
      for (int b = a + 1; b < static_cast<int>(hashes.size()); ++b) {
        std::vector<int> ca = meshCoordinates(artifact.mesh, a), cb = meshCoordinates(artifact.mesh, b);
        bool sameGroup = true;
        for (size_t i = 0; i < artifact.mesh.size(); ++i)
          if (std::find(axes.begin(), axes.end(), artifact.mesh[i].first) == axes.end() &&
              ca[i] != cb[i])
            sameGroup = false;
        if (sameGroup && hashes[a] != hashes[b])
          fail("ranks ", a, " and ", b, " would issue different collective sequences on group [",
               name, "] (this is rank ", rank, "): refusing to run");
      }
  }
}

} // namespace llmc
