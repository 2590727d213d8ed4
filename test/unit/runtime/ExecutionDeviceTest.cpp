//===- ExecutionDeviceTest.cpp - where programs run -----------------------===//
//
// The CPU device runs a program with streams and events (as
// llmc-place-streams emits them) with the results of one ordered list; the
// CUDA device, on a machine without a GPU, refuses at once with the reason.
// On either, an error of host work (a host kernel, a host collective whose
// peer died) reaches the caller of the program, and the host work after it
// is skipped.
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
  if (std::system("nvidia-smi -L > /dev/null 2>&1") == 0)
    devices.push_back(makeCudaDevice(128, CudaOptions{}));
  for (auto &device : devices) {
    int before = 0, after = 0;
    EXPECT_EQ(failingHostWork(*device, before, after), "rank 0: lost the connection to rank 1");
    EXPECT_EQ(before, 1);
    EXPECT_EQ(after, 0) << "host work after a failed one is skipped";
    device->synchronize(); // the error was taken once
  }
}

TEST(ExecutionDevice, CudaDeviceWithoutAGpuSaysWhy) {
  if (std::system("nvidia-smi -L > /dev/null 2>&1") == 0)
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
