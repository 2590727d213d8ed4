//===- CollectiveBindingTest.cpp - collective sizes checked when binding --===//
//
// A collective's output size follows from its input's and its group's. A
// program whose buffers disagree (a corrupted or hand-edited artifact) is
// refused when it is bound, naming the instruction, before a communicator
// could read or write past either buffer.
//
//===----------------------------------------------------------------------===//

#include "runtime/ExecutionDevice.h"
#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"
#include "runtime/support/Error.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

using namespace llmc;

namespace {

/// One collective of `kind` from buffer "in" (f32[inSize]) to "out"
/// (f32[outSize]) on stream 0, the CPU's choice.
ProgramInfo collectiveProgram(InstructionKind kind, int64_t inSize, int64_t outSize) {
  ProgramInfo p;
  p.name = "train_step";
  p.buffers = {{"in", "activation", 0, DType::F32, {inSize}, {}},
               {"out", "output", 256, DType::F32, {outSize}, {}}};
  InstructionInfo inst;
  inst.kind = kind;
  inst.inputs = {0};
  inst.outputs = {1};
  p.instructions = {inst};
  return p;
}

void bind(const ProgramInfo &p) {
  auto device = makeCpuDevice(512);
  auto comm = makeSingleRankCommunicator();
  (void)BoundProgram(p, *device, *comm, 0);
}

TEST(CollectiveBinding, MatchingSizesBindOnOneRank) {
  for (InstructionKind kind :
       {InstructionKind::AllReduce, InstructionKind::AllGather, InstructionKind::ReduceScatter,
        InstructionKind::Broadcast, InstructionKind::Reduce, InstructionKind::AllToAll,
        InstructionKind::AllSlice})
    EXPECT_NO_THROW(bind(collectiveProgram(kind, 8, 8))) << instructionKindName(kind);
}

TEST(CollectiveBinding, AnOutputOfTheWrongSizeIsRefusedByName) {
  EXPECT_RUNTIME_ERROR(bind(collectiveProgram(InstructionKind::AllGather, 8, 16)),
                       "instruction 0 (all_gather): all_gather over 1 ranks cannot take input "
                       "f32[8] to output f32[16]");
  EXPECT_RUNTIME_ERROR(bind(collectiveProgram(InstructionKind::ReduceScatter, 16, 8)),
                       "reduce_scatter over 1 ranks cannot take input f32[16] to output f32[8]");
  EXPECT_RUNTIME_ERROR(bind(collectiveProgram(InstructionKind::AllSlice, 8, 4)),
                       "all_slice over 1 ranks");
  EXPECT_RUNTIME_ERROR(bind(collectiveProgram(InstructionKind::AllReduce, 8, 4)),
                       "all_reduce over 1 ranks");
  EXPECT_RUNTIME_ERROR(bind(collectiveProgram(InstructionKind::AllToAll, 4, 8)),
                       "all_to_all over 1 ranks");
}

} // namespace
