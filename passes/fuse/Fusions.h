//===- Fusions.h - the fusions of llmc-fuse ---------------------*- C++ -*-===//
//
// One function per `--fuse` name, each in passes/fuse/<Name>.cpp (qkv-split
// in QkvSplit.cpp). Each rewrites every group of ops of `module` it
// matches and returns how many it fused; passes/Fuse.cpp runs the ones a
// list names, in an order where each finds what those before it left.
// docs/fusion.md says what each fuses and what it leaves alone.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_FUSE_FUSIONS_H
#define LLMC_PASSES_FUSE_FUSIONS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

namespace llmc {

/// The fusions' names in `--fuse` lists.
inline constexpr const char *kFuseLinearCrossEntropy = "linear-cross-entropy";
inline constexpr const char *kFuseBias = "bias";
inline constexpr const char *kFuseBiasGelu = "bias-gelu";
inline constexpr const char *kFuseBiasGrad = "bias-grad";
inline constexpr const char *kFuseResidual = "residual";
inline constexpr const char *kFuseGeluGrad = "gelu-grad";
inline constexpr const char *kFuseSwigluGrad = "swiglu-grad";
inline constexpr const char *kFuseAddNorm = "add-norm";
inline constexpr const char *kFuseQkvSplit = "qkv-split";
inline constexpr const char *kFuseRope = "rope";
inline constexpr const char *kFuseMultiTensorAdamW = "multi-tensor-adamw";
inline constexpr const char *kFuseElementwise = "elementwise";

/// The LM head and its loss (and their backward) as one op computing the
/// logits `chunkBytes` at a time (held as `target`'s kernels hold them),
/// also a vocabulary-parallel head around its collectives.
unsigned fuseLinearCrossEntropy(mlir::ModuleOp module, double chunkBytes, llvm::StringRef target);

/// A shared-weight matmul and its bias add as one llm.linear.
unsigned fuseBias(mlir::ModuleOp module);

/// A shared-weight matmul, its bias add and the GELU after it as one
/// llm.linear (keeping the biased value where gelu_grad reads it).
unsigned fuseBiasGelu(mlir::ModuleOp module);

/// A layer's weight and bias gradients as one llm.linear_weight_grad.
unsigned fuseBiasGrad(mlir::ModuleOp module);

/// The residual stream's add of a product in the product's epilogue.
unsigned fuseResidual(mlir::ModuleOp module);

/// The data-gradient product and the gelu_grad reading it as one
/// llm.matmul_gelu_grad (with the bias gradient of the layer before).
unsigned fuseGeluGrad(mlir::ModuleOp module);

/// The data-gradient product and the swiglu_grad reading it as one
/// llm.matmul_swiglu_grad.
unsigned fuseSwigluGrad(mlir::ModuleOp module);

/// The residual add and the norm of its sum, and the norm's backward and
/// the add accumulating the stream's gradient.
unsigned fuseAddNorm(mlir::ModuleOp module);

/// Rewrites each attention whose q, k and v are
///   reshape(slice(%qkv)) at columns 0, H·D and (H + KV)·D of one %qkv
/// into attention_packed %qkv, and each attention_grad of the same q, k, v
/// whose dq, dk, dv are reshaped, padded back to %qkv's shape and summed
/// into attention_packed_grad, whose result is that sum.
unsigned fuseQkvSplit(mlir::ModuleOp module);

/// Rewrites each attention whose q and k are llm.rope of the same
/// positions and rates into attention_rope of the unrotated q and k, and
/// each attention_grad of the same q, k, v whose dq and dk feed only the
/// inverse ropes into attention_rope_grad, whose dq and dk are those
/// ropes' results.
unsigned fuseRope(mlir::ModuleOp module);

/// Runs of the step's llm.adamw updates (with their casts) as one
/// llm.multi_tensor_adamw.
unsigned fuseMultiTensorAdamW(mlir::ModuleOp module);

/// Chains of elementwise ops as one llm.fused_elementwise each.
unsigned fuseElementwise(mlir::ModuleOp module);

} // namespace llmc

#endif
