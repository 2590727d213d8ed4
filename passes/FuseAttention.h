//===- FuseAttention.h - attention's inputs inside its kernels -*- C++ -*-===//
//
// Part of llmc-fuse (passes/Fuse.cpp), kept in its own file: the slices
// and reshapes that cut a packed qkv projection into attention's q, k and
// v, and the pads and adds that put their gradients back together
// (qkv-split); the rotary embedding of q and k and its inverse on their
// gradients (rope).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_FUSEATTENTION_H
#define LLMC_PASSES_FUSEATTENTION_H

#include "mlir/IR/BuiltinOps.h"

namespace llmc {

/// The fusions' names in `--fuse` lists.
inline constexpr const char *kFuseQkvSplit = "qkv-split";
inline constexpr const char *kFuseRope = "rope";

/// Rewrites, in `module`, each attention whose q, k and v are
///   reshape(slice(%qkv)) at columns 0, H·D and (H + KV)·D of one %qkv
/// into attention_packed %qkv, and each attention_grad of the same q, k, v
/// whose dq, dk, dv are reshaped, padded back to %qkv's shape and summed
/// into attention_packed_grad, whose result is that sum. Returns how many
/// attentions it fused.
unsigned fuseQkvSplits(mlir::ModuleOp module);

/// Rewrites, in `module`, each attention whose q and k are llm.rope of
/// the same positions and rates into attention_rope of the unrotated q and
/// k, and each attention_grad of the same q, k, v whose dq and dk feed
/// only the inverse ropes into attention_rope_grad, whose dq and dk are
/// those ropes' results. Returns how many attentions it fused.
unsigned fuseRopes(mlir::ModuleOp module);

} // namespace llmc

#endif
