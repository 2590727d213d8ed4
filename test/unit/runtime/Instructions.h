//===- Instructions.h - hand-built program instructions for tests -*- C++ -*-===//
#ifndef LLMC_TEST_UNIT_RUNTIME_INSTRUCTIONS_H
#define LLMC_TEST_UNIT_RUNTIME_INSTRUCTIONS_H

#include "runtime/Artifact.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace llmc::test {

/// A kernel instruction on stream 0 over buffer indices.
inline InstructionInfo kernelInstruction(const char *name, std::vector<uint32_t> inputs,
                                         std::vector<uint32_t> outputs) {
  InstructionInfo inst;
  inst.kind = InstructionKind::Kernel;
  inst.kernel = name;
  inst.inputs = std::move(inputs);
  inst.outputs = std::move(outputs);
  return inst;
}

/// A record_event or wait_event instruction.
inline InstructionInfo eventInstruction(InstructionKind kind, int64_t id, int32_t stream) {
  InstructionInfo inst;
  inst.kind = kind;
  inst.event = id;
  inst.stream = stream;
  return inst;
}

} // namespace llmc::test

#endif
