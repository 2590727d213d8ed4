//===- TensorParallel.h - Megatron tensor parallelism -----------*- C++ -*-===//
#ifndef LLMC_PASSES_LIB_TENSORPARALLEL_H
#define LLMC_PASSES_LIB_TENSORPARALLEL_H

#include "dialects/Dist/DistDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace llmc {

/// Splits the attention heads and MLP of every llm.block of `forward` over
/// mesh axis `axis` of size `tp` (column/row-parallel projections with f/g
/// collectives). `forwardOnly` (a generation step, never differentiated)
/// lets the experts' partial sums pass their combine, whose backward would
/// read them whole. Errors name the op that cannot be parallelised.
mlir::LogicalResult applyTensorParallel(mlir::func::FuncOp forward, llvm::StringRef axis,
                                        int64_t tp, bool forwardOnly = false);

/// After applyTensorParallel: splits the residual stream (everything outside
/// the column/row-parallel regions that works position by position) along
/// the sequence over the same axis (Megatron sequence parallelism).
mlir::LogicalResult applySequenceParallel(mlir::func::FuncOp forward, llvm::StringRef axis,
                                          int64_t tp);

} // namespace llmc

#endif
