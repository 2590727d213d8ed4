//===- Inlining.h - straight-line functions ---------------------*- C++ -*-===//
//
// Autodiff, lowering and the passes between work on straight-line code:
// llm.block regions and calls are inlined into the function that holds them.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_INLINING_H
#define LLMC_PASSES_LIB_INLINING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace llmc {

/// Inlines every llm.block of `func` into its parent block, tagging the moved
/// ops with kBlockNameAttr.
void flattenBlocks(mlir::func::FuncOp func);

/// Inlines every func.call in `func` whose callee is defined in `module`.
mlir::LogicalResult inlineCalls(mlir::ModuleOp module, mlir::func::FuncOp func);

} // namespace llmc

#endif
