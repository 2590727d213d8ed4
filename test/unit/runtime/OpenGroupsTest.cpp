//===- OpenGroupsTest.cpp - every rank creates every group, in one order ---===//
//
// Pipeline stages use different groups; the ranks must still create the
// same groups in the same order (a group's creation is collective over the
// world under MPI and NCCL). A recording communicator stands in for the
// ranks: its allGatherWorld answers with the other ranks' group sets.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/OpenGroups.h"

#include "common/Mesh.h"
#include "runtime/support/Error.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

using namespace llmc;

namespace {

/// An artifact on `mesh` whose one program runs a collective on each group.
Artifact artifactUsing(Mesh mesh, std::vector<std::vector<std::string>> groups) {
  Artifact artifact;
  artifact.mesh = std::move(mesh);
  artifact.worldSize = 1;
  for (auto &[axis, size] : artifact.mesh) artifact.worldSize *= size;
  ProgramInfo program;
  InstructionInfo kernel;
  kernel.kind = InstructionKind::Kernel;
  program.instructions.push_back(kernel);
  for (std::vector<std::string> &axes : groups) {
    InstructionInfo collective;
    collective.kind = InstructionKind::AllReduce;
    collective.group = std::move(axes);
    program.instructions.push_back(collective);
  }
  artifact.programs.push_back(program);
  return artifact;
}

/// Records the groups asked for (each a one-rank group); allGatherWorld
/// returns `others` after this rank's value.
class RecordingCommunicator final : public Communicator {
public:
  explicit RecordingCommunicator(std::vector<uint64_t> others) : others_(std::move(others)) {}
  int rank() const override { return 0; }
  int size() const override { return static_cast<int>(others_.size()) + 1; }
  CommGroup &group(const std::vector<std::string> &axes) override {
    created.push_back(axes);
    return single_->group(axes);
  }
  void send(const void *, size_t, const std::string &, int, int, int) override {}
  void recv(void *, size_t, const std::string &, int, int, int) override {}
  void barrier() override {}
  std::vector<uint64_t> allGatherWorld(uint64_t value) override {
    std::vector<uint64_t> all{value};
    all.insert(all.end(), others_.begin(), others_.end());
    return all;
  }
  std::vector<std::vector<std::string>> created;

private:
  std::vector<uint64_t> others_;
  std::unique_ptr<Communicator> single_ = makeSingleRankCommunicator();
};

const Mesh kMesh = {{"pp", 2}, {"dp", 2}, {"fsdp", 2}};

} // namespace

TEST(OpenGroups, UsedGroupsAreSubsetsOfTheMeshAxesInAnyOrder) {
  // {pp} is subset 0b001 (bit 0), {dp, fsdp} 0b110 (bit 5), in either order.
  EXPECT_EQ(groupsUsedBy(artifactUsing(kMesh, {{"pp"}})), uint64_t(1) << 0);
  EXPECT_EQ(groupsUsedBy(artifactUsing(kMesh, {{"fsdp", "dp"}})), uint64_t(1) << 5);
  EXPECT_EQ(groupsUsedBy(artifactUsing(kMesh, {{"dp", "fsdp"}, {"pp"}, {"dp", "fsdp"}})),
            (uint64_t(1) << 5) | 1);
  EXPECT_EQ(groupsUsedBy(artifactUsing(kMesh, {})), 0u);
}

TEST(OpenGroups, RankOffsetsOfKernelsUseTheirGroups) {
  // A kernel whose attribute is offset by its rank in {dp, fsdp} asks that
  // group for the rank when it is bound, with no collective over it.
  Artifact artifact = artifactUsing(kMesh, {{"pp"}});
  RankOffsetInfo offset;
  offset.attr = "row_offset";
  offset.axes = {"fsdp", "dp"};
  offset.stride = 8;
  artifact.programs[0].instructions[0].rankOffsets.push_back(offset);
  EXPECT_EQ(groupsUsedBy(artifact), (uint64_t(1) << 5) | 1);
}

TEST(OpenGroups, EveryRankCreatesTheUnionInSubsetOrder) {
  // This rank (a first stage) uses {dp}; another (the last stage) also
  // averages over {dp, fsdp} and sends over {pp}: both create all three,
  // smallest subset first.
  Artifact first = artifactUsing(kMesh, {{"dp"}});
  uint64_t last = groupsUsedBy(artifactUsing(kMesh, {{"fsdp", "dp"}, {"pp"}, {"dp"}}));
  RecordingCommunicator comm({last});
  openGroupsOfEveryRank(first, comm);
  EXPECT_EQ(comm.created, (std::vector<std::vector<std::string>>{
                              {"pp"}, {"dp"}, {"dp", "fsdp"}}));
}

TEST(OpenGroups, OneRankCreatesNothing) {
  Artifact alone = artifactUsing({{"dp", 1}}, {{"dp"}});
  RecordingCommunicator comm({});
  openGroupsOfEveryRank(alone, comm);
  EXPECT_TRUE(comm.created.empty());
}

TEST(OpenGroups, TooManyAxesAreRefused) {
  Mesh mesh;
  for (const char *axis : {"a", "b", "c", "d", "e", "f", "g"}) mesh.push_back({axis, 1});
  try {
    groupsUsedBy(artifactUsing(mesh, {}));
    FAIL() << "expected an error";
  } catch (const RuntimeError &e) {
    EXPECT_STREQ(e.what(), "the mesh has 7 axes; at most 6 are supported");
  }
}
