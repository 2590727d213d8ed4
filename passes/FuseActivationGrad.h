//===- FuseActivationGrad.h - activation backward in the dgrad GEMM -*- C++ -*-===//
//
// The `gelu-grad` and `swiglu-grad` fusions of llmc-fuse (passes/Fuse.cpp),
// kept in their own file: the data-gradient product of the layer after an
// MLP's activation and the activation's backward reading it become one
// llm.matmul_gelu_grad or llm.matmul_swiglu_grad.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_FUSEACTIVATIONGRAD_H
#define LLMC_PASSES_FUSEACTIVATIONGRAD_H

#include "mlir/IR/BuiltinOps.h"

namespace llmc {

/// The fusions' names in `--fuse` lists.
inline constexpr const char *kFuseGeluGrad = "gelu-grad";
inline constexpr const char *kFuseSwigluGrad = "swiglu-grad";

/// Rewrites, in `module`,
///   %d = matmul %dy, %w ; %g = gelu_grad %pre, %d
/// into %g = matmul_gelu_grad %dy, %w, %pre (`gelu`), and
///   %d = matmul %dy, %w ; %dg, %du = swiglu_grad %gate, %up, %d
/// into %dg, %du = matmul_swiglu_grad %dy, %w, %gate, %up (`swiglu`),
/// where the product feeds only the activation's backward and both belong
/// to the same part of the step. Returns how many it fused.
unsigned fuseActivationGrads(mlir::ModuleOp module, bool gelu, bool swiglu);

} // namespace llmc

#endif
