//===- NcclCommunicator.h - collectives on GPU memory through NCCL -*- C++ -*-===//
//
// The CUDA backend's communicator: the same interface as MPI and TCP, on
// device pointers, enqueued on the execution device's communication stream
// (program stream 1), so collectives are ordered by the program's events
// and can be captured into the step's CUDA graph. The world communicator
// is bootstrapped by broadcasting NCCL's unique id over the host
// communicator (MPI or TCP); each mesh group is split from it the first
// time a program binds it (ncclCommSplit, collective over the world, in
// the same order on every rank as the MPI groups). On a mesh with a pp axis
// each pipeline transfer channel (common/TransferChannel.h) gets a
// communicator of its own, split from the world at start, whose transfers
// run on the channel's stream; channel 0 is the world on stream 1.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_NCCLCOMMUNICATOR_H
#define LLMC_RUNTIME_COMM_NCCLCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llmc {

class ExecutionDevice;

/// `host` carries the bootstrap (and must outlive the result); `device` is
/// a CUDA execution device whose stream 1 the collectives run on, and whose
/// program waits the result watches on several ranks: a step that NCCL
/// reports an asynchronous error for, or that has not finished after
/// `timeoutSeconds` (a dead or stopped peer), aborts every NCCL
/// communicator and fails saying why (runtime/comm/CommWatchdog.h).
std::unique_ptr<Communicator>
makeNcclCommunicator(const std::vector<std::pair<std::string, int>> &mesh, Communicator &host,
                     ExecutionDevice &device, double timeoutSeconds);

} // namespace llmc

#endif
