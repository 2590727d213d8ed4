//===- CollectiveCheck.cpp - ranks agree on their collectives -------------===//

#include "runtime/comm/CollectiveCheck.h"

#include "common/ArtifactFormat.h"
#include "common/Mesh.h"
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
  // The groups this rank's programs use. Ranks of different pipeline stages
  // run different programs and use different groups (only the last stage
  // averages the loss over the batch axes, say), so the ranks exchange a
  // hash for every subset of the mesh axes, in one fixed order, 0 for a
  // group the rank does not use: the same exchanges on every rank.
  std::set<std::vector<std::string>> used;
  for (const ProgramInfo &p : artifact.programs)
    for (const InstructionInfo &inst : p.instructions)
      if (inst.kind != InstructionKind::Kernel && !inst.group.empty())
        used.insert(inst.group);
  const size_t n = artifact.mesh.size();
  for (uint64_t subset = 1; subset < (uint64_t(1) << n); ++subset) {
    std::vector<std::string> axes;
    for (size_t i = 0; i < n; ++i)
      if (subset >> i & 1)
        axes.push_back(artifact.mesh[i].first);
    // A group's axes are listed as the program lists them; match as a set.
    std::vector<std::string> listed;
    for (const std::vector<std::string> &g : used) {
      std::vector<std::string> sorted = g, mine = axes;
      std::sort(sorted.begin(), sorted.end()), std::sort(mine.begin(), mine.end());
      if (sorted == mine)
        listed = g;
    }
    uint64_t mine = listed.empty() ? 0 : collectiveSequenceHash(artifact, listed);
    std::vector<uint64_t> hashes = comm.allGatherWorld(mine);
    std::string name;
    for (const std::string &a : axes) name += (name.empty() ? "" : ",") + a;
    // Members of one group: ranks whose coordinates agree outside `axes`.
    for (int a = 0; a < static_cast<int>(hashes.size()); ++a)
      for (int b = a + 1; b < static_cast<int>(hashes.size()); ++b) {
        std::vector<int> ca = meshCoordinates(artifact.mesh, a), cb = meshCoordinates(artifact.mesh, b);
        bool sameGroup = true;
        for (size_t i = 0; i < n; ++i)
          if (!(subset >> i & 1) && ca[i] != cb[i])
            sameGroup = false;
        if (sameGroup && hashes[a] != hashes[b])
          fail("ranks ", a, " and ", b, " would issue different collective sequences on group [",
               name, "] (this is rank ", rank, "): refusing to run");
      }
  }
}

} // namespace llmc
