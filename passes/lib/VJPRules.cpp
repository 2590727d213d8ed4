//===- VJPRules.cpp - one VJP rule per differentiable op ------------------===//
//
// The whole of llmc's differentiation knowledge: for each op, how the
// gradient of its results becomes the gradient of its operands. Rules emit
// ordinary llm ops (backward kernels are ops too), so everything after
// autodiff — sharding, recompute, lowering — treats forward and backward
// alike. Every rule is checked against central finite differences in
// float64 by test/unit/compiler/VJPTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/VJPRules.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "dialects/QAT/QATDialect.h"
#include "passes/lib/Layout.h"
#include "passes/lib/QuantRanges.h"
#include "passes/lib/RowGroupQuant.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Sums `grad` down to `target`'s shape when `target` was broadcast.
Value unbroadcast(OpBuilder &b, Location loc, Value grad, Value target) {
  if (grad.getType() == target.getType())
    return grad;
  return ReduceSumOp::create(b, loc, target.getType(), grad);
}

Value reshapeTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, tensorType(v).getElementType());
  if (type == v.getType())
    return v;
  return ReshapeOp::create(b, loc, type, v);
}

using Grads = SmallVector<Value>;

/// A backward op that reads the same rank-dependent attributes (row or
/// class offsets) as its forward op gets the same runtime terms.
void copyRankOffsets(Operation *from, Operation *to) {
  if (Attribute terms = from->getAttr(dist::DistDialect::kRankOffsetsAttrName))
    to->setAttr(dist::DistDialect::kRankOffsetsAttrName, terms);
}

/// A cross-entropy shard's backward: dlogits from the gradients of its two
/// row statistics (a missing one is zero). The shift's gradient, −dsumexp ·
/// sumexp, is returned only when asked for: the model's loss never asks,
/// since the shift comes through llm.stop_gradient.
FailureOr<Grads> crossEntropyPartialVJP(OpBuilder &b, CrossEntropyPartialOp op, ArrayRef<Value> dys,
                                        ArrayRef<bool> need) {
  Location loc = op.getLoc();
  auto zerosLike = [&](Value v) {
    return FillOp::create(b, loc, v.getType(), APFloat(0.0)).getResult();
  };
  Value ds = dys[0] ? dys[0] : zerosLike(op.getSumexp());
  Value dt = dys[1] ? dys[1] : zerosLike(op.getTargetLogit());
  Grads grads(3);
  if (need[0]) {
    auto g = CrossEntropyPartialGradOp::create(b, loc, op.getLogits(), op.getTargets(),
                                               op.getShift(), ds, dt, op.getClassOffset(),
                                               op.getNumClasses(), op.getIgnoreIndex());
    copyRankOffsets(op, g);
    grads[0] = g;
  }
  if (need[2] && dys[0])
    grads[2] =
        ScaleOp::create(b, loc, MulOp::create(b, loc, dys[0], op.getSumexp()), APFloat(-1.0));
  return grads;
}

FailureOr<Grads> matmulVJP(OpBuilder &b, MatmulOp op, Value dc, ArrayRef<bool> need) {
  Location loc = op.getLoc();
  Value a = op.getA(), bm = op.getB();
  bool ta = op.getTransposeA(), tb = op.getTransposeB();
  RankedTensorType at = tensorType(a), bt = tensorType(bm);
  bool sharedB = bt.getRank() == 2 && at.getRank() > 2;
  Grads grads(2);
  if (need[0]) {
    if (!ta) {
      // dA = dC·Bᵀ, and Bᵀ is b itself when b was transposed.
      grads[0] = MatmulOp::create(b, loc, dc, bm, false, !tb);
    } else if (!sharedB) {
      // a = Aᵀ: da = (dC·Bᵀ)ᵀ = B·dCᵀ.
      grads[0] = MatmulOp::create(b, loc, bm, dc, tb, true);
    } else {
      return op.emitOpError("has no VJP for transpose_a with a shared 2-D b");
    }
  }
  if (need[1]) {
    Value lhs = a, rhs = dc;
    if (sharedB) {
      // Fold the leading dimensions into rows: dB = Σ over rows of Aᵀ·dC.
      if (ta)
        return op.emitOpError("has no VJP for transpose_a with a shared 2-D b");
      int64_t k = at.getShape().back(), n = tensorType(dc).getShape().back();
      lhs = reshapeTo(b, loc, a, {at.getNumElements() / k, k});
      rhs = reshapeTo(b, loc, dc, {tensorType(dc).getNumElements() / n, n});
    }
    if (!tb)
      grads[1] = MatmulOp::create(b, loc, lhs, rhs, !ta, false); // Aᵀ·dC
    else
      grads[1] = MatmulOp::create(b, loc, rhs, lhs, true, ta); // dCᵀ·A
  }
  return grads;
}

FailureOr<Grads> attentionVJP(OpBuilder &b, AttentionOp op, ArrayRef<Value> dys,
                              ArrayRef<bool> need) {
  if (dys[1])
    return op.emitOpError("has no VJP through its lse result");
  auto grad = AttentionGradOp::create(b, op.getLoc(), op.getQ(), op.getK(), op.getV(), op.getOut(),
                                      op.getLse(), dys[0], op.getSegmentIds(), op.getScale(),
                                      op.getCausal(), op.getWindowAttr(), op.getSoftcapAttr());
  Grads grads{grad.getDq(), grad.getDk(), grad.getDv()};
  if (op.getSegmentIds())
    grads.push_back(Value());
  return grads;
}

FailureOr<Grads> concatVJP(OpBuilder &b, ConcatOp op, Value dy, ArrayRef<bool> need) {
  Grads grads;
  int64_t offset = 0, dim = op.getDim();
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    RankedTensorType t = tensorType(input);
    SmallVector<int64_t> offsets(t.getRank(), 0);
    offsets[dim] = offset;
    offset += t.getDimSize(dim);
    grads.push_back(need[i] ? Value(SliceOp::create(b, op.getLoc(), t, dy, offsets)) : Value());
  }
  return grads;
}

/// Routing's gradient reaches the logits through the chosen weights and the
/// auxiliary losses' sums (a missing one is zero); experts, positions,
/// offsets and counts are piecewise constant in the logits: no gradient.
/// A sigmoid router's bias only chooses experts: none for it either.
FailureOr<Grads> moeRouteVJP(OpBuilder &b, MoERouteOp op, ArrayRef<Value> dys) {
  Location loc = op.getLoc();
  auto orZeros = [&](Value d, Value like) {
    return d ? d : FillOp::create(b, loc, like.getType(), APFloat(0.0)).getResult();
  };
  Grads grads(op->getNumOperands());
  grads[0] = MoERouteGradOp::create(b, loc, op.getLogits(), op.getExperts(),
                                    orZeros(dys[0], op.getWeights()),
                                    orZeros(dys[4], op.getProbSum()), orZeros(dys[6], op.getZSum()),
                                    op.getNormalize(), op.getScore(), op.getScale());
  return grads;
}

/// dispatch and combine are each other's transposes (the same positions,
/// the same weights); a weight's gradient is the dot product of the row it
/// scaled with the gradient of what it produced.
FailureOr<Grads> moeDispatchVJP(OpBuilder &b, MoEDispatchOp op, Value dy, ArrayRef<bool> need) {
  Location loc = op.getLoc();
  Grads grads(op->getNumOperands());
  if (need[0])
    grads[0] = MoECombineOp::create(b, loc, dy, op.getPositions(), op.getWeights());
  if (op.getWeights() && need[2])
    grads[2] = MoECombineWeightGradOp::create(b, loc, dy, op.getPositions(), op.getX());
  return grads;
}

FailureOr<Grads> moeCombineVJP(OpBuilder &b, MoECombineOp op, Value dy, ArrayRef<bool> need) {
  Location loc = op.getLoc();
  Grads grads(op->getNumOperands());
  if (need[0])
    grads[0] = MoEDispatchOp::create(b, loc, dy, op.getPositions(), op.getWeights());
  if (op.getWeights() && need[2])
    grads[2] = MoECombineWeightGradOp::create(b, loc, op.getYs(), op.getPositions(), dy);
  return grads;
}

/// dx = dy times each group's weight the other way round; the stacked
/// weights' gradient is one grouped_matmul_weight_grad.
FailureOr<Grads> groupedMatmulVJP(OpBuilder &b, GroupedMatmulOp op, Value dy, ArrayRef<bool> need) {
  Location loc = op.getLoc();
  Grads grads(op->getNumOperands());
  if (need[0])
    grads[0] =
        GroupedMatmulOp::create(b, loc, dy, op.getOffsets(), op.getWeights(), !op.getTransposeB());
  if (need[2])
    grads[2] = GroupedMatmulWeightGradOp::create(b, loc, op.getWeights().getType(), op.getX(), dy,
                                                 op.getOffsets(), op.getTransposeB());
  return grads;
}

/// Expert parallelism's copies: pack and unpack are each other's
/// transposes for the same offsets and kept counts (pack drops the same
/// rows whose gradient unpack zeroes), regroup and ungroup for the same
/// counts; the integer operands and results take no gradient.
FailureOr<Grads> moeExchangeVJP(OpBuilder &b, Operation *op, Value dy, ArrayRef<bool> need) {
  Location loc = op->getLoc();
  Grads grads(op->getNumOperands());
  if (!dy || !need[0])
    return grads;
  if (auto pack = dyn_cast<MoEPackOp>(op)) {
    grads[0] =
        MoEUnpackOp::create(b, loc, pack.getXs().getType(), dy, pack.getOffsets(), pack.getKept());
  } else if (auto unpack = dyn_cast<MoEUnpackOp>(op)) {
    // pack recomputes kept from the offsets: with the capacity, group
    // counts and (rank-dependent) group position of the pack that made
    // unpack's kept, it keeps exactly those rows.
    auto source = unpack.getKept().getDefiningOp<MoEPackOp>();
    if (!source || source.getOffsets() != unpack.getOffsets())
      return unpack.emitOpError("has a VJP only when its kept and offsets are an llm.moe_pack's "
                                "(whose capacity the gradient's pack repeats)");
    auto pack = MoEPackOp::create(b, loc, unpack.getPacked().getType(), source.getKept().getType(),
                                  dy, unpack.getOffsets(), source.getGroupCounts(),
                                  source.getCapacityAttr(), source.getGroupPositionAttr());
    copyRankOffsets(source, pack);
    grads[0] = pack.getPacked();
  } else if (auto regroup = dyn_cast<MoERegroupOp>(op)) {
    grads[0] = MoEUngroupOp::create(b, loc, dy, regroup.getCounts());
  } else {
    grads[0] = MoERegroupOp::create(b, loc, dy, cast<MoEUngroupOp>(op).getCounts()).getGrouped();
  }
  return grads;
}

} // namespace

namespace {

FailureOr<Grads> noRule(OpBuilder &, Operation *op, ArrayRef<Value>, ArrayRef<bool>) {
  return op->emitOpError("has no VJP rule; autodiff cannot differentiate it");
}

/// dist collectives.
FailureOr<Grads> distVJP(OpBuilder &b, Operation *op, ArrayRef<Value> dys, ArrayRef<bool> need) {
  Location loc = op->getLoc();
  Value dy = dys.empty() ? Value() : dys[0];
  return TypeSwitch<Operation *, FailureOr<Grads>>(op)
      // Collectives, in the SPMD convention that a replicated value's
      // gradient is replicated and a sharded computation's contribution to
      // a replicated input is partial (Megatron's f and g).
      .Case([&](dist::AllReduceOp c) -> FailureOr<Grads> {
        if (c.getReduction() != "sum")
          return c.emitOpError("has a VJP only for reduction \"sum\"");
        return Grads{dy};
      })
      .Case([&](dist::ReplicateOp c) -> FailureOr<Grads> {
        return Grads{dist::AllReduceOp::create(b, loc, dy.getType(), dy, c.getMeshAttr(),
                                               c.getAxes(), b.getStringAttr("sum"))};
      })
      .Case([&](dist::AllGatherOp c) -> FailureOr<Grads> {
        if (c.getReplicatedGrad())
          return Grads{dist::AllSliceOp::create(b, loc, c.getInput().getType(), dy, c.getMeshAttr(),
                                                c.getAxes(), c.getDimAttr())};
        return Grads{dist::ReduceScatterOp::create(b, loc, c.getInput().getType(), dy,
                                                   c.getMeshAttr(), c.getAxes(), c.getDimAttr(),
                                                   b.getStringAttr("sum"))};
      })
      .Case([&](dist::ReduceScatterOp c) -> FailureOr<Grads> {
        if (c.getReduction() != "sum")
          return c.emitOpError("has a VJP only for reduction \"sum\"");
        return Grads{dist::AllGatherOp::create(b, loc, c.getInput().getType(), dy, c.getMeshAttr(),
                                               c.getAxes(), c.getDimAttr())};
      })
      .Case([&](dist::AllSliceOp c) -> FailureOr<Grads> {
        return Grads{dist::AllGatherOp::create(b, loc, c.getInput().getType(), dy, c.getMeshAttr(),
                                               c.getAxes(), c.getDimAttr())};
      })
      .Case([&](dist::AllToAllOp c) -> FailureOr<Grads> {
        // The chunks go back where they came from.
        return Grads{dist::AllToAllOp::create(b, loc, c.getInput().getType(), dy, c.getMeshAttr(),
                                              c.getAxes(), c.getConcatDimAttr(),
                                              c.getSplitDimAttr())};
      })
      .Default([&](Operation *other) { return noRule(b, other, dys, need); });
}

/// qat ops: fake quantization and its statistics.
FailureOr<Grads> qatVJP(OpBuilder &b, Operation *op, ArrayRef<Value> dys, ArrayRef<bool> need) {
  Location loc = op->getLoc();
  Value dy = dys.empty() ? Value() : dys[0];
  return TypeSwitch<Operation *, FailureOr<Grads>>(op)
      // Fake quantization: the straight-through estimator, zero where x was
      // clipped (outlier columns pass dy whole); ranges and per-column
      // ranges are statistics and get no gradient.
      // Under delayed scaling dy passes whole, as through a Transformer
      // Engine fp8 GEMM: its backward reads the saturated operand and masks
      // nothing. An fp8 format with minmax ranges clips nothing (its range
      // is the tensor's amax, or a wider one combined over ranks), so dy
      // passes whole there too, and x is not kept for the backward.
      .Case([&](qat::FakeQuantOp q) -> FailureOr<Grads> {
        Grads grads(q->getNumOperands());
        qat::SchemeAttr scheme = q.getScheme();
        bool fp8 = scheme.getFormat().starts_with("fp8_");
        grads[0] = scheme.getObserver() == "delayed" || (fp8 && scheme.getObserver() == "minmax")
                       ? dy
                       : qat::FakeQuantGradOp::create(b, loc, q.getX(), q.getRange(), dy,
                                                      q.getColumns(), q.getScheme())
                             .getResult();
        return grads;
      })
      // fp8 training's dY: the gradient itself is fake-quantized, with the
      // range of the whole tensor (combined over the ranks holding pieces),
      // or under delayed scaling with the range of dY's amax history, into
      // which this step's range is recorded.
      .Case([&](qat::QuantizeGradOp q) -> FailureOr<Grads> {
        Grads grads(q->getNumOperands());
        if (q.getOffsets()) {
          grads[0] = fakeQuantRowGroups(b, loc, dy, q.getOffsets(), q.getScheme(), q.getAxes(),
                                        q.getState(), q.getBatchRanks());
          return grads;
        }
        Value range = rangeOverAxes(
            b, loc, qat::ObserveOp::create(b, loc, dy, Value(), q.getScheme()), q.getAxes());
        if (Value state = q.getState())
          range = delayedRange(b, loc, state, range, q.getScheme(), q.getBatchRanks());
        grads[0] = qat::FakeQuantOp::create(b, loc, dy, range, Value(), q.getScheme());
        return grads;
      })
      .Case([&](qat::DelayedRangeOp) -> FailureOr<Grads> { return Grads{Value(), Value()}; })
      .Case([&](qat::AmaxHistoryOp) -> FailureOr<Grads> { return Grads{Value(), Value()}; })
      .Case([&](qat::ObserveOp o) -> FailureOr<Grads> { return Grads(o->getNumOperands()); })
      .Case([&](qat::GroupRangesOp) -> FailureOr<Grads> { return Grads{Value(), Value()}; })
      .Case([&](qat::RowRangesOp) -> FailureOr<Grads> { return Grads{Value(), Value()}; })
      .Case([&](qat::EmaOp) -> FailureOr<Grads> { return Grads{Value(), Value()}; })
      .Default([&](Operation *other) { return distVJP(b, other, dys, need); });
}

/// llm ops that move or reshape values, and the loss.
FailureOr<Grads> llmShapeVJP(OpBuilder &b, Operation *op, ArrayRef<Value> dys,
                             ArrayRef<bool> need) {
  Location loc = op->getLoc();
  Value dy = dys.empty() ? Value() : dys[0];
  return TypeSwitch<Operation *, FailureOr<Grads>>(op)
      .Case([&](CrossEntropyOp ce) -> FailureOr<Grads> {
        return Grads{CrossEntropyGradOp::create(b, loc, ce.getLogits(), ce.getTargets(), dy,
                                                ce.getIgnoreIndex(), ce.getNumClasses()),
                     Value()};
      })
      .Case([&](ReshapeOp r) -> FailureOr<Grads> {
        return Grads{ReshapeOp::create(b, loc, r.getX().getType(), dy)};
      })
      .Case([&](TransposeOp t) -> FailureOr<Grads> {
        ArrayRef<int64_t> perm = t.getPermutation();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm)) inverse[p] = i;
        return Grads{TransposeOp::create(b, loc, t.getX().getType(), dy, inverse)};
      })
      .Case([&](SliceOp s) -> FailureOr<Grads> {
        return Grads{PadOp::create(b, loc, s.getX().getType(), dy, s.getOffsets())};
      })
      .Case([&](PadOp p) -> FailureOr<Grads> {
        return Grads{SliceOp::create(b, loc, p.getX().getType(), dy, p.getOffsets())};
      })
      .Case([&](ConcatOp c) { return concatVJP(b, c, dy, need); })
      .Case([&](ReduceSumOp r) -> FailureOr<Grads> {
        // Broadcast back: zeros of the input's shape plus dy (add broadcasts).
        Value zeros = FillOp::create(b, loc, r.getX().getType(), APFloat(0.0));
        return Grads{AddOp::create(b, loc, zeros, dy)};
      })
      .Case([&](FillOp) -> FailureOr<Grads> { return Grads{}; })
      .Default([&](Operation *other) { return qatVJP(b, other, dys, need); });
}

/// llm ops that compute: products, elementwise, norms, attention, experts.
FailureOr<Grads> llmVJP(OpBuilder &b, Operation *op, ArrayRef<Value> dys, ArrayRef<bool> need) {
  Location loc = op->getLoc();
  Value dy = dys.empty() ? Value() : dys[0];
  return TypeSwitch<Operation *, FailureOr<Grads>>(op)
      .Case([&](MatmulOp m) { return matmulVJP(b, m, dy, need); })
      .Case([&](AddOp add) -> FailureOr<Grads> {
        return Grads{dy, need[1] ? unbroadcast(b, loc, dy, add.getRhs()) : Value()};
      })
      .Case([&](MulOp mul) -> FailureOr<Grads> {
        Grads grads(2);
        if (need[0])
          grads[0] = MulOp::create(b, loc, dy, mul.getRhs());
        if (need[1])
          grads[1] = unbroadcast(b, loc, MulOp::create(b, loc, dy, mul.getLhs()), mul.getRhs());
        return grads;
      })
      .Case([&](ScaleOp s) -> FailureOr<Grads> {
        return Grads{ScaleOp::create(b, loc, dy, s.getFactor())};
      })
      .Case([&](GeluOp g) -> FailureOr<Grads> {
        return Grads{GeluGradOp::create(b, loc, g.getX(), dy)};
      })
      .Case([&](SoftcapOp s) -> FailureOr<Grads> {
        return Grads{SoftcapGradOp::create(b, loc, s.getX(), dy, s.getCap())};
      })
      .Case([&](SiluOp s) -> FailureOr<Grads> {
        return Grads{SiluGradOp::create(b, loc, s.getX(), dy)};
      })
      .Case([&](SigmoidOp s) -> FailureOr<Grads> {
        return Grads{SigmoidGradOp::create(b, loc, s.getX(), dy)};
      })
      .Case([&](SwigluOp s) -> FailureOr<Grads> {
        auto g = SwigluGradOp::create(b, loc, s.getGate(), s.getUp(), dy);
        return Grads{g.getDgate(), g.getDup()};
      })
      .Case([&](GegluOp s) -> FailureOr<Grads> {
        auto g = GegluGradOp::create(b, loc, s.getGate(), s.getUp(), dy);
        return Grads{g.getDgate(), g.getDup()};
      })
      .Case([&](DropoutOp d) -> FailureOr<Grads> {
        // The mask depends only on (seed, step, global index): the same op
        // (with its rank offsets) draws the same mask.
        Operation *copy = b.clone(*d);
        copy->setOperand(0, dy);
        return Grads{copy->getResult(0)};
      })
      .Case([&](CrossEntropyPartialOp p) { return crossEntropyPartialVJP(b, p, dys, need); })
      .Case([&](CrossEntropyFinishOp f) -> FailureOr<Grads> {
        auto g = CrossEntropyFinishGradOp::create(b, loc, f.getSumexp(), f.getTargets(), dy,
                                                  f.getIgnoreIndex());
        return Grads{g.getDsumexp(), g.getDshift(), g.getDtargetLogit(), Value()};
      })
      .Case([&](StopGradientOp) -> FailureOr<Grads> { return Grads{Value()}; })
      .Case([&](CastOp c) -> FailureOr<Grads> {
        return Grads{CastOp::create(b, loc, c.getX().getType(), dy)};
      })
      .Case([&](LayerNormOp ln) -> FailureOr<Grads> {
        auto g = LayerNormGradOp::create(b, loc, ln.getX(), ln.getGamma(), dy, ln.getEpsilon());
        return Grads{g.getDx(), g.getDgamma(), g.getDbeta()};
      })
      .Case([&](RMSNormOp rn) -> FailureOr<Grads> {
        auto g = RMSNormGradOp::create(b, loc, rn.getX(), rn.getGamma(), dy, rn.getEpsilon(),
                                       rn.getUnitOffset());
        return Grads{g.getDx(), g.getDgamma()};
      })
      .Case([&](EmbeddingOp e) -> FailureOr<Grads> {
        auto g = EmbeddingGradOp::create(b, loc, e.getTable().getType(), e.getIds(), dy,
                                         e.getRowOffset(), e.getVocabSize());
        copyRankOffsets(e, g);
        return Grads{g, Value()};
      })
      .Case([&](RopeOp r) -> FailureOr<Grads> {
        // A rotation's transpose is the opposite rotation (same rates).
        return Grads{RopeOp::create(b, loc, dy, r.getPositions(), r.getTheta(), !r.getInverse(),
                                    r.getPositionLimitAttr(), r.getScalingFactorAttr(),
                                    r.getLowFreqFactorAttr(), r.getHighFreqFactorAttr(),
                                    r.getOriginalMaxPositionsAttr())};
      })
      .Case([&](AttentionOp a) { return attentionVJP(b, a, dys, need); })
      .Case([&](MoERouteOp r) { return moeRouteVJP(b, r, dys); })
      .Case([&](MoEDispatchOp d) { return moeDispatchVJP(b, d, dy, need); })
      .Case([&](MoECombineOp c) { return moeCombineVJP(b, c, dy, need); })
      .Case([&](GroupedMatmulOp g) { return groupedMatmulVJP(b, g, dy, need); })
      .Case<MoEPackOp, MoEUnpackOp, MoERegroupOp, MoEUngroupOp>(
          [&](Operation *x) { return moeExchangeVJP(b, x, dy, need); })
      .Case([&](RouterLossOp r) -> FailureOr<Grads> {
        // Linear in prob_sum and z_sum; counts take no gradient; a term
        // with a zero scale gives none either.
        Grads grads(3);
        if (!r.getAuxScale().isZero())
          grads[0] = ScaleOp::create(b, loc, MulOp::create(b, loc, r.getCounts(), dy),
                                     r.getAuxScaleAttr().getValue());
        if (!r.getZScale().isZero())
          grads[2] = ScaleOp::create(b, loc, dy, r.getZScaleAttr().getValue());
        return grads;
      })
      .Default([&](Operation *other) { return llmShapeVJP(b, other, dys, need); });
}

} // namespace

FailureOr<SmallVector<Value>> llmc::emitVJP(OpBuilder &b, Operation *op, ArrayRef<Value> dys,
                                            ArrayRef<bool> need) {
  return llmVJP(b, op, dys, need);
}
