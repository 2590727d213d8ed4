//===- QkvSplit.cpp - attention reading q, k, v from the packed qkv -------===//
//
// llmc-fuse's `qkv-split`. GPT-2 projects q, k and v in one product and
// cuts its result into heads:
//   %q = reshape (slice %qkv [0, 0, 0])          [B, T, H, D]
//   %k = reshape (slice %qkv [0, 0, H·D])        [B, T, KV, D]
//   %v = reshape (slice %qkv [0, 0, (H+KV)·D])   [B, T, KV, D]
//   %o, %lse = attention %q, %k, %v
// and the slices' backward pads each gradient back to qkv's shape and sums
// the three:
//   %dq, %dk, %dv = attention_grad %q, %k, %v, %o, %lse, %do
//   %dqkv = add (add (pad (reshape %dq)), (pad (reshape %dk))), (pad (reshape %dv))
// Each slice is a copy (its rows are not contiguous in qkv), each pad
// writes a tensor of qkv's size that is two thirds zeros, and the sum reads
// all three. The attention kernels copy every tile into scratch anyway, so
// they read q, k and v straight from qkv's rows and write dq, dk and dv
// into one dqkv:
//   %o, %lse = attention_packed %qkv {heads = H, kv_heads = KV}
//   %dqkv = attention_packed_grad %qkv, %o, %lse, %do {heads = H, kv_heads = KV}
// Under tensor parallelism each rank's qkv holds its own heads' q, k and v
// blocks (the slices' offsets are those of the rank's share), so the same
// pattern matches there.
//
// All or nothing per set of pieces: it fuses when each piece is read only
// by attentions and attention_grads of the same three pieces (under
// selective recomputation the backward replays the slices for the gradient
// alone), and each gradient's dq, dk, dv only reaches the one sum of the
// three pads. A piece with another reader (a KV cache, a recomputation boundary
// that keeps it, a QAT point) keeps its slice, and the attention with it.
// The backward needs qkv where it needed the three pieces, which are
// together as large: the fusion keeps no more alive.
//
//===----------------------------------------------------------------------===//

#include "passes/fuse/Fusions.h"
#include "passes/lib/FuseMatch.h"
#include "passes/lib/FusePlace.h"

#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dominance.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {
namespace {

RankedTensorType tensorOf(Value value) { return cast<RankedTensorType>(value.getType()); }

/// One of q, k, v: `reshape (slice %qkv)` at column `offset` of a rank-3
/// qkv, the slice read by nothing else.
struct Piece {
  SliceOp slice;
  ReshapeOp reshape;
};

FailureOr<Piece> matchPiece(Value piece, int64_t offset) {
  auto reshape = piece.getDefiningOp<ReshapeOp>();
  auto slice = reshape ? reshape.getX().getDefiningOp<SliceOp>() : SliceOp();
  if (!slice || !slice.getResult().hasOneUse())
    return failure();
  RankedTensorType qkv = tensorOf(slice.getX()), cut = tensorOf(slice.getResult());
  ArrayRef<int64_t> shape = tensorOf(piece).getShape();
  if (qkv.getRank() != 3 || cut.getShape().take_front(2) != qkv.getShape().take_front(2) ||
      shape.take_front(2) != qkv.getShape().take_front(2) ||
      cut.getDimSize(2) != shape[2] * shape[3] ||
      slice.getOffsets() != ArrayRef<int64_t>{0, 0, offset})
    return failure();
  return Piece{slice, reshape};
}

/// The backward of one attention_grad: each of dq, dk, dv reshaped to its
/// piece's shape, padded back at its piece's offset, and the three pads
/// summed by `adds` (the root last) and by nothing else.
struct Backward {
  AttentionGradOp grad;
  SmallVector<Operation *> reshapes, pads, adds;
};

/// Collects the pads under `value` into `leaves` and the adds into `adds`:
/// each interior add read once, each leaf one of `pads`.
bool sumLeaves(Value value, const SmallPtrSetImpl<Operation *> &pads,
               SmallVectorImpl<Operation *> &leaves, SmallVectorImpl<Operation *> &adds) {
  Operation *def = value.getDefiningOp();
  if (def && pads.contains(def)) {
    leaves.push_back(def);
    return true;
  }
  auto add = dyn_cast_or_null<AddOp>(def);
  if (!add || !value.hasOneUse())
    return false;
  adds.push_back(add);
  return sumLeaves(add.getLhs(), pads, leaves, adds) && sumLeaves(add.getRhs(), pads, leaves, adds);
}

FailureOr<Backward> matchBackward(AttentionGradOp grad, ArrayRef<Piece> pieces) {
  Backward b{grad, {}, {}, {}};
  SmallPtrSet<Operation *, 3> pads;
  Value sum; // dq's pad, where the climb to the sum starts
  for (auto [gradient, piece] : llvm::zip(grad->getResults(), pieces)) {
    SliceOp slice = piece.slice;
    if (!gradient.hasOneUse())
      return failure();
    auto reshape = dyn_cast<ReshapeOp>(*gradient.getUsers().begin());
    if (!reshape || reshape.getType() != slice.getType() || !reshape.getResult().hasOneUse())
      return failure();
    auto pad = dyn_cast<PadOp>(*reshape.getResult().getUsers().begin());
    if (!pad || pad.getType() != slice.getX().getType() || pad.getOffsets() != slice.getOffsets())
      return failure();
    b.reshapes.push_back(reshape);
    b.pads.push_back(pad);
    pads.insert(pad);
    if (!sum)
      sum = pad.getResult();
  }
  // Climb from dq's pad through adds read once until one sums all three.
  while (sum.hasOneUse()) {
    auto add = dyn_cast<AddOp>(*sum.getUsers().begin());
    if (!add || add.getType() != sum.getType())
      return failure();
    SmallVector<Operation *> leaves, adds;
    if (!sumLeaves(add.getLhs(), pads, leaves, adds) ||
        !sumLeaves(add.getRhs(), pads, leaves, adds))
      return failure();
    if (leaves.size() == 3) {
      if (SmallPtrSet<Operation *, 3>(leaves.begin(), leaves.end()).size() != 3)
        return failure();
      b.adds.assign(adds.rbegin(), adds.rend());
      b.adds.push_back(add);
      return b;
    }
    sum = add.getResult();
  }
  return failure();
}

/// Fuses every attention and attention_grad reading the q, k, v that
/// `anchor` (either) reads, if the pattern matches; adds what it erases to
/// `erased`. The forward and its gradients usually read the same pieces;
/// under selective recomputation the gradient reads replayed ones alone.
bool fuseQkvSplitAt(Operation *anchor, DominanceInfo &dominance, DenseSet<Operation *> &erased) {
  Value qValue = anchor->getOperand(0), kValue = anchor->getOperand(1),
        vValue = anchor->getOperand(2);
  RankedTensorType q = tensorOf(qValue), k = tensorOf(kValue);
  const int64_t heads = q.getDimSize(2), kvHeads = k.getDimSize(2), d = q.getDimSize(3);
  const int64_t offsets[] = {0, heads * d, (heads + kvHeads) * d};
  SmallVector<Piece, 3> pieces;
  for (auto [value, offset] : llvm::zip(anchor->getOperands().take_front(3), offsets)) {
    FailureOr<Piece> piece = matchPiece(value, offset);
    if (failed(piece))
      return false;
    pieces.push_back(*piece);
  }
  Value qkv = pieces[0].slice.getX();
  if (pieces[1].slice.getX() != qkv || pieces[2].slice.getX() != qkv ||
      tensorOf(qkv).getDimSize(2) != (heads + 2 * kvHeads) * d)
    return false;
  FailureOr<AttentionReaders> readers =
      attentionReadersOf({qValue, kValue, vValue}, qValue, kValue, vValue);
  if (failed(readers))
    return false;
  SmallVector<Backward> backwards;
  for (AttentionGradOp grad : readers->grads) {
    FailureOr<Backward> backward = matchBackward(grad, pieces);
    if (failed(backward) || !dominance.properlyDominates(qkv, grad))
      return false;
    backwards.push_back(*backward);
  }
  for (AttentionOp forward : readers->forwards)
    if (!dominance.properlyDominates(qkv, forward))
      return false;

  for (Backward &b : backwards) {
    OpBuilder builder(b.grad);
    AttentionGradOp g = b.grad;
    auto fused = AttentionPackedGradOp::create(
        builder, g.getLoc(), qkv, g.getOut(), g.getLse(), g.getDout(), g.getSegmentIds(), heads,
        kvHeads, g.getScale(), g.getCausal(), g.getWindowAttr(), g.getSoftcapAttr());
    copyPlace(g, fused);
    b.adds.back()->getResult(0).replaceAllUsesWith(fused.getDqkv());
    for (Operation *op : llvm::reverse(b.adds)) op->erase();
    for (auto [pad, reshape] : llvm::zip(b.pads, b.reshapes)) {
      pad->erase();
      reshape->erase();
    }
    erased.insert(g);
    g->erase();
  }
  for (AttentionOp forward : readers->forwards) {
    OpBuilder builder(forward);
    auto fused = AttentionPackedOp::create(builder, forward.getLoc(), qkv, forward.getSegmentIds(),
                                           heads, kvHeads, forward.getScale(), forward.getCausal(),
                                           forward.getWindowAttr(), forward.getSoftcapAttr());
    copyPlace(forward, fused);
    forward.getOut().replaceAllUsesWith(fused.getOut());
    forward.getLse().replaceAllUsesWith(fused.getLse());
    erased.insert(forward);
    forward->erase();
  }
  for (Piece &piece : pieces) {
    piece.reshape->erase();
    piece.slice->erase();
  }
  return true;
}

} // namespace

unsigned fuseQkvSplit(ModuleOp module) { return fuseEachAttention(module, fuseQkvSplitAt); }

} // namespace llmc
