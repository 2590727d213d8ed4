//===- StreamPlacement.h - compute and communication streams ----*- C++ -*-===//
//
// Without placement a program is one ordered list (every instruction on
// stream 0). With it kernels go to the compute stream (0) and communication
// to its own stream (1) so collectives overlap compute: a GPU enqueues the
// two on two CUDA streams, the CPU executor runs stream 1 on its own thread.
// Then nothing orders the two streams except the events placement inserts.
// llmc-place-streams and llmc-target-cuda place them.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_STREAMPLACEMENT_H
#define LLMC_PASSES_LIB_STREAMPLACEMENT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

namespace llmc {

/// Puts every instruction of every exec program in `module` (also those of
/// per-stage, nested, modules) on the compute or the communication stream
/// and inserts the events that order them. Fails, naming `pass`, when
/// `module` holds no lowered program.
mlir::LogicalResult placeStreams(mlir::ModuleOp module, llvm::StringRef pass);

} // namespace llmc

#endif
