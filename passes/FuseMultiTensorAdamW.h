//===- FuseMultiTensorAdamW.h - the step's AdamW updates as one op -*- C++ -*-===//
//
// Part of llmc-fuse (passes/Fuse.cpp), kept in its own file: the optimizer
// step's per-tensor llm.adamw ops, and the casts of their fp32 masters to
// the working precision, grouped into llm.multi_tensor_adamw.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_FUSEMULTITENSORADAMW_H
#define LLMC_PASSES_FUSEMULTITENSORADAMW_H

#include "mlir/IR/BuiltinOps.h"

namespace llmc {

/// The fusion's name in `--fuse` lists.
inline constexpr const char *kFuseMultiTensorAdamW = "multi-tensor-adamw";

/// Groups, in every block of `module`, maximal runs of llm.adamw ops that
/// share their step inputs and hyperparameters (weight decay 0 or the
/// group's) into one llm.multi_tensor_adamw at the run's first update,
/// together with the cast that narrows each updated fp32 master and the
/// cast that widens each gradient for it. Returns how many groups it made.
unsigned fuseMultiTensorAdamW(mlir::ModuleOp module);

} // namespace llmc

#endif
