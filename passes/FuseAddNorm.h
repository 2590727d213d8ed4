//===- FuseAddNorm.h - residual add + norm fusion (llmc-fuse add-norm) -*- C++ -*-===//
//
// Part of llmc-fuse (passes/Fuse.cpp), kept in its own file: the residual
// stream's add and the norm that reads it, and their backward.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_FUSEADDNORM_H
#define LLMC_PASSES_FUSEADDNORM_H

#include "mlir/IR/BuiltinOps.h"

namespace llmc {

/// The fusion's name in `--fuse` lists.
inline constexpr const char *kFuseAddNorm = "add-norm";

/// Rewrites, in `module`,
///   %s = add %a, %b ; %y = layernorm|rmsnorm %s, ...
/// into add_layernorm|add_rmsnorm (returning %s and %y), and
///   %dx, ... = layernorm_grad|rmsnorm_grad %x, %g, %dy ; %d = add %dx, %e
/// into layernorm_grad_add|rmsnorm_grad_add, where the ops belong to the
/// same part of the step. Returns how many groups it fused.
unsigned fuseAddNorms(mlir::ModuleOp module);

} // namespace llmc

#endif
