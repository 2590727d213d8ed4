//===- Residual.cpp - the residual add in the GEMM's epilogue -------------===//
//
// llmc-fuse's `residual`. The residual stream's add of a layer's output projection, in
// the forward (or a replay of it),
//   %p = linear %x, %w, %b           (GPT-2: what bias left)  or  matmul %x, %w
//   %s = add %p, %r                  (either order; r of p's type: no broadcast)
// becomes one linear %x, %w(, %b) residual %r placed where the add was, so
// the GEMM's epilogue adds the stream and no add kernel reads the product
// back. It runs before add-norm, which then finds these adds gone and fuses
// what is left. The product must feed only the add and belong to the same
// part of the step. Not fused: an addend computed from the product's own
// input, a branch of the same layer (LoRA's scaled adapter, which the
// elementwise fusion chains with its bias and GELU in one kernel).
//
// The backward's sums of gradient products (Llama's dx over dq, dk and dv,
// over gate and up),
//   %a = matmul %dq, %wq ; %b = matmul %dk, %wk ; %s = add %a, %b
// fuse the same way, but at the later product, with the earlier one's
// result as the residual (linear %dk, %wk residual %a where %b was): at
// the add, the product's operands would stay alive across the other
// products' work. A sum whose other addend is made after the product
// stays.
//
// Runs in llmc-fuse (passes/Fuse.cpp) on the finished graph, after every
// pass that rewrites llm ops. It matches exactly the ops the model
// builders, autodiff and the sharding passes produce and leaves anything
// else alone: a value some other op still reads keeps the op that makes it.
//
//===----------------------------------------------------------------------===//

#include "passes/fuse/Fusions.h"
#include "passes/lib/FusePlace.h"

#include "dialects/Annotations/Annotations.h"
#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

namespace {

/// `value` is computed from `from` by ops of its block (`from` itself is
/// not: a residual may be the product's input).
bool computedFrom(Value value, Value from) {
  Operation *start = from.getDefiningOp();
  SmallVector<Value> work = {value};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    // What was computed before `from` cannot read it.
    if (!def || (start && def->getBlock() == start->getBlock() && def->isBeforeInBlock(start)) ||
        !seen.insert(def).second)
      continue;
    for (Value operand : def->getOperands()) {
      if (operand == from)
        return true;
      work.push_back(operand);
    }
  }
  return false;
}

/// The product `value` is, when `add` can take it into a linear's epilogue:
/// a shared-weight matmul, or a linear with a bias and nothing after it,
/// that feeds only `add` in the same part of the step.
Operation *residualProduct(Value value, AddOp add) {
  Operation *def = value.getDefiningOp();
  if (!def || !value.hasOneUse() || !samePlace(def, add))
    return nullptr;
  if (auto matmul = dyn_cast<MatmulOp>(def))
    return !matmul.getTransposeA() && cast<RankedTensorType>(matmul.getB().getType()).getRank() == 2
               ? def
               : nullptr;
  if (auto linear = dyn_cast<LinearOp>(def))
    return linear.getBias() && !linear.getResidual() && !linear.getGelu() ? def : nullptr;
  return nullptr;
}

/// Fuses the residual `add` of a product (either operand) into a linear
/// with that residual, if the pattern matches; true when it did.
bool fuseResidualAt(AddOp add, DominanceInfo &dominance) {
  // A backward sum of gradient products (Llama's dx over q, k and v, over
  // gate and up) fuses at its later product, the earlier one's result as
  // the residual: at the add, the product's operands would stay alive
  // across the other products' work.
  const bool atProduct = add->hasAttr(kBackwardAttr) && !add->hasAttr(kRecomputedAttr);
  for (auto [value, residual] :
       {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())}) {
    Operation *product = residualProduct(value, add);
    if (!product || residual.getType() != add.getType() || value.getType() != add.getType())
      continue;
    Value x = product->getOperand(0), w = product->getOperand(1);
    if (computedFrom(residual, x) || (atProduct && !dominance.properlyDominates(residual, product)))
      continue;
    auto linear = dyn_cast<LinearOp>(product);
    bool transposeB = linear ? linear.getTransposeB() : cast<MatmulOp>(product).getTransposeB();
    // In the forward at the add: the residual may be computed after the
    // product.
    OpBuilder builder(atProduct ? product : add.getOperation());
    auto fused = LinearOp::create(builder, builder.getFusedLoc({product->getLoc(), add.getLoc()}),
                                  x, w, linear ? linear.getBias() : Value(), residual, transposeB,
                                  /*gelu=*/false, /*keep_pre=*/false);
    copyPlace(add, fused);
    add.getResult().replaceAllUsesWith(fused.getY());
    add->erase();
    product->erase();
    return true;
  }
  return false;
}

} // namespace

unsigned llmc::fuseResidual(ModuleOp module) {
  SmallVector<AddOp> adds;
  module.walk([&](AddOp op) { adds.push_back(op); });
  DominanceInfo dominance(module);
  unsigned fused = 0;
  for (AddOp add : adds) fused += fuseResidualAt(add, dominance);
  return fused;
}
