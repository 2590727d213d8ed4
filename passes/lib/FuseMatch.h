//===- FuseMatch.h - what several fusions match alike -----------*- C++ -*-===//
//
// The fusions of passes/fuse/ come in families that match the same ops:
// bias and bias-gelu a matmul and its bias add; gelu-grad and swiglu-grad
// the data-gradient product an activation's backward reads; qkv-split and
// rope the attentions and attention_grads of one q, k and v.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_FUSEMATCH_H
#define LLMC_PASSES_LIB_FUSEMATCH_H

#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dominance.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace llmc {

/// Erases `op` when nothing reads it any more.
void eraseIfDead(mlir::Operation *op);

/// Fuses the matmul before the bias `add` and the add (and, when
/// `withGelu`, a gelu reading the sum) into one llm.linear, if the pattern
/// matches; true when it did. With `withGelu`, an add no gelu reads stays.
bool fuseBiasAdd(llm::AddOp add, bool withGelu);

/// The product the activation backward `grad` reads as its upstream
/// gradient `dy`, when it may fuse into it.
llm::MatmulOp fusableGradProduct(mlir::Operation *grad, mlir::Value dy);

/// Replaces `grad` and `product` by `fused`, which stands where `grad`
/// was: grad's results are fused's first ones.
void replaceGradAndProduct(mlir::Operation *grad, llm::MatmulOp product, mlir::Operation *fused);

/// The attentions and attention_grads reading exactly `q`, `k`, `v` as
/// their first three operands.
struct AttentionReaders {
  llvm::SmallVector<llm::AttentionOp> forwards;
  llvm::SmallVector<llm::AttentionGradOp> grads;
};

/// The readers of `inputs` when they are all attentions and
/// attention_grads of `q`, `k`, `v` (each read once per op); failure when
/// anything else reads one.
mlir::FailureOr<AttentionReaders> attentionReadersOf(mlir::ValueRange inputs, mlir::Value q,
                                                     mlir::Value k, mlir::Value v);

/// Applies `fuse(anchor, dominance, erased)` to every attention and
/// attention_grad of `module` not erased by an earlier application;
/// returns how many applied.
template <typename Fuse> unsigned fuseEachAttention(mlir::ModuleOp module, Fuse fuse) {
  llvm::SmallVector<mlir::Operation *> anchors;
  module.walk([&](mlir::Operation *op) {
    if (mlir::isa<llm::AttentionOp, llm::AttentionGradOp>(op))
      anchors.push_back(op);
  });
  mlir::DominanceInfo dominance(module);
  llvm::DenseSet<mlir::Operation *> erased;
  unsigned fused = 0;
  for (mlir::Operation *anchor : anchors)
    if (!erased.contains(anchor))
      fused += fuse(anchor, dominance, erased);
  return fused;
}

} // namespace llmc

#endif
