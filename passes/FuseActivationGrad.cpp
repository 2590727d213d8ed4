//===- FuseActivationGrad.cpp - activation backward in the dgrad GEMM -----===//
//
// llmc-fuse's `gelu-grad` and `swiglu-grad`. In an MLP's backward the
// autodiff pass emits the down projection's data-gradient product, the
// gradient of the activation's output, and then the activation's backward
// reading it beside what the forward kept:
//   %dh   = matmul %dy, %w_down {transpose_b}     (GPT-2's c_proj)
//   ...                                            (its weight gradient)
//   %dpre = gelu_grad %pre, %dh
// or, in a SwiGLU MLP (Llama's down_proj),
//   %dgate, %dup = swiglu_grad %gate, %up, %dh
// Each pair becomes one llm.matmul_gelu_grad / llm.matmul_swiglu_grad
// whose kernel applies the backward as the product is stored (cuBLASLt's
// DGELU epilogue for GELU on CUDA; the pass after the GEMM elsewhere), so
// %dh is never a tensor of its own. GPT-2's c_fc has a bias, whose
// gradient is a reduce_sum of %dpre's rows: the GELU's fused op takes it
// too (`bias_grad`; cuBLASLt's DGELU_BGRAD, and on the CPU the sum made
// as %dpre is stored), so nothing reads %dpre again for it.
//
// The fused op stands where the activation's backward stood: every
// operand of the product is defined before the product, hence before it,
// and %dh's buffer is not held across the ops between (the weight
// gradient's product). The product must feed only the backward, as its
// upstream gradient, with no transpose of its left operand and a matrix
// as its weight, and both ops must belong to the same part of the step
// (block, microbatch, pipeline action, forward, backward or replay).
//
//===----------------------------------------------------------------------===//

#include "passes/FuseActivationGrad.h"
#include "passes/FusePlace.h"

#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {
namespace {

/// The product `grad` reads as its upstream gradient `dy`, when it may
/// fuse into it.
MatmulOp fusableProduct(Operation *grad, Value dy) {
  auto product = dy.getDefiningOp<MatmulOp>();
  if (!product || product.getTransposeA() || !product.getResult().hasOneUse() ||
      !samePlace(product, grad))
    return nullptr;
  if (cast<RankedTensorType>(product.getB().getType()).getRank() != 2 ||
      cast<RankedTensorType>(product.getA().getType()).getRank() < 2)
    return nullptr;
  return product;
}

/// Replaces `grad` and `product` by `fused`, which stands where `grad`
/// was: grad's results are fused's first ones.
void replace(Operation *grad, MatmulOp product, Operation *fused) {
  copyPlace(grad, fused);
  for (auto [old, now] : llvm::zip(grad->getResults(), fused->getResults()))
    old.replaceAllUsesWith(now);
  grad->erase();
  product->erase();
}

/// The reduce_sum of `dpre`'s rows (the bias gradient of the layer GELU
/// follows) in the same part of the step, if any.
ReduceSumOp biasGradientOf(GeluGradOp grad) {
  auto dpre = cast<RankedTensorType>(grad.getType());
  for (Operation *user : grad->getUsers())
    if (auto sum = dyn_cast<ReduceSumOp>(user);
        sum && samePlace(sum, grad) &&
        cast<RankedTensorType>(sum.getType()).getShape() == dpre.getShape().take_back())
      return sum;
  return nullptr;
}

bool fuseGeluGrad(GeluGradOp grad) {
  MatmulOp product = fusableProduct(grad, grad.getDy());
  if (!product)
    return false;
  ReduceSumOp biasGrad = biasGradientOf(grad);
  OpBuilder builder(grad);
  SmallVector<Location> locs = {product.getLoc(), grad.getLoc()};
  if (biasGrad)
    locs.push_back(biasGrad.getLoc());
  auto fused = MatmulGeluGradOp::create(builder, builder.getFusedLoc(locs), product.getA(),
                                        product.getB(), grad.getX(), product.getTransposeB(),
                                        /*bias_grad=*/static_cast<bool>(biasGrad));
  if (biasGrad) {
    biasGrad.getResult().replaceAllUsesWith(fused.getDb());
    biasGrad->erase();
  }
  replace(grad, product, fused);
  return true;
}

bool fuseSwigluGrad(SwigluGradOp grad) {
  MatmulOp product = fusableProduct(grad, grad.getDy());
  if (!product)
    return false;
  OpBuilder builder(grad);
  auto fused = MatmulSwigluGradOp::create(
      builder, builder.getFusedLoc({product.getLoc(), grad.getLoc()}), product.getA(),
      product.getB(), grad.getGate(), grad.getUp(), product.getTransposeB());
  replace(grad, product, fused);
  return true;
}

} // namespace

unsigned fuseActivationGrads(ModuleOp module, bool gelu, bool swiglu) {
  SmallVector<Operation *> grads;
  module.walk([&](Operation *op) {
    if ((gelu && isa<GeluGradOp>(op)) || (swiglu && isa<SwigluGradOp>(op)))
      grads.push_back(op);
  });
  unsigned fused = 0;
  for (Operation *grad : grads) {
    if (auto g = dyn_cast<GeluGradOp>(grad))
      fused += fuseGeluGrad(g);
    else
      fused += fuseSwigluGrad(cast<SwigluGradOp>(grad));
  }
  return fused;
}

} // namespace llmc
