//===- FuseGeluGrad.h - GELU's backward in the dgrad GEMM (llmc-fuse) -*- C++ -*-===//
//
// The `gelu-grad` fusion of llmc-fuse (passes/Fuse.cpp), kept in its own
// file: the data-gradient product of the layer after a GELU and the GELU's
// backward reading it become one llm.matmul_gelu_grad.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_FUSEGELUGRAD_H
#define LLMC_PASSES_FUSEGELUGRAD_H

#include "mlir/IR/BuiltinOps.h"

namespace llmc {

/// The fusion's name in `--fuse` lists.
inline constexpr const char *kFuseGeluGrad = "gelu-grad";

/// Rewrites, in `module`,
///   %d = matmul %dy, %w ; %g = gelu_grad %pre, %d
/// into %g = matmul_gelu_grad %dy, %w, %pre where the product feeds only
/// the gelu_grad and both belong to the same part of the step. Returns
/// how many it fused.
unsigned fuseGeluGrads(mlir::ModuleOp module);

} // namespace llmc

#endif
