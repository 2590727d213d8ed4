//===- Utils.h - helpers shared by llmc passes ------------------*- C++ -*-===//
#ifndef LLMC_PASSES_UTILS_H
#define LLMC_PASSES_UTILS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

namespace llmc {

/// Discardable attribute naming the llm.block an op came from.
inline constexpr llvm::StringLiteral kBlockNameAttr = "llm.block_name";
/// Argument/result attributes the training pipeline uses to describe state.
inline constexpr llvm::StringLiteral kRoleAttr = "llmc.role";
inline constexpr llvm::StringLiteral kNameAttr = "llmc.name";
inline constexpr llvm::StringLiteral kTiedToAttr = "llmc.tied_to";
inline constexpr llvm::StringLiteral kGradOfAttr = "llmc.grad_of";
/// Marks ops autodiff emitted (the backward pass).
inline constexpr llvm::StringLiteral kBackwardAttr = "llm.backward";
/// The microbatch a cloned op of @train_step belongs to (ZeRO-3 only).
inline constexpr llvm::StringLiteral kMicrobatchAttr = "llm.microbatch";
/// How a persistent argument is sharded: {axes = [...], dim = 0,
/// global_shape = [...]}.
inline constexpr llvm::StringLiteral kShardAttr = "llmc.shard";

/// Inlines every llm.block of `func` into its parent block, tagging the moved
/// ops with kBlockNameAttr.
void flattenBlocks(mlir::func::FuncOp func);

/// Inlines every func.call in `func` whose callee is defined in `module`.
mlir::LogicalResult inlineCalls(mlir::ModuleOp module, mlir::func::FuncOp func);

/// The function named `name` in `module`, or null.
mlir::func::FuncOp lookupFunc(mlir::ModuleOp module, llvm::StringRef name);

} // namespace llmc

#endif
