//===- ExecutionDeviceTest.cpp - where programs run -----------------------===//
//
// The CPU device runs a program with streams and events (as
// llmc-place-streams emits them) with the results of one ordered list; the
// CUDA device, on a machine without a GPU, refuses at once with the reason.
// On either, an error of host work (a host kernel, a host collective whose
// peer died) reaches the caller of the program, and the host work after it
// is skipped. On a GPU: a program whose capture fails runs eagerly,
// released graphs are captured again, and --no-cuda-graphs captures none.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutionDevice.h"
#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"
#include "runtime/support/Error.h"

#include "Instructions.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace llmc;

namespace {

using test::eventInstruction;
using test::kernelInstruction;

/// g = 3; record; (stream 1) wait, g = all_reduce(g) on one rank; record;
/// (stream 0) wait, y = 0.5·g.
ProgramInfo streamedProgram() {
  ProgramInfo p;
  p.name = "train_step";
  p.buffers = {{"g", "grad", 0, DType::F32, {8}, {}}, {"y", "output", 64, DType::F32, {8}, {}}};
  InstructionInfo fill = kernelInstruction("fill", {}, {0});
  fill.attrs.setFloat("value", 3.0);
  InstructionInfo reduce;
  reduce.kind = InstructionKind::AllReduce;
  reduce.inputs = {0};
  reduce.outputs = {0};
  reduce.stream = 1;
  InstructionInfo scale = kernelInstruction("scale", {0}, {1});
  scale.attrs.setFloat("factor", 0.5);
  p.instructions = {fill,
                    eventInstruction(InstructionKind::RecordEvent, 0, 0),
                    eventInstruction(InstructionKind::WaitEvent, 0, 1),
                    reduce,
                    eventInstruction(InstructionKind::RecordEvent, 1, 1),
                    eventInstruction(InstructionKind::WaitEvent, 1, 0),
                    scale};
  return p;
}

TEST(ExecutionDevice, CpuRunsStreamsOrderedByEvents) {
  ProgramInfo program = streamedProgram();
  auto device = makeCpuDevice(128);
  EXPECT_EQ(device->backend(), Backend::CPU);
  EXPECT_EQ(device->kernelBase(), device->hostArena().base());
  auto comm = makeSingleRankCommunicator();
  BoundProgram bound(program, *device, *comm, 0);
  bound.run(StepContext{1});
  TensorView y = bound.view("y");
  bound.toHost(y); // a no-op on the CPU
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(y.as<float>()[i], 1.5f) << i;
  EXPECT_EQ(device->highWaterMark(), 64u + 32u);
  EXPECT_EQ(device->describe(), "");
}

bool gpuPresent() { return std::system("nvidia-smi -L > /dev/null 2>&1") == 0; }

/// Runs host work that fails between two that count their runs, on a
/// device's stream 0, as a program would; returns the error's message.
std::string failingHostWork(ExecutionDevice &device, int &before, int &after) {
  ExecutionDevice::Step first = device.hostStep(0, [&](const StepContext &) { ++before; });
  ExecutionDevice::Step failing = device.hostStep(
      0, [](const StepContext &) { fail("rank 0: lost the connection to rank 1"); });
  ExecutionDevice::Step last = device.hostStep(0, [&](const StepContext &) { ++after; });
  StepContext ctx{1};
  auto enqueue = [&] {
    device.launch(0, first, ctx);
    device.launch(0, failing, ctx);
    device.launch(0, last, ctx);
  };
  std::string message;
  try {
    device.runProgram(&before, 1, true, enqueue);
  } catch (const RuntimeError &e) {
    message = e.what();
  }
  return message;
}

TEST(ExecutionDevice, HostWorkErrorsReachTheCaller) {
  std::vector<std::unique_ptr<ExecutionDevice>> devices;
  devices.push_back(makeCpuDevice(128));
  if (gpuPresent())
    devices.push_back(makeCudaDevice(128, CudaOptions{}));
  for (auto &device : devices) {
    int before = 0, after = 0;
    EXPECT_EQ(failingHostWork(*device, before, after), "rank 0: lost the connection to rank 1");
    EXPECT_EQ(before, 1);
    EXPECT_EQ(after, 0) << "host work after a failed one is skipped";
    device->synchronize(); // the error was taken once
  }
}

/// A program that copies the arena's first 16 floats (1, 2, ...) to the
/// next 16 on stream 0, counting the calls of its enqueue, and throwing
/// from the calls `throwAt` names (as a capture-breaking step would).
struct CountedCopy {
  ExecutionDevice &device;
  std::vector<int> throwAt;
  int calls = 0;
  StepContext ctx{1};
  ExecutionDevice::Step copy = [this](const StepContext &) {
    uint8_t *base = device.kernelBase();
    device.copy(base + 64, base, 64, 0);
  };

  void run(int64_t step) {
    device.runProgram(this, step, false, [this] {
      ++calls;
      device.launch(0, copy, ctx);
      for (int at : throwAt)
        if (at == calls)
          fail("this step cannot be captured");
    });
  }
  /// The copy's result, read back.
  bool copied() {
    device.toHost(64, 64);
    const float *out = reinterpret_cast<const float *>(device.hostArena().base() + 64);
    for (int i = 0; i < 16; ++i)
      if (out[i] != static_cast<float>(i + 1))
        return false;
    return true;
  }
};

/// A CUDA device of 128 arena bytes, its first 16 floats 1, 2, ..., 16.
std::unique_ptr<ExecutionDevice> filledCudaDevice(const CudaOptions &options) {
  auto device = makeCudaDevice(128, options);
  float *in = reinterpret_cast<float *>(device->hostArena().base());
  for (int i = 0; i < 16; ++i) in[i] = static_cast<float>(i + 1);
  device->toDevice(0, 64);
  return device;
}

TEST(ExecutionDevice, CudaProgramWhoseCaptureFailsRunsEagerly) {
  if (!gpuPresent())
    GTEST_SKIP() << "no GPU";
  auto device = filledCudaDevice(CudaOptions{});
  // Run 1 is eager (call 1); run 2's capture throws (call 2), is ended and
  // discarded, and the program runs eagerly (call 3); run 3 is eager too.
  CountedCopy program{*device, {2}};
  testing::internal::CaptureStderr();
  for (int64_t step = 1; step <= 3; ++step) program.run(step);
  const std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_EQ(program.calls, 4);
  EXPECT_NE(warning.find("could not be captured as a CUDA graph (this step cannot be captured)"),
            std::string::npos)
      << warning;
  EXPECT_TRUE(program.copied());
}

TEST(ExecutionDevice, CudaGraphsReleasedAreCapturedAgain) {
  if (!gpuPresent())
    GTEST_SKIP() << "no GPU";
  auto device = filledCudaDevice(CudaOptions{});
  CountedCopy program{*device, {}};
  program.run(1); // eager
  program.run(2); // captured
  program.run(3); // replayed: no call
  device->releaseGraphs();
  program.run(4); // captured again
  program.run(5); // replayed
  EXPECT_EQ(program.calls, 3);
  EXPECT_TRUE(program.copied());
}

TEST(ExecutionDevice, CudaWithoutGraphsRunsEveryStepEagerly) {
  if (!gpuPresent())
    GTEST_SKIP() << "no GPU";
  CudaOptions options;
  options.graphs = false; // --no-cuda-graphs
  auto device = filledCudaDevice(options);
  // Run 2 is not captured, so its error is the program's, not a fallback.
  CountedCopy program{*device, {2}};
  program.run(1);
  EXPECT_RUNTIME_ERROR(program.run(2), "this step cannot be captured");
  device->synchronize();
  program.run(3);
  EXPECT_EQ(program.calls, 3);
  EXPECT_TRUE(program.copied());
}

TEST(ExecutionDevice, CudaDeviceWithoutAGpuSaysWhy) {
  if (gpuPresent())
    GTEST_SKIP() << "a GPU is present: the no-GPU error does not apply";
#ifdef LLMC_HAVE_CUDA
  EXPECT_RUNTIME_ERROR(makeCudaDevice(1 << 20, CudaOptions{}),
                       "compiled with --target cuda, but no usable CUDA device is present");
#else
  EXPECT_RUNTIME_ERROR(makeCudaDevice(1 << 20, CudaOptions{}),
                       "this build of llmc has no CUDA support");
#endif
}

} // namespace
