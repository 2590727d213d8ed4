//===- ExecutionDeviceTest.cpp - where programs run -----------------------===//
//
// The CPU device runs a program with streams and events (as
// llmc-place-streams emits them) with the results of one ordered list; the
// CUDA device, on a machine without a GPU, refuses at once with the reason.
//
//===----------------------------------------------------------------------===//

#include "runtime/Executor.h"
#include "runtime/ExecutionDevice.h"
#include "runtime/comm/Communicator.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace llmc;

namespace {

InstructionInfo kernel(const char *name, std::vector<uint32_t> in, std::vector<uint32_t> out) {
  InstructionInfo inst;
  inst.kind = InstructionKind::Kernel;
  inst.kernel = name;
  inst.inputs = std::move(in);
  inst.outputs = std::move(out);
  return inst;
}

InstructionInfo event(InstructionKind kind, int64_t id, int32_t stream) {
  InstructionInfo inst;
  inst.kind = kind;
  inst.event = id;
  inst.stream = stream;
  return inst;
}

/// g = 3; record; (stream 1) wait, g = all_reduce(g) on one rank; record;
/// (stream 0) wait, y = 0.5·g.
ProgramInfo streamedProgram() {
  ProgramInfo p;
  p.name = "train_step";
  p.buffers = {{"g", "grad", 0, DType::F32, {8}, {}}, {"y", "output", 64, DType::F32, {8}, {}}};
  InstructionInfo fill = kernel("fill", {}, {0});
  fill.attrs.setFloat("value", 3.0);
  InstructionInfo reduce;
  reduce.kind = InstructionKind::AllReduce;
  reduce.inputs = {0};
  reduce.outputs = {0};
  reduce.stream = 1;
  InstructionInfo scale = kernel("scale", {0}, {1});
  scale.attrs.setFloat("factor", 0.5);
  p.instructions = {fill,
                    event(InstructionKind::RecordEvent, 0, 0),
                    event(InstructionKind::WaitEvent, 0, 1),
                    reduce,
                    event(InstructionKind::RecordEvent, 1, 1),
                    event(InstructionKind::WaitEvent, 1, 0),
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

TEST(ExecutionDevice, CudaDeviceWithoutAGpuSaysWhy) {
  if (std::system("nvidia-smi -L > /dev/null 2>&1") == 0)
    GTEST_SKIP() << "a GPU is present: the no-GPU error does not apply";
#ifdef LLMC_HAVE_CUDA
  EXPECT_RUNTIME_ERROR(makeCudaDevice(1 << 20, false),
                       "compiled with --target cuda, but no usable CUDA device is present");
#else
  EXPECT_RUNTIME_ERROR(makeCudaDevice(1 << 20, false), "this build of llmc has no CUDA support");
#endif
}

} // namespace
