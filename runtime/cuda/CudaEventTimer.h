//===- CudaEventTimer.h - --profile's timer on a GPU ------------*- C++ -*-===//
//
// The InstructionTimer (runtime/ExecutionDevice.h) of the CUDA execution
// device: events recorded around each launch, read once the program has
// finished, and the parts kernels mark inside an instruction
// (cuda::PartTimer: cuBLASLt's GEMMs).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_CUDA_CUDAEVENTTIMER_H
#define LLMC_RUNTIME_CUDA_CUDAEVENTTIMER_H

#include "runtime/ExecutionDevice.h"

#include <functional>
#include <memory>

namespace llmc {

/// A timer for `instructions` instructions whose program stream `s` is the
/// CUDA stream `streamOf(s)` (a cudaStream_t).
std::unique_ptr<InstructionTimer> makeCudaEventTimer(size_t instructions,
                                                     std::function<void *(int)> streamOf);

} // namespace llmc

#endif
