//===- AddNorm.cpp - residual add + norm as one kernel --------------------===//
//
// llmc-fuse's `add-norm`. A pre-norm transformer (GPT-2, Llama) adds each
// sublayer's output to the residual stream and normalizes the sum for the
// next sublayer:
//   %s = add %a, %b                    (same shapes: the residual stream)
//   %y = layernorm %s, %g, %beta       (or rmsnorm %s, %g)
// becomes
//   %s, %y = add_layernorm %a, %b, %g, %beta      (or add_rmsnorm)
// which reads a and b once and writes s and y, where the two ops wrote s
// and read it back. The sum stays a result: the stream goes on with it, and
// whatever else reads it (the next residual add, a norm's backward, a
// replay under recomputation) still does, so no value is fused away.
//
// Under tensor parallelism a row-parallel projection's bias is added after
// its all-reduce, so no GEMM epilogue can take it (Bias.cpp's `bias` needs
// the product itself):
//   %p = all_reduce ...
//   %b = add %p, %bias               ([C]: broadcast over the rows)
//   %s = add %a, %b
//   %y = layernorm %s, %g, %beta
// becomes add_layernorm %a, %p, %g, %beta bias %bias when the biased value
// feeds only the residual add: one pass where there were two.
//
// In the backward the gradient through the norm meets the stream's:
//   %dx, %dg(, %db) = layernorm_grad %x, %g, %dy  (or rmsnorm_grad)
//   %d = add %dx, %e                              (either operand order)
// becomes
//   %d, %dg(, %db) = layernorm_grad_add %x, %g, %dy, %e
// when the add is dx's only reader; dx itself is never stored.
//
// Both ops of a group must run in the same part of the step: the same
// block (pipeline stage function), microbatch, pipeline action, forward or
// backward, replayed or not. Unlike the bias fusions (Bias.cpp) this ignores
// the layer name (llmc.block_name): the add that ends one layer feeds the
// norm that starts the next, and by the time llmc-fuse runs the passes
// that treat layers as units (FSDP gathers, recomputation, pipeline
// stages) have already acted and left their marks in those other
// attributes, a collective or a send/recv between the ops, or a different
// function. A collective between add and norm would mean the norm does
// not read the add, so nothing would match; sequence parallelism keeps
// both on the rank's slice of the sequence (its reduce-scatter comes
// before the add, its all-gather after the norm), so they fuse there.
//
// llmc-lower-to-exec lets the fused ops write in place as `add` does (the
// sum over a dying a or b, the backward's result over a dying addend), so
// a fused pair needs no buffer the two ops did not.
//
//===----------------------------------------------------------------------===//

#include "passes/fuse/Fusions.h"
#include "passes/lib/FusePlace.h"

#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dominance.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <type_traits>

using namespace mlir;
using namespace llmc::llm;

namespace llmc {
namespace {

constexpr const char *kBlockName = "llmc.block_name";

/// The discardable attributes that say which part of the step `op` runs
/// in: all of them except the layer's name.
SmallVector<NamedAttribute> partOfStep(Operation *op) {
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute attr : op->getDiscardableAttrs())
    if (attr.getName() != kBlockName)
      attrs.push_back(attr);
  return attrs;
}

bool samePartOfStep(Operation *a, Operation *b) {
  return a->getBlock() == b->getBlock() && partOfStep(a) == partOfStep(b);
}

/// A residual add: both operands and the result of one type (no broadcast).
bool isResidualAdd(AddOp add) {
  return add && add.getLhs().getType() == add.getType() && add.getRhs().getType() == add.getType();
}

/// Every reader of `value` other than `except` runs after `point`.
bool readersAfter(Value value, Operation *except, Operation *point, DominanceInfo &dominance) {
  return llvm::all_of(value.getUsers(), [&](Operation *user) {
    return user == except || dominance.properlyDominates(point, user);
  });
}

/// Where the fused forward op can stand: at the norm when every other
/// reader of the sum comes after it, else at the add when the norm's
/// parameters are there already (a ZeRO-3 gather may come between).
Operation *forwardPoint(AddOp add, Operation *norm, ValueRange params, DominanceInfo &dominance) {
  if (readersAfter(add.getResult(), norm, norm, dominance))
    return norm;
  if (llvm::all_of(params, [&](Value p) { return dominance.properlyDominates(p, add); }))
    return add;
  return nullptr;
}

/// The operand of the residual `add` that is `add %p, %bias` with a [C]
/// bias of `gamma`'s type, read by `add` alone, in its part of the step.
AddOp biasedOperand(AddOp add, Value gamma) {
  for (Value operand : {add.getRhs(), add.getLhs()}) {
    auto biased = operand.getDefiningOp<AddOp>();
    if (biased && operand.hasOneUse() && biased.getLhs().getType() == biased.getType() &&
        biased.getRhs().getType() == gamma.getType() && samePartOfStep(biased, add))
      return biased;
  }
  return {};
}

/// Fuses the residual add feeding `norm` (a LayerNormOp or RMSNormOp), and
/// for a layernorm the bias add before it.
template <typename NormOp> bool fuseForward(NormOp norm, DominanceInfo &dominance) {
  auto add = norm.getX().template getDefiningOp<AddOp>();
  if (!isResidualAdd(add) || !samePartOfStep(add, norm))
    return false;
  SmallVector<Value> params = {norm.getGamma()};
  if constexpr (std::is_same_v<NormOp, LayerNormOp>)
    params.push_back(norm.getBeta());
  auto elementType = cast<RankedTensorType>(add.getType()).getElementType();
  for (Value p : params)
    if (cast<RankedTensorType>(p.getType()).getElementType() != elementType)
      return false;
  Operation *point = forwardPoint(add, norm, params, dominance);
  if (!point)
    return false;

  OpBuilder builder(point);
  SmallVector<Location> locs = {add.getLoc(), norm.getLoc()};
  Operation *fused;
  AddOp biased;
  if constexpr (std::is_same_v<NormOp, LayerNormOp>) {
    Value a = add.getLhs(), b = add.getRhs(), bias;
    if ((biased = biasedOperand(add, norm.getGamma()))) {
      if (a == biased.getResult())
        std::swap(a, b);
      b = biased.getLhs();
      bias = biased.getRhs();
      locs.insert(locs.begin(), biased.getLoc());
    }
    fused = AddLayerNormOp::create(builder, builder.getFusedLoc(locs), a, b, norm.getGamma(),
                                   norm.getBeta(), bias, norm.getEpsilon());
  } else {
    fused = AddRMSNormOp::create(builder, builder.getFusedLoc(locs), add.getLhs(), add.getRhs(),
                                 norm.getGamma(), norm.getEpsilon(), norm.getUnitOffset());
  }
  copyPlace(point, fused);
  norm.getResult().replaceAllUsesWith(fused->getResult(1));
  add.getResult().replaceAllUsesWith(fused->getResult(0));
  norm->erase();
  add->erase();
  if (biased)
    biased->erase();
  return true;
}

/// Fuses `grad` (a LayerNormGradOp or RMSNormGradOp) with the add that is
/// its dx's only reader.
template <typename GradOp> bool fuseBackward(GradOp grad, DominanceInfo &dominance) {
  Value dx = grad.getDx();
  if (!dx.hasOneUse())
    return false;
  auto add = dyn_cast<AddOp>(*dx.getUsers().begin());
  if (!isResidualAdd(add) || !samePartOfStep(grad, add))
    return false;
  Value addend = add.getLhs() == dx ? add.getRhs() : add.getLhs();
  // At the norm's backward when the addend is made by then: x and dy are
  // not kept alive until the add. Else at the add, unless dgamma (or
  // dbeta) is read before it.
  Operation *point = grad;
  if (!dominance.properlyDominates(addend, grad)) {
    point = add;
    for (Value result : grad->getResults().drop_front())
      if (!readersAfter(result, nullptr, add, dominance))
        return false;
  }

  OpBuilder builder(point);
  Location loc = builder.getFusedLoc({grad.getLoc(), add.getLoc()});
  Operation *fused;
  if constexpr (std::is_same_v<GradOp, LayerNormGradOp>)
    fused = LayerNormGradAddOp::create(builder, loc, grad.getX(), grad.getGamma(), grad.getDy(),
                                       addend, grad.getEpsilon());
  else
    fused = RMSNormGradAddOp::create(builder, loc, grad.getX(), grad.getGamma(), grad.getDy(),
                                     addend, grad.getEpsilon(), grad.getUnitOffset());
  copyPlace(point, fused);
  add.getResult().replaceAllUsesWith(fused->getResult(0));
  for (unsigned i = 1; i < grad->getNumResults(); ++i)
    grad->getResult(i).replaceAllUsesWith(fused->getResult(i));
  add->erase();
  grad->erase();
  return true;
}

} // namespace

unsigned fuseAddNorm(ModuleOp module) {
  SmallVector<Operation *> norms;
  module.walk([&](Operation *op) {
    if (isa<LayerNormOp, RMSNormOp, LayerNormGradOp, RMSNormGradOp>(op))
      norms.push_back(op);
  });
  DominanceInfo dominance(module);
  unsigned fused = 0;
  for (Operation *op : norms) {
    bool done = TypeSwitch<Operation *, bool>(op)
                    .Case([&](LayerNormOp o) { return fuseForward(o, dominance); })
                    .Case([&](RMSNormOp o) { return fuseForward(o, dominance); })
                    .Case([&](LayerNormGradOp o) { return fuseBackward(o, dominance); })
                    .Case([&](RMSNormGradOp o) { return fuseBackward(o, dominance); })
                    .Default([](Operation *) { return false; });
    fused += done;
  }
  return fused;
}

} // namespace llmc
