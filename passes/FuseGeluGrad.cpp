//===- FuseGeluGrad.cpp - GELU's backward in the dgrad GEMM ---------------===//
//
// llmc-fuse's `gelu-grad`. In an MLP's backward (GPT-2's c_fc, GELU,
// c_proj) the autodiff pass emits
//   %dh   = matmul %dy, %w_proj {transpose_b}   (GELU output's gradient)
//   ...                                          (c_proj's weight gradient)
//   %dpre = gelu_grad %pre, %dh                 (GELU input's gradient)
// The two become one llm.matmul_gelu_grad %dy, %w_proj, %pre whose kernel
// applies GELU's derivative as it stores the product (cuBLASLt's DGELU
// epilogue on CUDA; on the CPU the pass after sgemm), so %dh is never a
// tensor of its own and no gelu_grad kernel reads it back.
//
// The fused op stands where the gelu_grad stood: every operand of the
// product is defined before the product, hence before it, and %dh's
// buffer is not held across the ops between (the weight gradient's
// product). The product must feed only the gelu_grad, with no transpose
// of its left operand, and both ops must belong to the same part of the
// step (block, microbatch, pipeline action, forward, backward or replay).
//
//===----------------------------------------------------------------------===//

#include "passes/FuseGeluGrad.h"
#include "passes/FusePlace.h"

#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {
namespace {

/// Fuses `grad` with the product it reads as dy, if the pattern matches.
bool fuseGeluGrad(GeluGradOp grad) {
  auto product = grad.getDy().getDefiningOp<MatmulOp>();
  if (!product || product.getTransposeA() || !product.getResult().hasOneUse() ||
      !samePlace(product, grad))
    return false;
  auto w = cast<RankedTensorType>(product.getB().getType());
  auto x = cast<RankedTensorType>(product.getA().getType());
  if (w.getRank() != 2 || x.getRank() < 2)
    return false;
  OpBuilder builder(grad);
  auto fused = MatmulGeluGradOp::create(
      builder, builder.getFusedLoc({product.getLoc(), grad.getLoc()}), product.getA(),
      product.getB(), grad.getX(), product.getTransposeB());
  copyPlace(grad, fused);
  grad.getResult().replaceAllUsesWith(fused.getResult());
  grad->erase();
  product->erase();
  return true;
}

} // namespace

unsigned fuseGeluGrads(ModuleOp module) {
  SmallVector<GeluGradOp> grads;
  module.walk([&](GeluGradOp op) { grads.push_back(op); });
  unsigned fused = 0;
  for (GeluGradOp grad : grads)
    fused += fuseGeluGrad(grad);
  return fused;
}

} // namespace llmc
