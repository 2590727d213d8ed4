//===- MultiTensorAdamW.cpp - the step's AdamW updates as one op ----------===//
//
// llmc-fuse's `multi-tensor-adamw`. The optimizer (passes/Optimizer.cpp)
// updates each trainable tensor on its own:
//   %g32       = cast %g                 (bf16 gradients: widened for it)
//   %p1, %m1, %v1 = adamw %p, %g32, %m, %v, %lr, %step norm %n
//   %w         = cast %p1                (mixed precision: the master narrowed)
// and each becomes a kernel launch or two. This fusion joins a run of them
// into one llm.multi_tensor_adamw, one launch for the step's updates.
//
// Where the group goes. All of a step's updates read the global norm, so
// they all follow every gradient's reduction; between them stand what the
// layout adds per tensor: ZeRO's all_gather of each updated shard (with
// its padding slice), ZeRO's all_slice of an fp32 parameter that has no
// master (the shard the update reads). The group is placed where its first
// update was, so the updates after it move up past the gathers of earlier
// tensors, which do not feed them; no update moves past a collective it
// reads. An operand computed after the first update is moved up with it
// when the op computing it may move: a pure llm op, or an all_slice (a
// local copy of this rank's chunk); anything else (a communicating
// collective, a send or receive) ends the run, and the next group starts
// at that update. The gathers then follow the group, reading its results.
//
// What joins a group: the same lr, step, norm and loss scale values, the
// same beta1, beta2, epsilon and max_grad_norm, weight decay 0 or the
// group's one value (the no-decay tensors: `decay` marks the others), and
// the same part of the step. An update whose results overwrite state that
// something after the group's place still reads would change what that
// reader sees, so it starts a new group instead.
//
// adamw8bit stays per tensor: its block-wise re-encoding has no tensor-
// crossing work to share, and the 8-bit moments already cut its traffic.
//
//===----------------------------------------------------------------------===//

#include "passes/fuse/Fusions.h"

#include "passes/lib/FusePlace.h"

#include "dialects/Annotations/Annotations.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/LLM/LLMDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

namespace {

/// One update of a group and the casts it absorbs.
struct Member {
  AdamWOp update;
  CastOp widen;  ///< the gradient's widening to f32, read by nothing else (or null)
  CastOp narrow; ///< the updated master's cast to the working type (or null)
};

/// A run of updates placed at its first one's position.
struct Group {
  SmallVector<Member> members;
  /// Ops computing members' operands after the first update, to move up
  /// before it (operands before the ops that read them).
  llvm::SetVector<Operation *> hoists;
  double weightDecay = 0.0; ///< the decayed tensors' weight decay
  Type castType;            ///< the masters' working type (null: no cast yet)
  Operation *anchor() const { return members.front().update; }
};

/// `op` may move up to the group's place: it computes from its operands
/// alone and communicates nothing.
bool movable(Operation *op) {
  if (op->getNumRegions() != 0 || !isPure(op))
    return false;
  if (isa<dist::AllSliceOp>(op))
    return true; // a copy of this rank's own chunk
  return isa<LLMDialect>(op->getDialect()) && !isa<AdamWOp, AdamW8bitOp, MultiTensorAdamWOp>(op);
}

/// Whether `value` can be read at `anchor`: it is computed before it, or
/// by ops that may move there (added to `hoists`, operands first).
bool availableAt(Value value, Operation *anchor, DominanceInfo &dominance,
                 llvm::SetVector<Operation *> &hoists) {
  if (dominance.properlyDominates(value, anchor))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != anchor->getBlock() || !movable(def))
    return false;
  if (hoists.contains(def))
    return true;
  for (Value operand : def->getOperands())
    if (!availableAt(operand, anchor, dominance, hoists))
      return false;
  hoists.insert(def);
  return true;
}

/// The state arguments of `func` that `values` overwrite (results tied to
/// them, written in place).
SmallVector<BlockArgument> overwritten(ArrayRef<Value> values, func::FuncOp func) {
  SmallVector<BlockArgument> args;
  if (!func)
    return args;
  for (Value value : values)
    for (OpOperand &use : value.getUses())
      if (isa<func::ReturnOp>(use.getOwner()))
        if (auto tied = func.getResultAttrOfType<IntegerAttr>(use.getOperandNumber(), kTiedToAttr))
          args.push_back(func.getArgument(tied.getInt()));
  return args;
}

/// Nothing but `member`'s own ops reads, after `anchor`, the state its
/// results overwrite: moving its writes up to `anchor` changes no reader.
bool writesSafelyAt(Member member, Operation *anchor, const llvm::SetVector<Operation *> &hoists) {
  SmallVector<Value> results(member.update->getResults());
  if (member.narrow)
    results.push_back(member.narrow.getResult());
  Block *block = anchor->getBlock();
  auto func = anchor->getParentOfType<func::FuncOp>();
  for (BlockArgument arg : overwritten(results, func))
    for (Operation *user : arg.getUsers()) {
      Operation *at = block->findAncestorOpInBlock(*user);
      if (user == member.update.getOperation() || hoists.contains(user) ||
          (at && at->isBeforeInBlock(anchor)))
        continue;
      return false;
    }
  return true;
}

/// `update`'s gradient operand: widened by a cast nothing else reads.
CastOp widening(AdamWOp update) {
  auto widen = update.getGrad().getDefiningOp<CastOp>();
  if (!widen || !widen.getResult().hasOneUse() || widen->getBlock() != update->getBlock())
    return {};
  Type from = cast<RankedTensorType>(widen.getX().getType()).getElementType();
  return isa<FloatType>(from) && !from.isF32() ? widen : CastOp();
}

/// The cast of `update`'s new parameter (an fp32 master) to a narrower
/// float type, if there is one.
CastOp narrowing(AdamWOp update) {
  for (Operation *user : update.getNewParam().getUsers())
    if (auto narrow = dyn_cast<CastOp>(user)) {
      Type to = cast<RankedTensorType>(narrow.getType()).getElementType();
      if (isa<FloatType>(to) && !to.isF32() &&
          cast<RankedTensorType>(update.getNewParam().getType()).getElementType().isF32())
        return narrow;
    }
  return {};
}

/// `a` and `b` compute the same step with the same hyperparameters, up to
/// the weight decay.
bool sameStep(AdamWOp a, AdamWOp b) {
  return a.getLr() == b.getLr() && a.getStep() == b.getStep() &&
         a.getGradNorm() == b.getGradNorm() && a.getLossScale() == b.getLossScale() &&
         a.getBeta1() == b.getBeta1() && a.getBeta2() == b.getBeta2() &&
         a.getEpsilon() == b.getEpsilon() && a.getMaxGradNorm() == b.getMaxGradNorm() &&
         samePlace(a, b);
}

/// Adds `update` to `group` if it can join; false (nothing changed) if not.
bool join(Group &group, AdamWOp update, DominanceInfo &dominance) {
  Member member{update, widening(update), narrowing(update)};
  if (!group.members.empty()) {
    double decay = update.getWeightDecay().convertToDouble();
    if (!sameStep(cast<AdamWOp>(group.anchor()), update) ||
        (decay != 0.0 && group.weightDecay != 0.0 && decay != group.weightDecay))
      return false;
  }
  if (member.narrow && group.castType &&
      cast<RankedTensorType>(member.narrow.getType()).getElementType() != group.castType)
    member.narrow = {};
  Operation *anchor = group.members.empty() ? update.getOperation() : group.anchor();
  llvm::SetVector<Operation *> hoists = group.hoists;
  SmallVector<Value> operands = {update.getParam(), update.getM(), update.getV()};
  operands.push_back(member.widen ? member.widen.getX() : update.getGrad());
  for (Value v : operands)
    if (!availableAt(v, anchor, dominance, hoists))
      return false;
  if (!writesSafelyAt(member, anchor, hoists))
    return false;
  group.hoists = std::move(hoists);
  if (update.getWeightDecay().convertToDouble() != 0.0)
    group.weightDecay = update.getWeightDecay().convertToDouble();
  if (member.narrow)
    group.castType = cast<RankedTensorType>(member.narrow.getType()).getElementType();
  group.members.push_back(member);
  return true;
}

/// Replaces the group's ops by one llm.multi_tensor_adamw at its first
/// update.
void fuse(Group &group) {
  AdamWOp first = cast<AdamWOp>(group.anchor());
  for (Operation *op : group.hoists) op->moveBefore(first);
  SmallVector<Value> params, grads, ms, vs;
  SmallVector<int64_t> decay, castOf;
  for (auto [i, member] : llvm::enumerate(group.members)) {
    AdamWOp u = member.update;
    params.push_back(u.getParam());
    grads.push_back(member.widen ? member.widen.getX() : u.getGrad());
    ms.push_back(u.getM());
    vs.push_back(u.getV());
    decay.push_back(u.getWeightDecay().convertToDouble() != 0.0 ? 1 : 0);
    if (member.narrow)
      castOf.push_back(static_cast<int64_t>(i));
  }
  OpBuilder b(first);
  auto fused = MultiTensorAdamWOp::create(
      b, first.getLoc(), params, grads, ms, vs, first.getLr(), first.getStep(), first.getGradNorm(),
      first.getLossScale(), first.getBeta1Attr(), first.getBeta2Attr(), first.getEpsilonAttr(),
      b.getF64FloatAttr(group.weightDecay), first.getMaxGradNormAttr(),
      b.getDenseI64ArrayAttr(decay), b.getDenseI64ArrayAttr(castOf),
      group.castType ? TypeAttr::get(group.castType) : TypeAttr());
  copyPlace(first, fused);
  size_t casts = 0;
  for (auto [i, member] : llvm::enumerate(group.members)) {
    AdamWOp u = member.update;
    if (member.narrow) {
      member.narrow.getResult().replaceAllUsesWith(fused.getCast(casts++));
      member.narrow->erase();
    }
    u.getNewParam().replaceAllUsesWith(fused.getNewParam(i));
    u.getNewM().replaceAllUsesWith(fused.getNewM(i));
    u.getNewV().replaceAllUsesWith(fused.getNewV(i));
    u->erase();
    if (member.widen)
      member.widen->erase();
  }
}

/// `group` replaces enough launches to be worth an op: two updates, or one
/// and a cast.
bool worthFusing(const Group &group) {
  return group.members.size() > 1 || group.members.front().narrow || group.members.front().widen;
}

} // namespace

unsigned llmc::fuseMultiTensorAdamW(ModuleOp module) {
  llvm::MapVector<Block *, SmallVector<AdamWOp>> updates;
  module.walk([&](AdamWOp op) { updates[op->getBlock()].push_back(op); });
  unsigned fused = 0;
  for (auto &[block, ops] : updates) {
    DominanceInfo dominance(block->getParentOp());
    SmallVector<Group> groups(1);
    for (AdamWOp op : ops) {
      if (join(groups.back(), op, dominance))
        continue;
      // A new run starts here (left empty, and to the next update, when
      // even this one alone would overwrite state read after it).
      groups.emplace_back();
      join(groups.back(), op, dominance);
    }
    // Fused after all groups formed: each group's checks saw the block as
    // the unfused step left it, up to the earlier groups' moves.
    for (Group &group : groups)
      if (!group.members.empty() && worthFusing(group)) {
        fuse(group);
        ++fused;
      }
  }
  return fused;
}
