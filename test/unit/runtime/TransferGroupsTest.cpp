//===- TransferGroupsTest.cpp - pipeline transfers issued as groups -------===//
//
// The executor brackets each run of sends and receives on one stream (event
// waits between them included) with Communicator::beginTransfers and
// endTransfers, the groups NCCL needs and passes/lib/NcclTransfers.cpp proves
// free of deadlock; anything else on that stream ends a run, and so does
// communication on another stream (NCCL would take it into the open group).
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutionDevice.h"
#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"

#include "Instructions.h"

#include <gtest/gtest.h>

#include <mutex>

using namespace llmc;

namespace {

/// Records what the executor asks of it, in order.
class RecordingCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  CommGroup &group(const std::vector<std::string> &) override { return single->group({}); }
  void send(const void *, size_t, const std::string &, int, int tag, int channel) override {
    log("send" + std::to_string(tag) + channelSuffix(channel));
  }
  void recv(void *, size_t, const std::string &, int, int tag, int channel) override {
    log("recv" + std::to_string(tag) + channelSuffix(channel));
  }
  void beginTransfers() override { log("["); }
  void endTransfers() override { log("]"); }
  void barrier() override {}
  std::vector<uint64_t> allGatherWorld(uint64_t value) override { return {value, value}; }

  std::string calls;

private:
  static std::string channelSuffix(int channel) {
    return channel ? "@" + std::to_string(channel) : "";
  }
  void log(const std::string &what) {
    std::lock_guard<std::mutex> lock(mutex);
    calls += (calls.empty() ? "" : " ") + what;
  }
  std::mutex mutex;
  std::unique_ptr<Communicator> single = makeSingleRankCommunicator();
};

InstructionInfo transfer(InstructionKind kind, uint32_t buffer, int64_t tag, int channel = 0) {
  InstructionInfo inst;
  inst.kind = kind;
  inst.inputs = {buffer};
  inst.axis = "pp";
  inst.shift = 1;
  inst.tag = tag;
  inst.channel = channel;
  inst.stream = channel == 0 ? 1 : 1 + channel;
  return inst;
}

TEST(TransferGroups, RunsOfTransfersAndWaitsAreOneGroup) {
  ProgramInfo p;
  p.name = "train_step";
  p.buffers = {{"a", "activation", 0, DType::F32, {8}, {}},
               {"r", "activation", 64, DType::F32, {8}, {}},
               {"b", "activation", 128, DType::F32, {8}, {}}};
  using test::eventInstruction;
  p.instructions = {
      eventInstruction(InstructionKind::RecordEvent, 0, 0), transfer(InstructionKind::Send, 0, 1),
      eventInstruction(InstructionKind::WaitEvent, 0, 1),   transfer(InstructionKind::Recv, 1, 2),
      eventInstruction(InstructionKind::RecordEvent, 1, 1), transfer(InstructionKind::Send, 2, 3),
      eventInstruction(InstructionKind::WaitEvent, 1, 0)};
  auto device = makeCpuDevice(256);
  RecordingCommunicator comm;
  BoundProgram bound(p, *device, comm, 0);
  bound.run({});
  EXPECT_EQ(comm.calls, "[ send1 recv2 ] [ send3 ]");
}

TEST(TransferGroups, OtherCommunicationClosesAnOpenGroup) {
  ProgramInfo p;
  p.name = "train_step";
  p.buffers = {{"a", "activation", 0, DType::F32, {8}, {}},
               {"r", "activation", 64, DType::F32, {8}, {}},
               {"b", "activation", 128, DType::F32, {8}, {}},
               {"g", "grad", 192, DType::F32, {8}, {}},
               {"s", "grad", 256, DType::F32, {8}, {}}};
  InstructionInfo allReduce;
  allReduce.kind = InstructionKind::AllReduce;
  allReduce.inputs = {3};
  allReduce.outputs = {4};
  allReduce.group = {"pp"};
  allReduce.stream = 1;
  // Channel 1's send, then channel 2's receive (another stream): two
  // groups. Channel 1's next send opens a third, which the all-reduce
  // closes before it runs.
  p.instructions = {transfer(InstructionKind::Send, 0, 1, 1),
                    transfer(InstructionKind::Recv, 1, 2, 2),
                    transfer(InstructionKind::Send, 2, 3, 1), allReduce};
  auto device = makeCpuDevice(512);
  RecordingCommunicator comm;
  BoundProgram bound(p, *device, comm, 0);
  bound.run({});
  EXPECT_EQ(comm.calls, "[ send1@1 ] [ recv2@2 ] [ send3@1 ]");
}

} // namespace
