//===- GeluGrad.cpp - GELU's backward in the dgrad GEMM -------------------===//
//
// llmc-fuse's `gelu-grad` (SwigluGrad.cpp: `swiglu-grad`). In an MLP's
// backward the autodiff pass emits the down projection's data-gradient
// product, the gradient of the activation's output, and then the
// activation's backward reading it beside what the forward kept:
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

#include "passes/fuse/Fusions.h"
#include "passes/lib/FuseMatch.h"
#include "passes/lib/FusePlace.h"

#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {
namespace {

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

/// Fuses `grad` with the product it reads, if the pattern matches.
bool fuseGeluGradOf(GeluGradOp grad) {
  MatmulOp product = fusableGradProduct(grad, grad.getDy());
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
  replaceGradAndProduct(grad, product, fused);
  return true;
}

} // namespace

unsigned fuseGeluGrad(ModuleOp module) {
  SmallVector<GeluGradOp> grads;
  module.walk([&](GeluGradOp op) { grads.push_back(op); });
  unsigned fused = 0;
  for (GeluGradOp grad : grads) fused += fuseGeluGradOf(grad);
  return fused;
}

} // namespace llmc
