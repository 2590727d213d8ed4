//===- SwigluGrad.cpp - SwiGLU's backward in the dgrad GEMM ---------------===//
//
// llmc-fuse's `swiglu-grad`, GeluGrad.cpp's fusion for a SwiGLU MLP. In
// Llama's backward the down projection's data-gradient product feeds the
// SwiGLU's backward:
//   %dh           = matmul %dy, %w_down {transpose_b}
//   %dgate, %dup  = swiglu_grad %gate, %up, %dh
// Both become one llm.matmul_swiglu_grad, placed where the backward was,
// whose kernel applies the backward as the product is stored, so %dh is
// never a tensor of its own. The same conditions as gelu-grad's hold: the
// product feeds only the backward, as its upstream gradient, with no
// transpose of its left operand and a matrix as its weight, in the same
// part of the step.
//
//===----------------------------------------------------------------------===//

#include "passes/fuse/Fusions.h"
#include "passes/lib/FuseMatch.h"

#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

namespace {

/// Fuses `grad` with the product it reads, if the pattern matches.
bool fuseSwigluGradOf(SwigluGradOp grad) {
  MatmulOp product = fusableGradProduct(grad, grad.getDy());
  if (!product)
    return false;
  OpBuilder builder(grad);
  auto fused = MatmulSwigluGradOp::create(
      builder, builder.getFusedLoc({product.getLoc(), grad.getLoc()}), product.getA(),
      product.getB(), grad.getGate(), grad.getUp(), product.getTransposeB());
  replaceGradAndProduct(grad, product, fused);
  return true;
}

} // namespace

unsigned llmc::fuseSwigluGrad(ModuleOp module) {
  SmallVector<SwigluGradOp> grads;
  module.walk([&](SwigluGradOp op) { grads.push_back(op); });
  unsigned fused = 0;
  for (SwigluGradOp grad : grads) fused += fuseSwigluGradOf(grad);
  return fused;
}
