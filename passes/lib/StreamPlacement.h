//===- StreamPlacement.h - compute and communication streams ----*- C++ -*-===//
//
// Without placement a program is one ordered list (every instruction on
// stream 0). With it kernels go to the compute stream (0), collectives to
// stream 1, each pipeline transfer channel to a stream of its own and the
// copies between device and host memory to the copy stream
// (common/TransferChannel.h), so communication and copies overlap compute
// and the two pipeline directions never wait for each other: a GPU
// enqueues them on CUDA streams, the CPU executor runs communication on a
// thread of its own and copies on another.
// Then nothing orders the streams except the events placement inserts.
// llmc-place-streams and llmc-target-cuda place them.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_STREAMPLACEMENT_H
#define LLMC_PASSES_LIB_STREAMPLACEMENT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

namespace llmc {

/// Puts every instruction of every exec program in `module` (also those of
/// per-stage, nested, modules) on the compute, collective or its transfer
/// channel's stream and inserts the events that order them. Fails, naming `pass`, when
/// `module` holds no lowered program.
mlir::LogicalResult placeStreams(mlir::ModuleOp module, llvm::StringRef pass);

} // namespace llmc

#endif
