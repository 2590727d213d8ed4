//===- HostStagedCommunicator.h - GPU buffers through a host transport -*- C++ -*-===//
//
// NCCL refuses two ranks on one GPU, so the CUDA programs of several ranks
// could never be checked on a machine with one GPU. This communicator runs
// every collective and transfer of GPU buffers through the host transport
// (MPI or TCP) instead, staging through pinned host memory as PyTorch's
// gloo backend does for CUDA tensors: it waits for the communication
// stream, copies the input down, runs the host operation and copies the
// result up on the communication stream. The host calls block the thread
// that launches the program, in program order, so the device must run it
// eagerly (no CUDA graph can hold a host collective): what the runtime
// chooses when ranks share a GPU (llmc-run --device-comm).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_HOSTSTAGEDCOMMUNICATOR_H
#define LLMC_RUNTIME_COMM_HOSTSTAGEDCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <memory>

namespace llmc {

class ExecutionDevice;

/// `host` carries the data (and must outlive the result); `device` is a
/// CUDA execution device whose stream 1 the copies run on.
std::unique_ptr<Communicator> makeHostStagedCommunicator(Communicator &host,
                                                         ExecutionDevice &device);

} // namespace llmc

#endif
