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
