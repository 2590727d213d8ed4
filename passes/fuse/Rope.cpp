//===- Rope.cpp - attention rotating q and k as it loads them -------------===//
//
// llmc-fuse's `rope`. Llama rotates q and k before attention, and the
// rotation's backward rotates their gradients back:
//   %qr = rope %q {theta, scaling}       %kr = rope %k {theta, scaling}
//   %o, %lse = attention %qr, %kr, %v
//   %dqr, %dkr, %dv = attention_grad %qr, %kr, %v, %o, %lse, %do
//   %dq = rope %dqr {inverse}            %dk = rope %dkr {inverse}
// Each rope reads and writes a tensor of q's or k's size. The attention
// kernels rotate the q and k tiles as they load them (rounded to the
// storage type as rope stores them) and dq, dk as they store them:
//   %o, %lse = attention_rope %q, %k, %v {theta, scaling}
//   %dq, %dk, %dv = attention_rope_grad %q, %k, %v, %o, %lse, %do {theta, scaling}
// The backward keeps the unrotated q and k instead of the rotated ones,
// as large. It fuses when both q and k are rotated by one rotation (same
// rates, same positions), the rotated values are read only by attentions
// and gradients of the same inputs, and each gradient's dq and dk only by
// the inverse ropes.
//
//===----------------------------------------------------------------------===//

#include "passes/fuse/Fusions.h"
#include "passes/lib/FuseMatch.h"
#include "passes/lib/FusePlace.h"

#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

namespace {

/// `a` and `b` rotate alike: the same rates, positions and range.
bool sameRotation(RopeOp a, RopeOp b) {
  return a.getPositions() == b.getPositions() && a.getTheta() == b.getTheta() &&
         a.getPositionLimitAttr() == b.getPositionLimitAttr() &&
         a.getScalingFactorAttr() == b.getScalingFactorAttr() &&
         a.getLowFreqFactorAttr() == b.getLowFreqFactorAttr() &&
         a.getHighFreqFactorAttr() == b.getHighFreqFactorAttr() &&
         a.getOriginalMaxPositionsAttr() == b.getOriginalMaxPositionsAttr();
}

/// The inverse of `rope` that is `gradient`'s only reader, if so.
RopeOp inverseOf(Value gradient, RopeOp rope) {
  if (!gradient.hasOneUse())
    return {};
  auto inverse = dyn_cast<RopeOp>(*gradient.getUsers().begin());
  return inverse && inverse.getInverse() && sameRotation(inverse, rope) ? inverse : RopeOp();
}

/// Fuses the ropes of the q and k that `anchor` (an attention or an
/// attention_grad) reads into every attention and attention_grad reading
/// them, and the inverse ropes after those gradients, if the pattern
/// matches; adds what it erases to `erased`.
bool fuseRopeAt(Operation *anchor, DominanceInfo &dominance, DenseSet<Operation *> &erased) {
  auto q = anchor->getOperand(0).getDefiningOp<RopeOp>();
  auto k = anchor->getOperand(1).getDefiningOp<RopeOp>();
  // One table for all positions of a training step: no position_limit.
  if (!q || !k || q == k || q.getInverse() || k.getInverse() || !sameRotation(q, k) ||
      q.getPositionLimitAttr())
    return false;
  Value v = anchor->getOperand(2);
  FailureOr<AttentionReaders> readers =
      attentionReadersOf({q.getResult(), k.getResult()}, q.getResult(), k.getResult(), v);
  if (failed(readers))
    return false;
  struct Backward {
    AttentionGradOp grad;
    RopeOp dq, dk;
  };
  SmallVector<Backward> backwards;
  for (AttentionGradOp grad : readers->grads) {
    Backward b{grad, inverseOf(grad.getDq(), q), inverseOf(grad.getDk(), k)};
    if (!b.dq || !b.dk || !dominance.properlyDominates(q.getX(), grad) ||
        !dominance.properlyDominates(k.getX(), grad))
      return false;
    backwards.push_back(b);
  }

  for (Backward &b : backwards) {
    AttentionGradOp g = b.grad;
    OpBuilder builder(g);
    auto fused = AttentionRopeGradOp::create(
        builder, builder.getFusedLoc({g.getLoc(), b.dq.getLoc(), b.dk.getLoc()}), q.getX(),
        k.getX(), g.getV(), g.getOut(), g.getLse(), g.getDout(), q.getPositions(),
        g.getSegmentIds(), g.getScale(), g.getCausal(), q.getTheta(), q.getScalingFactorAttr(),
        q.getLowFreqFactorAttr(), q.getHighFreqFactorAttr(), q.getOriginalMaxPositionsAttr(),
        g.getWindowAttr(), g.getSoftcapAttr());
    copyPlace(g, fused);
    b.dq.getResult().replaceAllUsesWith(fused.getDq());
    b.dk.getResult().replaceAllUsesWith(fused.getDk());
    g.getDv().replaceAllUsesWith(fused.getDv());
    b.dq->erase();
    b.dk->erase();
    erased.insert(g);
    g->erase();
  }
  for (AttentionOp forward : readers->forwards) {
    OpBuilder builder(forward);
    auto fused = AttentionRopeOp::create(
        builder, builder.getFusedLoc({q.getLoc(), k.getLoc(), forward.getLoc()}), q.getX(),
        k.getX(), forward.getV(), q.getPositions(), forward.getSegmentIds(), forward.getScale(),
        forward.getCausal(), q.getTheta(), q.getScalingFactorAttr(), q.getLowFreqFactorAttr(),
        q.getHighFreqFactorAttr(), q.getOriginalMaxPositionsAttr(), forward.getWindowAttr(),
        forward.getSoftcapAttr());
    copyPlace(forward, fused);
    forward.getOut().replaceAllUsesWith(fused.getOut());
    forward.getLse().replaceAllUsesWith(fused.getLse());
    erased.insert(forward);
    forward->erase();
  }
  q->erase();
  k->erase();
  return true;
}

} // namespace

unsigned llmc::fuseRope(ModuleOp module) { return fuseEachAttention(module, fuseRopeAt); }
