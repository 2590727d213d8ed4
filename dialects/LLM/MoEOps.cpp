//===- MoEOps.cpp - shape rules of the mixture-of-experts ops -------------===//
//
// Tokens are rows of [N, C]; routing makes k copies of each (N·k rows,
// sorted by expert), so every shape here follows from N, k, C and the
// number of experts — none depends on how the tokens are routed.
//
//===----------------------------------------------------------------------===//

#include "common/QuantScheme.h"
#include "dialects/LLM/LLMDialect.h"
#include "dialects/LLM/OpChecks.h"
#include "dialects/Nf4Piece.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"

#include <cmath>

using namespace mlir;
using namespace llmc::llm;
using namespace llmc::llm::detail;

namespace {

/// An attribute an op's shape rule reads: from its properties, or while the
/// op is being parsed (properties not yet filled in) from the dictionary.
template <typename A> A attributeOf(A fromProperties, DictionaryAttr attributes, StringRef name) {
  if (fromProperties || !attributes)
    return fromProperties;
  return dyn_cast_or_null<A>(attributes.get(name));
}

RankedTensorType i32Tensor(MLIRContext *context, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, IntegerType::get(context, 32));
}

RankedTensorType f32Tensor(MLIRContext *context, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, Float32Type::get(context));
}

LogicalResult expectRank2(std::optional<Location> loc, Value v, StringRef name) {
  if (tensorOf(v).getRank() != 2)
    return emitOptionalError(loc, name, " must be rank 2, got ", v.getType());
  return success();
}

/// positions [N, k] for N tokens; weights (if present) [N, k] f32.
LogicalResult checkRouting(std::optional<Location> loc, int64_t tokens, Value positions,
                           Value weights) {
  if (failed(expectRank2(loc, positions, "positions")))
    return failure();
  RankedTensorType pos = tensorOf(positions);
  if (pos.getDimSize(0) != tokens)
    return emitOptionalError(loc, "positions must have ", tokens, " rows (one per token), got ",
                             positions.getType());
  if (weights && (tensorOf(weights).getShape() != pos.getShape() ||
                  !tensorOf(weights).getElementType().isF32()))
    return emitOptionalError(loc, "weights must be f32 of positions' shape ", pos.getDimSize(0),
                             "x", pos.getDimSize(1), ", got ", weights.getType());
  return success();
}

/// The scoring attributes both routing ops carry: `score` softmax or
/// sigmoid, `scale` a finite number > 0, and (moe_route) a bias f32 [E]
/// only with sigmoid scores.
LogicalResult checkScoring(std::optional<Location> loc, StringAttr score, FloatAttr scale,
                           Value bias, int64_t experts) {
  const StringRef kind = score ? score.getValue() : "softmax";
  if (kind != "softmax" && kind != "sigmoid")
    return emitOptionalError(loc, "score must be \"softmax\" or \"sigmoid\", got \"", kind, "\"");
  const double factor = scale ? scale.getValueAsDouble() : 1.0;
  if (!(factor > 0) || std::isinf(factor))
    return emitOptionalError(loc, "scale must be a finite number > 0, got ", factor);
  if (!bias)
    return success();
  if (kind != "sigmoid")
    return emitOptionalError(loc, "a bias needs score = \"sigmoid\" (it corrects sigmoid scores "
                                  "before the top-k)");
  RankedTensorType type = tensorOf(bias);
  if (type.getRank() != 1 || type.getDimSize(0) != experts || !type.getElementType().isF32())
    return emitOptionalError(loc, "bias must be f32 [", experts, "] (one per expert), got ", type);
  return success();
}

} // namespace

LogicalResult MoERouteOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(expectRank2(loc, adaptor.getLogits(), "logits")))
    return failure();
  RankedTensorType logits = tensorOf(adaptor.getLogits());
  const int64_t n = logits.getDimSize(0), e = logits.getDimSize(1);
  auto topK = attributeOf<IntegerAttr>(adaptor.getTopKAttr(), adaptor.getAttributes(), "top_k");
  if (!topK)
    return emitOptionalError(loc, "needs a top_k attribute");
  const int64_t k = topK.getInt();
  if (k < 1 || k > e)
    return emitOptionalError(loc, "top_k must be in [1, ", e, "] for ", e, " experts, got ", k);
  if (failed(checkScoring(
          loc, attributeOf<StringAttr>(adaptor.getScoreAttr(), adaptor.getAttributes(), "score"),
          attributeOf<FloatAttr>(adaptor.getScaleAttr(), adaptor.getAttributes(), "scale"),
          adaptor.getBias(), e)))
    return failure();
  types.append({f32Tensor(context, {n, k}), i32Tensor(context, {n, k}), i32Tensor(context, {n, k}),
                i32Tensor(context, {e + 1}), f32Tensor(context, {e}), f32Tensor(context, {e}),
                f32Tensor(context, {})});
  return success();
}

LogicalResult MoERouteGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(expectRank2(loc, adaptor.getLogits(), "logits")))
    return failure();
  RankedTensorType logits = tensorOf(adaptor.getLogits());
  const int64_t n = logits.getDimSize(0), e = logits.getDimSize(1);
  if (failed(checkRouting(loc, n, adaptor.getExperts(), adaptor.getDweights())))
    return failure();
  RankedTensorType dps = tensorOf(adaptor.getDprobSum());
  if (dps.getRank() != 1 || dps.getDimSize(0) != e || !dps.getElementType().isF32())
    return emitOptionalError(loc, "dprob_sum must be f32 [", e, "], got ", dps);
  if (failed(checkScoring(
          loc, attributeOf<StringAttr>(adaptor.getScoreAttr(), adaptor.getAttributes(), "score"),
          attributeOf<FloatAttr>(adaptor.getScaleAttr(), adaptor.getAttributes(), "scale"), Value(),
          e)))
    return failure();
  types.push_back(logits);
  return success();
}

LogicalResult MoEDispatchOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(expectRank2(loc, adaptor.getX(), "x")))
    return failure();
  RankedTensorType x = tensorOf(adaptor.getX());
  if (failed(checkRouting(loc, x.getDimSize(0), adaptor.getPositions(), adaptor.getWeights())))
    return failure();
  const int64_t copies = x.getDimSize(0) * tensorOf(adaptor.getPositions()).getDimSize(1);
  types.push_back(RankedTensorType::get({copies, x.getDimSize(1)}, x.getElementType()));
  return success();
}

namespace {

/// moe_combine's result for ys [N·k, C] and positions [N, k]: [N, C].
FailureOr<RankedTensorType> combinedType(std::optional<Location> loc, Value ysValue,
                                         Value positions, Value weights) {
  if (failed(expectRank2(loc, ysValue, "ys")) || failed(expectRank2(loc, positions, "positions")))
    return failure();
  RankedTensorType ys = tensorOf(ysValue), pos = tensorOf(positions);
  const int64_t n = pos.getDimSize(0);
  if (failed(checkRouting(loc, n, positions, weights)))
    return failure();
  if (ys.getDimSize(0) != n * pos.getDimSize(1))
    return emitOptionalError(loc, "ys must have ", n * pos.getDimSize(1),
                             " rows (tokens × top_k), got ", ys);
  return RankedTensorType::get({n, ys.getDimSize(1)}, ys.getElementType());
}

} // namespace

LogicalResult MoECombineOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> type =
      combinedType(loc, adaptor.getYs(), adaptor.getPositions(), adaptor.getWeights());
  if (failed(type))
    return failure();
  types.push_back(*type);
  return success();
}

LogicalResult MoECombineWeightGradOp::inferReturnTypes(MLIRContext *context,
                                                       std::optional<Location> loc, Adaptor adaptor,
                                                       SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> combined =
      combinedType(loc, adaptor.getYs(), adaptor.getPositions(), Value());
  if (failed(combined))
    return failure();
  if (adaptor.getDy().getType() != *combined)
    return emitOptionalError(loc, "dy must be ", *combined, " (moe_combine's result), got ",
                             adaptor.getDy().getType());
  types.push_back(f32Tensor(context, tensorOf(adaptor.getPositions()).getShape()));
  return success();
}

namespace {

/// x [rows, K] and offsets [G + 1] for G >= 1 groups; returns G.
FailureOr<int64_t> checkGroups(std::optional<Location> loc, RankedTensorType x, Value offsets) {
  RankedTensorType off = tensorOf(offsets);
  if (x.getRank() != 2)
    return emitOptionalError(loc, "x must be rank 2 [rows, K], got ", x);
  if (off.getRank() != 1 || off.getDimSize(0) < 2)
    return emitOptionalError(loc, "offsets must be [G + 1] for G >= 1 groups, got ", off);
  return off.getDimSize(0) - 1;
}

/// The stacked weights' (or gradients') shape: [G, K, F], or [G, F, K].
SmallVector<int64_t> stackedShape(int64_t groups, int64_t k, int64_t f, bool transposeB) {
  return transposeB ? SmallVector<int64_t>{groups, f, k} : SmallVector<int64_t>{groups, k, f};
}

} // namespace

LogicalResult GroupedMatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorOf(adaptor.getX());
  FailureOr<int64_t> groups = checkGroups(loc, x, adaptor.getOffsets());
  if (failed(groups))
    return failure();
  RankedTensorType w = tensorOf(adaptor.getWeights());
  const bool tb = static_cast<bool>(
      attributeOf<UnitAttr>(adaptor.getTransposeBAttr(), adaptor.getAttributes(), "transpose_b"));
  if (w.getRank() != 3 || w.getDimSize(0) != *groups || w.getDimSize(tb ? 2 : 1) != x.getDimSize(1))
    return emitOptionalError(loc, "weights must be stacked ", tb ? "[G, F, K]" : "[G, K, F]",
                             " with G = ", *groups, " and K = ", x.getDimSize(1), " (x ", x,
                             "), got ", w);
  if (w.getElementType() != x.getElementType())
    return emitOptionalError(loc, "x and the weights must share an element type, got ",
                             x.getElementType(), " and ", w.getElementType());
  types.push_back(
      RankedTensorType::get({x.getDimSize(0), w.getDimSize(tb ? 1 : 2)}, x.getElementType()));
  return success();
}

namespace {

/// The result [M, F] of x [M, K] times stacked weights of `w` ([G, K, F],
/// or [G, F, K] with transposeB) held in quantized storage.
LogicalResult inferQuantizedExperts(std::optional<Location> loc, Value xValue, Value offsets,
                                    ArrayRef<int64_t> w, bool transposeB,
                                    SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorOf(xValue);
  FailureOr<int64_t> groups = checkGroups(loc, x, offsets);
  if (failed(groups))
    return failure();
  if (w.size() != 3 || w[0] != *groups || w[transposeB ? 2 : 1] != x.getDimSize(1))
    return emitOptionalError(loc, "weight_shape must be stacked ",
                             transposeB ? "[G, F, K]" : "[G, K, F]", " with G = ", *groups,
                             " and K = ", x.getDimSize(1), " (x ", x, ")");
  types.push_back(
      RankedTensorType::get({x.getDimSize(0), w[transposeB ? 1 : 2]}, x.getElementType()));
  return success();
}

/// Whether storage operand `v` holds `n` elements (flat); else an error of
/// `op` naming it.
LogicalResult expectExpertStorage(Operation *op, Value v, int64_t n, StringRef what,
                                  ArrayRef<int64_t> w) {
  RankedTensorType t = tensorOf(v);
  if (t.hasStaticShape() && t.getNumElements() == n)
    return success();
  return op->emitOpError() << what << " must hold " << n << " elements for stacked weights ["
                           << w[0] << ", " << w[1] << ", " << w[2] << "], got " << t;
}

/// Each expert's codes must start on a byte: 4-bit codes need an even
/// number of elements per expert.
LogicalResult checkWholeBytes(Operation *op, ArrayRef<int64_t> w, int64_t bits) {
  if (bits == 4 && (w[1] * w[2]) % 2 != 0)
    return op->emitOpError("each expert's ")
           << w[1] << "x" << w[2] << " 4-bit codes must fill whole bytes";
  return success();
}

} // namespace

LogicalResult GroupedMatmulIntOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                   Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferQuantizedExperts(loc, adaptor.getX(), adaptor.getOffsets(), adaptor.getWeightShape(),
                               adaptor.getTransposeB(), types);
}

LogicalResult GroupedMatmulIntOp::verify() {
  ArrayRef<int64_t> w = getWeightShape();
  SmallVector<Type> inferred; // the shapes first: the storage checks index w
  if (failed(inferQuantizedExperts(getLoc(), getX(), getOffsets(), w, getTransposeB(), inferred)))
    return failure();
  const int64_t bits = getBits();
  if (bits != 8 && bits != 4)
    return emitOpError("bits must be 8 or 4, got ") << bits;
  if (getFp8() && (bits != 8 || getZeroPoint()))
    return emitOpError("fp8 codes are 8 bits each and take no zero_point");
  std::optional<int64_t> block = getBlock(), axis = getChannelAxis();
  if (block && axis)
    return emitOpError("give block or channel_axis, not both");
  if (block && (*block < 1 || w.back() % *block != 0))
    return emitOpError("blocks of ")
           << *block << " must divide the weights' last dimension (" << w.back() << ")";
  if (axis && *axis != 0 && *axis != 1)
    return emitOpError("channel_axis (within an expert's slice) must be 0 or 1, got ") << *axis;
  if (failed(checkWholeBytes(*this, w, bits)))
    return failure();
  const int64_t slice = w[1] * w[2];
  const int64_t groups = block ? slice / *block : axis ? w[1 + *axis] : 1;
  if (failed(expectExpertStorage(*this, getCodes(), w[0] * (bits == 8 ? slice : slice / 2), "codes",
                                 w)) ||
      failed(
          expectExpertStorage(*this, getScale(), w[0] * groups, "scale (each expert's groups)", w)))
    return failure();
  if (getZeroPoint() && failed(expectExpertStorage(*this, getZeroPoint(), w[0] * groups,
                                                   "zero_point (each expert's groups)", w)))
    return failure();
  return success();
}

LogicalResult GroupedMatmulNf4Op::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                   Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferQuantizedExperts(loc, adaptor.getX(), adaptor.getOffsets(), adaptor.getWeightShape(),
                               adaptor.getTransposeB(), types);
}

LogicalResult GroupedMatmulNf4Op::verify() {
  ArrayRef<int64_t> w = getWeightShape();
  SmallVector<Type> inferred; // the shapes first: the storage checks index w
  if (failed(inferQuantizedExperts(getLoc(), getX(), getOffsets(), w, getTransposeB(), inferred)))
    return failure();
  const int64_t block = getBlock();
  if (block < 1 || w.back() % block != 0)
    return emitOpError("blocks of ")
           << block << " must divide the weights' last dimension (" << w.back() << ")";
  if (failed(verifyAbsmaxFormat(*this, getAbsmaxFormat())) || failed(checkWholeBytes(*this, w, 4)))
    return failure();
  // A piece of the stack: of its 2-D view, each expert's rows one run of
  // the whole stack's.
  FailureOr<Nf4Piece> piece = verifyNf4Piece(*this, {w[0] * w[1], w[2]}, block, getWholeShape(),
                                             getChunks(), getPieceOffset(), getHeldChunks());
  if (failed(piece))
    return failure();
  if (piece->split && (piece->rows.extent / piece->rows.heldChunks()) % w[1] != 0)
    return emitOpError("each chunk of the piece's rows (")
           << piece->rows.extent / piece->rows.heldChunks() << ") must hold whole experts' rows ("
           << w[1] << ")";
  const int64_t numel = w[0] * w[1] * w[2], groups = numel / block;
  if (failed(expectExpertStorage(*this, getCodes(), numel / 2, "codes (two per byte)", w)) ||
      failed(expectExpertStorage(*this, getAbsmaxQ(), groups, "absmax_q (one per block)", w)) ||
      failed(expectExpertStorage(*this, getAbsmaxScale(),
                                 quant::nf4ScaleCount(piece->wholeBlocks(groups)),
                                 "absmax_scale (one per 256 blocks)", w)))
    return failure();
  return success();
}

LogicalResult GroupedMatmulWeightGradOp::verify() {
  RankedTensorType x = getX().getType(), dy = getDy().getType();
  FailureOr<int64_t> groups = checkGroups(getLoc(), x, getOffsets());
  if (failed(groups))
    return failure();
  if (dy.getRank() != 2 || dy.getDimSize(0) != x.getDimSize(0) ||
      dy.getElementType() != x.getElementType())
    return emitOpError("dy must be [") << x.getDimSize(0) << ", F] of x's element type, got " << dy;
  auto expected = RankedTensorType::get(
      stackedShape(*groups, x.getDimSize(1), dy.getDimSize(1), getTransposeB()),
      dy.getElementType());
  if (getResult().getType() != expected)
    return emitOpError("the result must be ") << expected << ", got " << getResult().getType();
  return success();
}

LogicalResult RouterLossOp::verify() {
  RankedTensorType probSum = getProbSum().getType(), counts = getCounts().getType();
  if (probSum.getRank() != 1 || !probSum.getElementType().isF32())
    return emitOpError("prob_sum must be f32 [experts], got ") << probSum;
  if (counts != probSum)
    return emitOpError("counts must be ") << probSum << " (prob_sum's type), got " << counts;
  return success();
}

//===----------------------------------------------------------------------===//
// Expert parallelism: moe_pack, moe_unpack, moe_regroup, moe_ungroup
//===----------------------------------------------------------------------===//
//
// P ranks, El experts each, slots of S rows: `kept`/`counts` [P, El] give P
// and El, a packed buffer's P·S rows give S.

namespace {

/// counts (or kept) [P, El] with P, El ≥ 1 (`what` names it).
LogicalResult checkPerRankCounts(std::optional<Location> loc, RankedTensorType counts,
                                 StringRef what) {
  if (counts.getRank() != 2 || counts.getDimSize(0) < 1 || counts.getDimSize(1) < 1)
    return emitOptionalError(loc, what, " must be [ranks, experts per rank] with both ≥ 1, got ",
                             counts);
  return success();
}

/// A packed buffer [P·S, width] (`what` names it) for P ranks.
LogicalResult checkSlots(std::optional<Location> loc, RankedTensorType packed, int64_t ranks,
                         StringRef what) {
  if (packed.getRank() != 2 || packed.getDimSize(0) % ranks != 0)
    return emitOptionalError(loc, what, " must be [", ranks, "·S, width] (one slot of S rows per ",
                             "rank), got ", packed);
  return success();
}

/// offsets [P·El + 1] for kept [P, El].
LogicalResult checkExpertOffsets(std::optional<Location> loc, RankedTensorType offsets,
                                 RankedTensorType kept) {
  const int64_t experts = kept.getDimSize(0) * kept.getDimSize(1);
  if (offsets.getRank() != 1 || offsets.getDimSize(0) != experts + 1)
    return emitOptionalError(loc, "offsets must be [", experts + 1, "] for ", kept.getDimSize(0),
                             " ranks × ", kept.getDimSize(1), " experts, got ", offsets);
  return success();
}

/// moe_pack's group_counts [D, E] and group_position (one element in
/// [0, D), or absent: 0; rank offsets shift it later, so 0 is always
/// accepted).
LogicalResult verifyPackGroup(MoEPackOp op) {
  std::optional<ArrayRef<int64_t>> position = op.getGroupPosition();
  if (position && position->size() != 1)
    return op.emitOpError("group_position must have one element (this rank's index among the ")
           << "batch's ranks), got " << position->size();
  if (!op.getGroupCounts()) {
    if (position)
      return op.emitOpError("group_position needs group_counts");
    return success();
  }
  if (op.getCapacityAttr().getInt() == 0)
    return op.emitOpError("group_counts need a capacity > 0 (they count tokens against it)");
  RankedTensorType counts = op.getGroupCounts().getType();
  const int64_t experts = op.getOffsets().getType().getDimSize(0) - 1;
  if (counts.getRank() != 2 || !counts.getElementType().isF32() ||
      counts.getDimSize(1) != experts || counts.getDimSize(0) == 0)
    return op.emitOpError("group_counts must be f32 [ranks ≥ 1, ")
           << experts << "] (each rank's counts of the offsets' " << experts << " experts), got "
           << counts;
  if (position && !counts.isDynamicDim(0) &&
      ((*position)[0] < 0 || (*position)[0] >= counts.getDimSize(0)))
    return op.emitOpError("group_position must lie in [0, ")
           << counts.getDimSize(0) << ") (group_counts' ranks), got " << (*position)[0];
  return success();
}

} // namespace

LogicalResult MoEPackOp::verify() {
  RankedTensorType xs = getXs().getType(), packed = getPacked().getType(),
                   kept = getKept().getType();
  Location loc = getLoc();
  if (failed(expectRank2(loc, getXs(), "xs")) || failed(checkPerRankCounts(loc, kept, "kept")) ||
      failed(checkExpertOffsets(loc, getOffsets().getType(), kept)) ||
      failed(checkSlots(loc, packed, kept.getDimSize(0), "packed")))
    return failure();
  if (packed.getDimSize(1) != xs.getDimSize(1) || packed.getElementType() != xs.getElementType())
    return emitOpError("packed must have xs's width ")
           << xs.getDimSize(1) << " and element type " << xs.getElementType() << ", got " << packed;
  if (getCapacityAttr().getInt() < 0)
    return emitOpError("capacity must be ≥ 0 (0: unlimited), got ") << getCapacityAttr().getInt();
  return verifyPackGroup(*this);
}

LogicalResult MoEUnpackOp::verify() {
  RankedTensorType packed = getPacked().getType(), kept = getKept().getType(),
                   y = getResult().getType();
  Location loc = getLoc();
  if (failed(checkPerRankCounts(loc, kept, "kept")) ||
      failed(checkExpertOffsets(loc, getOffsets().getType(), kept)) ||
      failed(checkSlots(loc, packed, kept.getDimSize(0), "packed")))
    return failure();
  if (y.getRank() != 2 || y.getDimSize(1) != packed.getDimSize(1) ||
      y.getElementType() != packed.getElementType())
    return emitOpError("result must be [rows, ")
           << packed.getDimSize(1) << "] of " << packed.getElementType()
           << " (packed's width and type), got " << y;
  return success();
}

LogicalResult MoERegroupOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType recv = tensorOf(adaptor.getRecv()), counts = tensorOf(adaptor.getCounts());
  if (failed(checkPerRankCounts(loc, counts, "counts")) ||
      failed(checkSlots(loc, recv, counts.getDimSize(0), "recv")))
    return failure();
  types.append({recv, i32Tensor(context, {counts.getDimSize(1) + 1})});
  return success();
}

LogicalResult MoEUngroupOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType grouped = tensorOf(adaptor.getGrouped()), counts = tensorOf(adaptor.getCounts());
  if (failed(checkPerRankCounts(loc, counts, "counts")) ||
      failed(checkSlots(loc, grouped, counts.getDimSize(0), "grouped")))
    return failure();
  types.push_back(grouped);
  return success();
}
