//===- LinearCrossEntropy.cpp - the LM head and its loss as one op --------===//
//
// llmc-fuse's `linear-cross-entropy`. The head and its loss,
//   %logits = matmul %h, %w          (w [V, D] with transpose_b, or [D, V])
//   %loss   = cross_entropy %logits, %t
// and, in training,
//   %g  = cross_entropy_grad %logits, %t, %seed
//   %dh = matmul %g, %w              (the transposes the autodiff rule picks)
//   %dw = matmul (reshape %g)ᵀ, (reshape %h)    or (reshape %h)ᵀ, (reshape %g)
// become one linear_cross_entropy(_train) placed where the loss was. The
// loss seed is a fill the autodiff pass emits after the loss; it depends
// on nothing computed after it, so it moves up to the fused op. A frozen
// head (LoRA) has no %dw product; the fused op is then frozen_weight and
// forms only dh.
//
// Under tensor parallelism the head is a vocabulary shard and its loss
// Megatron's (passes/lib/TensorParallel.cpp): the log-sum-exp needs every
// shard, so one op cannot go from the logits to their gradient. The
// forward's pieces reading the logits,
//   %m    = reduce_max %logits                      → all_reduce max → %shift
//   %s, %t = cross_entropy_partial %logits, %t, %shift  → all_reduce sums
// become one linear_cross_entropy_partial where the max was, whose sum is
// relative to the shard's own max and is rescaled to the shift where the
// partial was; the backward's
//   %g = cross_entropy_partial_grad %logits, %t, %shift, %ds, %dt
// and its two products become linear_cross_entropy_partial_grad, which
// computes the logits again. The collectives between them stay as they
// were.
//
// Runs in llmc-fuse (passes/Fuse.cpp) on the finished graph, after every
// pass that rewrites llm ops. It matches exactly the ops the model
// builders, autodiff and the sharding passes produce and leaves anything
// else alone: a value some other op still reads keeps the op that makes it.
//
//===----------------------------------------------------------------------===//

#include "passes/fuse/Fusions.h"
#include "passes/lib/FuseMatch.h"
#include "passes/lib/FusePlace.h"

#include "common/ElementwiseProgram.h"
#include "common/HeadScratch.h"
#include "dialects/Annotations/Annotations.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

namespace {

/// Makes `value` available before `point`: true when it already is, or when
/// its pure defining op (and, recursively, what it needs) can move there.
bool makeAvailableBefore(Value value, Operation *point) {
  Block *block = value.getParentBlock();
  Operation *ancestor = block->findAncestorOpInBlock(*point);
  if (!ancestor)
    return false;
  Operation *def = value.getDefiningOp();
  if (!def || def->isBeforeInBlock(ancestor))
    return true;
  if (def->getBlock() != point->getBlock() || !isPure(def) || def->getNumRegions() != 0)
    return false;
  for (Value operand : def->getOperands())
    if (!makeAvailableBefore(operand, point))
      return false;
  def->moveBefore(point);
  // It now runs in the part of the step (pipeline action) of `point`.
  if (Attribute action = point->getAttr("llmc.action"))
    def->setAttr("llmc.action", action);
  return true;
}

/// `value` is `reshape %of` (a reshape that only flattens rows).
bool isReshapeOf(Value value, Value of) {
  auto reshape = value.getDefiningOp<ReshapeOp>();
  return reshape && reshape.getX() == of;
}

/// `a` and `b` hold the same weight: one value, or two gathers of one
/// shard by the same collective (ZeRO-3 gathers the weight again for the
/// backward, after freeing the forward's copy).
bool sameWeight(Value a, Value b) {
  if (a == b)
    return true;
  auto gatherA = a.getDefiningOp<dist::AllGatherOp>();
  auto gatherB = b.getDefiningOp<dist::AllGatherOp>();
  return gatherA && gatherB && gatherA.getType() == gatherB.getType() &&
         llvm::equal(gatherA->getOperands(), gatherB->getOperands()) &&
         gatherA->getPropertiesAsAttribute() == gatherB->getPropertiesAsAttribute();
}

/// The backward's products of the head `head` reading the logits'
/// gradient: dh = g·w (in the transposes the autodiff rule picks) and dw
/// from reshapes of g and h — none when the head is frozen (LoRA), whose
/// weight the autodiff pass gives no gradient.
struct HeadProducts {
  MatmulOp dgrad, wgrad;
  ReshapeOp gradRows; ///< reshape of the gradient feeding wgrad
};

/// Finds the products reading `grad`, the gradient of `head`'s logits;
/// fails when anything else reads it. With `regathered`, dh's product may
/// read the weight gathered again (sameWeight).
FailureOr<HeadProducts> matchProducts(MatmulOp head, Value grad, bool regathered = false) {
  HeadProducts p{};
  Value h = head.getA(), w = head.getB();
  bool transposeB = head.getTransposeB();
  for (Operation *user : grad.getUsers()) {
    auto matmul = dyn_cast<MatmulOp>(user);
    if (matmul && !p.dgrad && matmul.getA() == grad &&
        (regathered ? sameWeight(matmul.getB(), w) : matmul.getB() == w) &&
        !matmul.getTransposeA() && matmul.getTransposeB() == !transposeB) {
      p.dgrad = matmul;
      continue;
    }
    auto reshape = dyn_cast<ReshapeOp>(user);
    if (!reshape || p.gradRows || !reshape.getResult().hasOneUse())
      return failure();
    auto wgrad = dyn_cast<MatmulOp>(*reshape.getResult().getUsers().begin());
    if (!wgrad || !wgrad.getTransposeA() || wgrad.getTransposeB())
      return failure();
    Value gradRows = reshape.getResult();
    bool matches = transposeB ? wgrad.getA() == gradRows && isReshapeOf(wgrad.getB(), h)
                              : wgrad.getB() == gradRows && isReshapeOf(wgrad.getA(), h);
    if (!matches)
      return failure();
    p.gradRows = reshape;
    p.wgrad = wgrad;
  }
  if (!p.dgrad || p.dgrad.getType() != h.getType() || (p.wgrad && p.wgrad.getType() != w.getType()))
    return failure();
  return p;
}

/// The training half of the pattern: the loss gradient and the two products
/// that consume it.
struct HeadBackward {
  CrossEntropyGradOp grad;
  HeadProducts products;
};

/// Finds the backward of `head` + `loss` among the users of the logits;
/// fails when anything else reads the logits or the gradient.
FailureOr<HeadBackward> matchBackward(MatmulOp head, CrossEntropyOp loss) {
  HeadBackward b{};
  Value logits = head.getResult();
  for (Operation *user : logits.getUsers()) {
    if (user == loss.getOperation())
      continue;
    auto grad = dyn_cast<CrossEntropyGradOp>(user);
    if (!grad || b.grad || grad.getLogits() != logits || grad.getTargets() != loss.getTargets() ||
        grad.getIgnoreIndex() != loss.getIgnoreIndex() ||
        grad.getNumClasses() != loss.getNumClasses())
      return failure();
    b.grad = grad;
  }
  if (!b.grad)
    return b; // forward only (evaluation)
  FailureOr<HeadProducts> products = matchProducts(head, b.grad.getResult());
  if (failed(products))
    return failure();
  b.products = *products;
  return b;
}

/// Hands the products' results to the fused op's `dh` and `dw` (null for a
/// frozen head) and erases them, the gradient's reshape and h's when
/// nothing else reads it.
void replaceProducts(HeadProducts &p, bool transposeB, Value dh, Value dw) {
  p.dgrad.getResult().replaceAllUsesWith(dh);
  p.dgrad->erase();
  if (!p.wgrad)
    return;
  p.wgrad.getResult().replaceAllUsesWith(dw);
  Operation *hRows = (transposeB ? p.wgrad.getB() : p.wgrad.getA()).getDefiningOp();
  p.wgrad->erase();
  p.gradRows->erase();
  eraseIfDead(hRows);
}

/// Bytes per logit of a chunk as the `target`'s kernels hold it: CUDA's
/// GEMMs write the head's own type, the CPU computes in fp32.
int64_t chunkElementBytes(Type element, StringRef target) {
  return target == "cuda" && !element.isF32() ? 2 : 4;
}

/// The head matmul h·w{ᵀ} of a fusable head: one 2-D weight, h, w and the
/// logits of one float type.
MatmulOp fusableHead(Value logits) {
  auto head = logits.getDefiningOp<MatmulOp>();
  if (!head || head.getTransposeA())
    return {};
  auto hType = cast<RankedTensorType>(head.getA().getType());
  auto wType = cast<RankedTensorType>(head.getB().getType());
  Type element = hType.getElementType();
  if (wType.getElementType() != element || wType.getRank() != 2 || hType.getRank() < 2 ||
      head.getType().getElementType() != element)
    return {};
  return head;
}

/// Fuses the head feeding `loss`, if the pattern matches; true when it did.
bool fuseHead(CrossEntropyOp loss, double chunkBytes, StringRef target) {
  MatmulOp head = fusableHead(loss.getLogits());
  if (!head)
    return false;
  Value h = head.getA(), w = head.getB();
  FailureOr<HeadBackward> backward = matchBackward(head, loss);
  if (failed(backward))
    return false;
  if (backward->grad && !makeAvailableBefore(backward->grad.getDloss(), loss))
    return false;

  auto hType = cast<RankedTensorType>(h.getType());
  int64_t vocab = head.getType().getShape().back();
  int64_t chunk = headChunkRows(hType.getNumElements() / hType.getShape().back(), vocab,
                                chunkElementBytes(hType.getElementType(), target), chunkBytes);

  OpBuilder builder(loss);
  Operation *fused;
  if (backward->grad) {
    auto op = LinearCrossEntropyTrainOp::create(
        builder, loss.getLoc(), h, w, loss.getTargets(), backward->grad.getDloss(), chunk,
        head.getTransposeB(), loss.getIgnoreIndex(), /*frozen_weight=*/!backward->products.wgrad,
        loss.getNumClasses());
    replaceProducts(backward->products, head.getTransposeB(), op.getDh(), op.getDw());
    backward->grad->erase();
    loss.getResult().replaceAllUsesWith(op.getLoss());
    fused = op;
  } else {
    auto op = LinearCrossEntropyOp::create(builder, loss.getLoc(), h, w, loss.getTargets(), chunk,
                                           head.getTransposeB(), loss.getIgnoreIndex(),
                                           loss.getNumClasses());
    loss.getResult().replaceAllUsesWith(op.getLoss());
    fused = op;
  }
  copyPlace(loss, fused);
  loss->erase();
  eraseIfDead(head);
  return true;
}

/// The pieces of a vocabulary-parallel head (passes/lib/TensorParallel.cpp)
/// that read its logits: the forward's statistics and, when the same
/// logits serve the backward, its gradient with the two products.
struct ShardedHead {
  ReduceMaxOp max;
  CrossEntropyPartialOp partial;
  CrossEntropyPartialGradOp grad;
  HeadProducts products;
};

/// Finds the readers of `head`'s logits; fails when anything else reads
/// them or the gradient, or when the pieces disagree on the shard.
FailureOr<ShardedHead> matchShardedHead(MatmulOp head) {
  ShardedHead s{};
  for (Operation *user : head.getResult().getUsers()) {
    if (auto max = dyn_cast<ReduceMaxOp>(user); max && !s.max)
      s.max = max;
    else if (auto partial = dyn_cast<CrossEntropyPartialOp>(user);
             partial && !s.partial && partial.getLogits() == head.getResult())
      s.partial = partial;
    else if (auto grad = dyn_cast<CrossEntropyPartialGradOp>(user);
             grad && !s.grad && grad.getLogits() == head.getResult())
      s.grad = grad;
    else
      return failure();
  }
  // The max and the partial sums come together; both read one shard, and
  // the rank offset that places it (dist.rank_offsets) is the same.
  if (static_cast<bool>(s.max) != static_cast<bool>(s.partial) || (!s.partial && !s.grad))
    return failure();
  if (s.partial && (s.max.getClassOffset() != s.partial.getClassOffset() ||
                    s.max.getNumClasses() != s.partial.getNumClasses() ||
                    s.max->getAttr(dist::DistDialect::kRankOffsetsAttrName) !=
                        s.partial->getAttr(dist::DistDialect::kRankOffsetsAttrName)))
    return failure();
  if (s.grad) {
    // The backward op computes the logits from the weight its products
    // read, so a weight gathered again for the backward serves.
    FailureOr<HeadProducts> products = matchProducts(head, s.grad.getResult(), /*regathered=*/true);
    if (failed(products))
      return failure();
    s.products = *products;
  }
  return s;
}

/// sumexp · exp(max − shift): a shard's Σ exp(logit − max) made relative
/// to the shift all ranks share, as cross_entropy_partial's sum is.
Value shiftSumexp(OpBuilder &builder, Location loc, Value sumexp, Value max, Value shift) {
  auto instruction = [](ew::Opcode op, int64_t a, int64_t b = 0) {
    return SmallVector<int64_t>{static_cast<int64_t>(op), /*f32*/ 0, a, b, 0};
  };
  SmallVector<int64_t> program;
  for (const SmallVector<int64_t> &in :
       {instruction(ew::Opcode::Load, 0), instruction(ew::Opcode::Load, 1),
        instruction(ew::Opcode::Load, 2), instruction(ew::Opcode::Sub, 1, 2),
        instruction(ew::Opcode::Exp, 3), instruction(ew::Opcode::Mul, 0, 4)})
    program.append(in);
  auto op = FusedElementwiseOp::create(
      builder, loc, TypeRange{sumexp.getType()}, ValueRange{sumexp, max, shift},
      builder.getDenseI64ArrayAttr(program), builder.getDenseI64ArrayAttr({5}),
      /*global_shape=*/nullptr, /*offsets=*/nullptr);
  return op.getOuts()[0];
}

/// Fuses the vocabulary-parallel head computing `head`, if the pattern
/// matches; true when it did. The forward's reduce_max and
/// cross_entropy_partial become one linear_cross_entropy_partial where the
/// max was (its sum relative to the shard's max, rescaled to the shared
/// shift where the partial was), the backward's cross_entropy_partial_grad
/// and its products one linear_cross_entropy_partial_grad where the
/// gradient was. The collectives between them stay as they were.
bool fuseShardedHead(MatmulOp head, double chunkBytes, StringRef target) {
  FailureOr<ShardedHead> s = matchShardedHead(head);
  if (failed(s) || (s->partial && !makeAvailableBefore(s->partial.getTargets(), s->max)) ||
      (s->grad && !makeAvailableBefore(s->products.dgrad.getB(), s->grad)))
    return false;
  Value h = head.getA(), w = head.getB();
  auto hType = cast<RankedTensorType>(h.getType());
  int64_t vocab = head.getType().getShape().back();
  int64_t chunk = headChunkRows(hType.getNumElements() / hType.getShape().back(), vocab,
                                chunkElementBytes(hType.getElementType(), target), chunkBytes);
  bool transposeB = head.getTransposeB();

  if (CrossEntropyPartialOp partial = s->partial) {
    OpBuilder builder(s->max);
    auto op = LinearCrossEntropyPartialOp::create(
        builder, partial.getLoc(), h, w, partial.getTargets(), chunk, transposeB,
        partial.getClassOffset(), partial.getNumClasses(), partial.getIgnoreIndex());
    copyPlace(s->max, op);
    s->max.getResult().replaceAllUsesWith(op.getMax());
    builder.setInsertionPoint(partial);
    Operation *rescale =
        shiftSumexp(builder, partial.getLoc(), op.getSumexp(), op.getMax(), partial.getShift())
            .getDefiningOp();
    copyPlace(partial, rescale);
    rescale->removeAttr(dist::DistDialect::kRankOffsetsAttrName);
    partial.getSumexp().replaceAllUsesWith(rescale->getResult(0));
    partial.getTargetLogit().replaceAllUsesWith(op.getTargetLogit());
    partial->erase();
    s->max->erase();
  }
  if (CrossEntropyPartialGradOp grad = s->grad) {
    OpBuilder builder(grad);
    auto op = LinearCrossEntropyPartialGradOp::create(
        builder, grad.getLoc(), h, s->products.dgrad.getB(), grad.getTargets(), grad.getShift(),
        grad.getDsumexp(), grad.getDtargetLogit(), chunk, transposeB, grad.getClassOffset(),
        grad.getNumClasses(), grad.getIgnoreIndex(), /*frozen_weight=*/!s->products.wgrad);
    copyPlace(grad, op);
    replaceProducts(s->products, transposeB, op.getDh(), op.getDw());
    grad->erase();
  }
  head->erase();
  return true;
}

} // namespace

unsigned llmc::fuseLinearCrossEntropy(ModuleOp module, double chunkBytes, StringRef target) {
  SmallVector<CrossEntropyOp> losses;
  module.walk([&](CrossEntropyOp op) { losses.push_back(op); });
  unsigned fused = 0;
  for (CrossEntropyOp loss : losses) fused += fuseHead(loss, chunkBytes, target);
  // Under tensor parallelism, the heads whose logits are a vocabulary
  // shard: the forward's and, where it replays the head, the backward's.
  llvm::SetVector<Operation *> heads;
  module.walk([&](Operation *op) {
    if (isa<CrossEntropyPartialOp, CrossEntropyPartialGradOp>(op))
      if (MatmulOp head = fusableHead(op->getOperand(0)))
        heads.insert(head);
  });
  for (Operation *head : heads) fused += fuseShardedHead(cast<MatmulOp>(head), chunkBytes, target);
  return fused;
}
