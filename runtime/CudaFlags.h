//===- CudaFlags.h - the flags that choose a GPU's kernels ------*- C++ -*-===//
//
// --tf32, --attention, --device-comm, --no-gemm-timing and
// --fp8-tensor-cores, which llmc-run
// and llmc-generate (and `llmc generate`) take alike for cuda artifacts.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_CUDAFLAGS_H
#define LLMC_RUNTIME_CUDAFLAGS_H

#include "runtime/ExecutionDevice.h"
#include "runtime/support/ArgParser.h"

namespace llmc {

/// Registers the flags with `args`, storing into `options`.
void addCudaFlags(ArgParser &args, CudaOptions &options);

/// Their lines of a tool's --help text.
extern const char *const kCudaFlagsHelp;

} // namespace llmc

#endif
