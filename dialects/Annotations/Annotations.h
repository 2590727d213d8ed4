//===- Annotations.h - the llmc.* attributes passes share -------*- C++ -*-===//
//
// Every discardable attribute llmc's passes put on the IR, by name, under
// one prefix. The `llmc` dialect (Annotations.td) verifies them: an
// unknown `llmc.*` name, one in a place it cannot stand, or a value of the
// wrong kind is an error naming the attribute.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_DIALECTS_ANNOTATIONS_H
#define LLMC_DIALECTS_ANNOTATIONS_H

#include "mlir/IR/Dialect.h"
#include "llvm/ADT/StringRef.h"

#include "dialects/Annotations/AnnotationsDialect.h.inc"

namespace llmc {

// --- on ops -----------------------------------------------------------------
/// The llm.block (layer) an op came from.
inline constexpr llvm::StringLiteral kBlockNameAttr = "llmc.block_name";
/// The microbatch a cloned op of @train_step belongs to.
inline constexpr llvm::StringLiteral kMicrobatchAttr = "llmc.microbatch";
/// Marks ops autodiff emitted (the backward pass).
inline constexpr llvm::StringLiteral kBackwardAttr = "llmc.backward";
/// On the fill that seeds the backward with d loss / d loss = 1: loss
/// scaling (fp16) seeds with the runtime scale instead.
inline constexpr llvm::StringLiteral kLossSeedAttr = "llmc.loss_seed";
/// Marks forward ops that llmc-recompute cloned into the backward pass.
inline constexpr llvm::StringLiteral kRecomputedAttr = "llmc.recomputed";
/// The schedule action ("F3", "B0.2", "W1") a pipeline stage's op belongs to.
inline constexpr llvm::StringLiteral kActionAttr = "llmc.action";
/// Marks the collectives that synchronise gradients over data-parallel
/// ranks (what llmc-bucket-gradients may fuse).
inline constexpr llvm::StringLiteral kGradientSyncAttr = "llmc.gradient_sync";

// --- on arguments and results ---------------------------------------------------
/// What a train-step argument or result is: param, master, adam_m, adam_v,
/// adam_m_absmax, adam_v_absmax, qat_state, kv_cache (inference), input, output.
inline constexpr llvm::StringLiteral kRoleAttr = "llmc.role";
/// The role of a fake-quantization observer's persistent state.
inline constexpr llvm::StringLiteral kQatStateRole = "qat_state";
/// The name of a state argument or batch input ("adam_m/h.0.attn...", "tokens").
inline constexpr llvm::StringLiteral kNameAttr = "llmc.name";
/// On a result: the argument it overwrites (updated state, written in place).
inline constexpr llvm::StringLiteral kTiedToAttr = "llmc.tied_to";
/// On a result of @grad: the parameter it is the gradient of.
inline constexpr llvm::StringLiteral kGradOfAttr = "llmc.grad_of";
/// How a persistent argument (or its exec.buffer) is sharded: {global_shape
/// = [...], levels = [{axes = [...], dim = d, blocks = b}, ...]}: level i
/// splits dimension d of the previous level's tensor (the global one first)
/// into b equal blocks, each split over the ranks of `axes`; this rank keeps
/// its piece of each.
inline constexpr llvm::StringLiteral kShardAttr = "llmc.shard";

// --- on modules ----------------------------------------------------------------------
/// The model's configuration (family, sizes), from the model builder.
inline constexpr llvm::StringLiteral kModelAttr = "llmc.model";
/// The parallel layout llmc-shard applied (passes/lib/Layout.h).
inline constexpr llvm::StringLiteral kLayoutAttr = "llmc.layout";
/// The pipeline schedule and what the compiler expects of it.
inline constexpr llvm::StringLiteral kPipelineAttr = "llmc.pipeline";
/// On a pipeline stage's nested module: the ranks that run it.
inline constexpr llvm::StringLiteral kStageRanksAttr = "llmc.ranks";

} // namespace llmc

#endif
