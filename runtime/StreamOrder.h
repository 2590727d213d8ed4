//===- StreamOrder.h - every cross-stream hazard has an event ---*- C++ -*-===//
//
// A program's streams run concurrently, ordered only by its events, and
// the arena planner reused bytes assuming one ordered list. So before a
// program runs, the executor proves that no two instructions on different
// streams touch overlapping arena bytes (one of them writing) unless an
// event chain orders them: the earlier one's stream records an event at or
// after it, and the later one's stream waits for that event before it. A
// missing event would be a data race that shows only under some timings;
// this check finds it on every run, on the CPU and on a GPU alike.
//
// The check follows happens-before with one vector clock per stream
// (Lamport; as race detectors do), independently of how llmc-place-streams
// chose its events. It also requires what HostStreams relies on: streams 0
// to kMaxStreams - 1 (common/TransferChannel.h), each event recorded at most
// once and before any wait for it.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_STREAMORDER_H
#define LLMC_RUNTIME_STREAMORDER_H

#include "runtime/Artifact.h"

#include <functional>
#include <string>

namespace llmc {

/// Throws RuntimeError naming both instructions (through `describe`, which
/// gives "instruction i (...)") and the buffers and bytes they share.
void checkStreamOrder(const ProgramInfo &program,
                      const std::function<std::string(size_t)> &describe);

/// Whether any instruction of `program` runs on a stream other than 0.
bool usesStreams(const ProgramInfo &program);

} // namespace llmc

#endif
