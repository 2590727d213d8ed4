//===- StreamsTest.cpp - the CPU's streams and the race check -------------===//
//
// Stream 1 really runs beside stream 0 (a step on it finishes only once a
// later step of stream 0 has run), events order the streams, errors on any
// stream end the run with the first cause, and a missing event is both a
// real race (a poisoned buffer is read before the write it should have
// waited for) and refused before any program with it runs. With the
// pipeline transfer channels' streams (2 to 7) the check follows event
// chains through several streams, and HostStreams runs each stream on a
// thread of its own where asked.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutionDevice.h"
#include "runtime/Executor.h"
#include "runtime/HostStreams.h"
#include "runtime/StreamOrder.h"
#include "runtime/comm/Communicator.h"
#include "runtime/support/Error.h"

#include "Instructions.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>

using namespace llmc;

namespace {

using Step = ExecutionDevice::Step;

using test::eventInstruction;

InstructionInfo fill(uint32_t out, double value) {
  InstructionInfo inst = test::kernelInstruction("fill", {}, {out});
  inst.attrs.setFloat("value", value);
  return inst;
}

InstructionInfo allReduce(uint32_t in, uint32_t out) {
  InstructionInfo inst;
  inst.kind = InstructionKind::AllReduce;
  inst.inputs = {in};
  inst.outputs = {out};
  inst.stream = 1;
  return inst;
}

/// x = 2 (stream 0); y = all_reduce(x) on stream 1 after event 0; z = 5 on
/// stream 0 beside it; x = 7 on stream 0 after event 1 (write after read).
ProgramInfo orderedProgram() {
  ProgramInfo p;
  p.name = "train_step";
  p.buffers = {{"x", "activation", 0, DType::F32, {8}, {}},
               {"y", "output", 64, DType::F32, {8}, {}},
               {"z", "output", 128, DType::F32, {8}, {}}};
  p.instructions = {fill(0, 2.0),
                    eventInstruction(InstructionKind::RecordEvent, 0, 0),
                    eventInstruction(InstructionKind::WaitEvent, 0, 1),
                    allReduce(0, 1),
                    eventInstruction(InstructionKind::RecordEvent, 1, 1),
                    fill(2, 5.0),
                    eventInstruction(InstructionKind::WaitEvent, 1, 0),
                    fill(0, 7.0)};
  return p;
}

std::string describe(size_t i) { return "instruction " + std::to_string(i); }

TEST(StreamOrder, AcceptsAProgramWhoseHazardsAllHaveEvents) {
  ProgramInfo p = orderedProgram();
  EXPECT_TRUE(usesStreams(p));
  checkStreamOrder(p, describe);
}

TEST(StreamOrder, EveryRemovedEventIsARaceNamingBothInstructions) {
  // Without the record or the wait of event 0, the reduction may read x
  // before the fill wrote it; without event 1's, the last fill may
  // overwrite x while the reduction still reads it.
  const char *race0 =
      "instruction 2 on stream 1 reads buffer 'x' while instruction 0 on stream 0 writes "
      "buffer 'x' (arena bytes [0, 32) in common) with no event ordering them: a data race";
  const char *race1 = "instruction 6 on stream 0 writes buffer 'x' while instruction 3 on "
                      "stream 1 reads buffer 'x'";
  struct Case {
    size_t removed;
    const char *error;
  } cases[] = {{1, "waits for event 0, which no earlier instruction records"},
               {2, race0},
               {4, "waits for event 1, which no earlier instruction records"},
               {6, race1}};
  for (const Case &c : cases) {
    ProgramInfo p = orderedProgram();
    p.instructions.erase(p.instructions.begin() + static_cast<std::ptrdiff_t>(c.removed));
    SCOPED_TRACE("without instruction " + std::to_string(c.removed));
    EXPECT_RUNTIME_ERROR(checkStreamOrder(p, describe), c.error);
  }
}

TEST(StreamOrder, RejectsMalformedEventsAndStreams) {
  ProgramInfo p = orderedProgram();
  p.instructions.insert(p.instructions.begin() + 2, eventInstruction(InstructionKind::RecordEvent, 0, 0));
  EXPECT_RUNTIME_ERROR(checkStreamOrder(p, describe),
                       "instruction 2: event 0 is recorded a second time (first by instruction 1)");
  p = orderedProgram();
  p.instructions[5].stream = 9;
  EXPECT_RUNTIME_ERROR(checkStreamOrder(p, describe),
                       "instruction 5: stream 9 (programs have streams 0 to 8)");
  p = orderedProgram();
  p.instructions[1].event = 1000;
  EXPECT_RUNTIME_ERROR(checkStreamOrder(p, describe), "instruction 1: event 1000 out of range");
  p.instructions[1].event = -1;
  EXPECT_RUNTIME_ERROR(checkStreamOrder(p, describe), "instruction 1: event -1 out of range");
}

InstructionInfo transferOn(InstructionKind kind, uint32_t buffer, int channel) {
  InstructionInfo inst;
  inst.kind = kind;
  inst.inputs = {buffer};
  inst.axis = "pp";
  inst.shift = 1;
  inst.channel = channel;
  inst.stream = 1 + channel;
  return inst;
}

/// A stage's step on four streams: a receive on stream 2 (activations)
/// writes a; the kernel on stream 0 reads it into b after event 0; the
/// send on stream 3 (gradients) reads b after event 1; the all-reduce on
/// stream 1 reads a after event 2, which stream 3 records after its own
/// wait for event 1 — so the all-reduce is ordered after the receive only
/// through streams 3 and 0 (a chain over three streams); stream 0 rewrites
/// a last, after event 3 from stream 1.
ProgramInfo fourStreamProgram() {
  ProgramInfo p;
  p.name = "train_step";
  p.buffers = {{"a", "activation", 0, DType::F32, {8}, {}},
               {"b", "activation", 64, DType::F32, {8}, {}},
               {"s", "output", 128, DType::F32, {8}, {}}};
  p.instructions = {transferOn(InstructionKind::Recv, 0, 1),          // 0
                    eventInstruction(InstructionKind::RecordEvent, 0, 2), // 1
                    eventInstruction(InstructionKind::WaitEvent, 0, 0),   // 2
                    test::kernelInstruction("scale", {0}, {1}),           // 3
                    eventInstruction(InstructionKind::RecordEvent, 1, 0), // 4
                    eventInstruction(InstructionKind::WaitEvent, 1, 3),   // 5
                    transferOn(InstructionKind::Send, 1, 2),              // 6
                    eventInstruction(InstructionKind::RecordEvent, 2, 3), // 7
                    eventInstruction(InstructionKind::WaitEvent, 2, 1),   // 8
                    allReduce(0, 2),                                      // 9
                    eventInstruction(InstructionKind::RecordEvent, 3, 1), // 10
                    eventInstruction(InstructionKind::WaitEvent, 3, 0),   // 11
                    fill(0, 3.0)};                                        // 12
  return p;
}

TEST(StreamOrder, FollowsEventChainsThroughFourStreams) {
  checkStreamOrder(fourStreamProgram(), describe);
}

TEST(StreamOrder, EveryRemovedEventOfFourStreamsIsRefused) {
  struct Case {
    size_t removed;
    const char *error;
  } cases[] = {
      {2, "instruction 2 on stream 0 reads buffer 'a' while instruction 0 on stream 2 writes "
          "buffer 'a'"},
      {5, "instruction 5 on stream 3 reads buffer 'b' while instruction 3 on stream 0 writes "
          "buffer 'b'"},
      // Without stream 1's wait the all-reduce reads a beside the receive
      // that writes it (the first conflict found, on stream 2).
      {8, "instruction 8 on stream 1 reads buffer 'a' while instruction 0 on stream 2 writes "
          "buffer 'a'"},
      {11, "instruction 11 on stream 0 writes buffer 'a' while instruction 9 on stream 1 reads "
           "buffer 'a'"}};
  for (const Case &c : cases) {
    ProgramInfo p = fourStreamProgram();
    p.instructions.erase(p.instructions.begin() + static_cast<std::ptrdiff_t>(c.removed));
    SCOPED_TRACE("without instruction " + std::to_string(c.removed));
    EXPECT_RUNTIME_ERROR(checkStreamOrder(p, describe), c.error);
  }
}

TEST(StreamOrder, ReadsSharingBytesNeedNoEvent) {
  // Two streams may read the same bytes at once.
  ProgramInfo p = orderedProgram();
  p.instructions.resize(6); // drop event 1's wait and the rewrite of x
  p.instructions.push_back(test::kernelInstruction("scale", {0}, {2}));
  checkStreamOrder(p, describe);
}

TEST(StreamOrder, BindingRefusesARacyProgramBeforeItRuns) {
  ProgramInfo p = orderedProgram();
  p.instructions.erase(p.instructions.begin() + 2);
  auto device = makeCpuDevice(256);
  auto comm = makeSingleRankCommunicator();
  EXPECT_RUNTIME_ERROR((void)BoundProgram(p, *device, *comm, 3),
                       "rank 3, program 'train_step', instruction 2 (all_reduce) on stream 1 "
                       "reads buffer 'x' while rank 3, program 'train_step', instruction 0 "
                       "(kernel 'fill') on stream 0 writes");
}

TEST(StreamOrder, BindingRefusesAWaitNothingRecordsOnOneStreamToo) {
  // Every instruction on stream 0, the wait's event never recorded: it
  // would block forever, so it is refused although nothing runs beside it.
  ProgramInfo p;
  p.name = "train_step";
  p.buffers = {{"x", "activation", 0, DType::F32, {8}, {}}};
  p.instructions = {eventInstruction(InstructionKind::WaitEvent, 0, 0), fill(0, 1.0)};
  EXPECT_FALSE(usesStreams(p));
  auto device = makeCpuDevice(64);
  auto comm = makeSingleRankCommunicator();
  EXPECT_RUNTIME_ERROR((void)BoundProgram(p, *device, *comm, 0),
                       "instruction 0 (wait_event): waits for event 0, which no earlier "
                       "instruction records");
}

TEST(HostStreams, TheProgramRunsWithItsEventsUnderRandomDelays) {
  ProgramInfo p = orderedProgram();
  auto device = makeCpuDevice(256);
  device->setStreamDelays(300, 7);
  auto comm = makeSingleRankCommunicator();
  BoundProgram bound(p, *device, *comm, 0);
  for (int run = 0; run < 20; ++run) {
    bound.run(StepContext{run});
    for (int64_t i = 0; i < 8; ++i) {
      ASSERT_EQ(bound.view("y").as<float>()[i], 2.0f) << run;
      ASSERT_EQ(bound.view("z").as<float>()[i], 5.0f) << run;
      ASSERT_EQ(bound.view("x").as<float>()[i], 7.0f) << run;
    }
  }
}

TEST(HostStreams, StreamOneRunsBesideStreamZero) {
  // The step on stream 1 finishes only after a later step of stream 0 ran:
  // were the streams one ordered list, it would time out.
  auto device = makeCpuDevice(64);
  std::atomic<bool> later{false}, sawLater{false};
  Step waitForLater = [&](const StepContext &) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!later && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    sawLater = later.load();
  };
  Step setLater = [&](const StepContext &) { later = true; };
  StepContext ctx{0};
  device->runProgram(nullptr, 0, false, [&] {
    device->launch(1, waitForLater, ctx);
    device->launch(0, setLater, ctx);
  });
  EXPECT_TRUE(sawLater);
}

TEST(HostStreams, AMissingEventIsARealRace) {
  // Stream 1 (a collective, say) writes y = 1 after a pause; y holds NaN
  // (poisoned) until then; stream 0, issued after it, copies y to x.
  // Without the event the copy reads the poison; with it, the written
  // value. The race check refuses the first form before it runs (above).
  auto device = makeCpuDevice(64);
  float *x = reinterpret_cast<float *>(device->hostArena().base());
  float *y = x + 1;
  Step slowWrite = [&](const StepContext &) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    *y = 1.0f;
  };
  Step copy = [&](const StepContext &) { *x = *y; };
  Step record = [&](const StepContext &) { device->recordEvent(0, 1); };
  Step wait = [&](const StepContext &) { device->waitEvent(0, 0); };
  StepContext ctx{0};
  for (bool withEvent : {false, true}) {
    *y = std::numeric_limits<float>::quiet_NaN();
    *x = 0.0f;
    device->runProgram(nullptr, 0, false, [&] {
      device->launch(1, slowWrite, ctx);
      if (withEvent) {
        device->launch(1, record, ctx);
        device->launch(0, wait, ctx);
      }
      device->launch(0, copy, ctx);
    });
    if (withEvent)
      EXPECT_EQ(*x, 1.0f);
    else
      EXPECT_TRUE(std::isnan(*x)) << "the copy waited although nothing ordered it";
  }
}

TEST(HostStreams, AnErrorOnStreamOneEndsTheRunWithItsCause) {
  auto device = makeCpuDevice(64);
  Step failing = [](const StepContext &) { fail("all_reduce over [dp] timed out"); };
  Step record = [&](const StepContext &) { device->recordEvent(0, 1); };
  Step wait = [&](const StepContext &) { device->waitEvent(0, 0); };
  StepContext ctx{0};
  // Stream 0 waits for an event stream 1 never reaches: the run reports
  // stream 1's error, not a hang.
  EXPECT_RUNTIME_ERROR(device->runProgram(nullptr, 0, false,
                                          [&] {
                                            device->launch(1, failing, ctx);
                                            device->launch(1, record, ctx);
                                            device->launch(0, wait, ctx);
                                          }),
                       "all_reduce over [dp] timed out");
  // The next run starts clean.
  bool ran = false;
  Step mark = [&](const StepContext &) { ran = true; };
  device->runProgram(nullptr, 0, false, [&] {
    device->launch(1, record, ctx);
    device->launch(0, wait, ctx);
    device->launch(1, mark, ctx);
  });
  EXPECT_TRUE(ran);
}

TEST(HostStreams, AnErrorOnStreamZeroReleasesStreamOne) {
  // Stream 1 waits for an event stream 0 would record after the kernel
  // that fails: the run ends with stream 0's error and stream 1 idle.
  auto device = makeCpuDevice(64);
  Step wait = [&](const StepContext &) { device->waitEvent(0, 1); };
  Step failing = [](const StepContext &) { fail("kernel 'matmul' rejected its input"); };
  StepContext ctx{0};
  EXPECT_RUNTIME_ERROR(device->runProgram(nullptr, 0, false,
                                          [&] {
                                            device->launch(1, wait, ctx);
                                            device->launch(0, failing, ctx);
                                          }),
                       "kernel 'matmul' rejected its input");
}

TEST(HostStreams, CpuStreamsAreZeroToEight) {
  auto device = makeCpuDevice(64);
  for (int s = 0; s < 9; ++s) EXPECT_EQ(device->stream(s), nullptr);
  EXPECT_RUNTIME_ERROR(device->stream(9), "the CPU backend has streams 0 (compute) to 8 "
                                          "(communication, then copies), not 9");
}

TEST(HostStreams, ThreeLanesRunBesideEachOtherOrderedOnlyByEvents) {
  // Each stream on a thread of its own: stream 2's step finishes only
  // once stream 3's (launched after it) has run, and stream 1 waits for an
  // event stream 3 records after it — so three threads make progress
  // together, and the wait really blocks until the record.
  HostStreams streams;
  std::atomic<bool> third{false}, sawThird{false}, afterRecord{false};
  std::atomic<int> recorded{0};
  Step waitForThird = [&](const StepContext &) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!third && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    sawThird = third.load();
  };
  Step setThird = [&](const StepContext &) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    third = true;
    recorded = 1;
  };
  Step record = [&](const StepContext &) { streams.record(0); };
  Step wait = [&](const StepContext &) { streams.wait(0); };
  Step check = [&](const StepContext &) { afterRecord = recorded.load() == 1; };
  StepContext ctx{0};
  for (int run = 0; run < 3; ++run) {
    third = false;
    sawThird = false;
    afterRecord = false;
    recorded = 0;
    streams.beginRun();
    streams.launch(1, wait, ctx);
    streams.launch(1, check, ctx);
    streams.launch(2, waitForThird, ctx);
    streams.launch(3, setThird, ctx);
    streams.launch(3, record, ctx);
    streams.drain();
    EXPECT_TRUE(sawThird) << run;
    EXPECT_TRUE(afterRecord) << "stream 1 ran past its wait before stream 3 recorded, run " << run;
  }
}

TEST(HostStreams, SharedLaneRunsItsStreamsInLaunchOrder) {
  // The CPU device's mapping: every communication stream on lane 1, one
  // thread taking steps in launch order.
  HostStreams streams({0, 1, 1, 1, 1, 1, 1, 1});
  std::string order;
  std::mutex mutex;
  auto mark = [&](char c) {
    return Step([&, c](const StepContext &) {
      std::lock_guard<std::mutex> lock(mutex);
      order += c;
    });
  };
  Step a = mark('a'), b = mark('b'), c = mark('c');
  StepContext ctx{0};
  streams.setDelays(200, 3);
  streams.beginRun();
  streams.launch(3, a, ctx);
  streams.launch(1, b, ctx);
  streams.launch(2, c, ctx);
  streams.drain();
  EXPECT_EQ(order, "abc");
  EXPECT_RUNTIME_ERROR(HostStreams({1, 0}), "stream 0 runs on the calling thread");
}

} // namespace
