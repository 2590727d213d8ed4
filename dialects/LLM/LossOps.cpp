//===- LossOps.cpp - shape rules of the losses and the fused head ---------===//
//
// Cross-entropy (whole, vocabulary-parallel partials and their finish),
// the fused LM head + loss (linear_cross_entropy and its train, partial
// and gradient forms) and the row maximum a sharded loss shifts by.
//
//===----------------------------------------------------------------------===//

#include "common/HeadScratch.h"
#include "dialects/LLM/LLMDialect.h"
#include "dialects/LLM/OpChecks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace llmc::llm;
using namespace llmc::llm::detail;

static LogicalResult checkLossShapes(std::optional<Location> loc, Value logits, Value targets) {
  RankedTensorType lt = tensorOf(logits);
  if (lt.getRank() < 1)
    return emitOptionalError(loc, "logits must have a vocabulary dimension");
  if (tensorOf(targets).getShape() != lt.getShape().drop_back())
    return emitOptionalError(loc, "targets must be ", shapeString(lt.getShape().drop_back()),
                             " to match logits ", shapeString(lt.getShape()), ", got ",
                             shapeString(tensorOf(targets).getShape()));
  return success();
}

/// `numClasses` (0: every column) leaves out at most the last columns of
/// `logits`.
static LogicalResult checkNumClasses(Operation *op, Value logits, int64_t numClasses) {
  int64_t width = tensorOf(logits).getShape().back();
  if (numClasses < 0 || numClasses > width)
    return op->emitOpError("num_classes = ")
           << numClasses << " must be in [0, " << width << "] (the logits' columns; 0: all)";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(checkLossShapes(getLoc(), getLogits(), getTargets())))
    return failure();
  return checkNumClasses(*this, getLogits(), getNumClasses());
}

LogicalResult CrossEntropyGradOp::verify() {
  return checkNumClasses(*this, getLogits(), getNumClasses());
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                   Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkLossShapes(loc, adaptor.getLogits(), adaptor.getTargets())))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

/// The per-row statistics of a vocabulary-parallel loss are fp32 `rows`.
static LogicalResult checkRowStats(std::optional<Location> loc, ArrayRef<int64_t> rows, Value stat,
                                   StringRef name) {
  if (tensorOf(stat).getShape() != rows)
    return emitOptionalError(loc, name, " must be ", shapeString(rows), ", got ",
                             shapeString(tensorOf(stat).getShape()));
  return success();
}

/// What a fused head op returns before its scratch.
enum class HeadResults {
  Loss,        ///< the loss
  LossAndGrad, ///< the loss, dh, dw (no dw with frozen_weight)
  RowStats,    ///< max, sumexp, target_logit (a vocabulary shard's)
  Grad,        ///< dh, dw (no dw with frozen_weight)
};

/// Rows the fused head's scratch holds beyond its chunk (common/HeadScratch.h).
static int64_t accumulatorRows(RankedTensorType h, int64_t chunk, HeadResults results,
                               bool frozenWeight) {
  const bool weightGrad =
      (results == HeadResults::LossAndGrad || results == HeadResults::Grad) && !frozenWeight;
  const int64_t width = h.getShape().back();
  return llmc::headAccumulatorRows(h.getNumElements() / width, width, chunk,
                                   !h.getElementType().isF32(), weightGrad);
}

/// The shapes of the fused head + loss: h [..., D], w [V, D] (transpose_b)
/// or [D, V], targets h's leading shape, fp32 throughout; pushes `results`
/// (without dw when `frozenWeight`), then the scratch [chunk_rows (+ D
/// where dw sums over chunks in fp32), V].
template <typename Adaptor>
static LogicalResult inferLinearCrossEntropy(MLIRContext *context, std::optional<Location> loc,
                                             Adaptor adaptor, HeadResults results,
                                             SmallVectorImpl<Type> &types,
                                             bool frozenWeight = false) {
  RankedTensorType h = tensorOf(adaptor.getH()), w = tensorOf(adaptor.getW());
  Type f32 = Float32Type::get(context);
  if (failed(sameElementType(loc, adaptor.getH(), adaptor.getW(), "h", "w")))
    return failure();
  if (h.getRank() < 2 || w.getRank() != 2)
    return emitOptionalError(loc, "h must be [..., D] and w a matrix, got ",
                             shapeString(h.getShape()), " and ", shapeString(w.getShape()));
  bool transposeB = static_cast<bool>(adaptor.getTransposeB());
  int64_t d = h.getShape().back(), vocab = w.getShape()[transposeB ? 0 : 1];
  if (w.getShape()[transposeB ? 1 : 0] != d)
    return emitOptionalError(loc, "w ", shapeString(w.getShape()), " does not match h's width ", d,
                             transposeB ? " (w is [V, D] with transpose_b)" : " (w is [D, V])");
  if (tensorOf(adaptor.getTargets()).getShape() != h.getShape().drop_back())
    return emitOptionalError(loc, "targets must be ", shapeString(h.getShape().drop_back()),
                             ", got ", shapeString(tensorOf(adaptor.getTargets()).getShape()));
  int64_t chunk = adaptor.getChunkRows();
  if (chunk < 1)
    return emitOptionalError(loc, "chunk_rows must be >= 1, got ", chunk);
  if (results == HeadResults::Loss || results == HeadResults::LossAndGrad)
    types.push_back(RankedTensorType::get({}, f32));
  if (results == HeadResults::RowStats)
    types.append(3, RankedTensorType::get(h.getShape().drop_back(), f32));
  if (results == HeadResults::LossAndGrad || results == HeadResults::Grad) {
    types.push_back(h);
    if (!frozenWeight)
      types.push_back(w);
  }
  types.push_back(RankedTensorType::get(
      {chunk + accumulatorRows(h, chunk, results, frozenWeight), vocab}, f32));
  return success();
}

LogicalResult LinearCrossEntropyOp::inferReturnTypes(MLIRContext *context,
                                                     std::optional<Location> loc, Adaptor adaptor,
                                                     SmallVectorImpl<Type> &types) {
  return inferLinearCrossEntropy(context, loc,
                                 withParsedAttributes<LinearCrossEntropyOp>(adaptor, context),
                                 HeadResults::Loss, types);
}

LogicalResult LinearCrossEntropyTrainOp::inferReturnTypes(MLIRContext *context,
                                                          std::optional<Location> loc,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type> &types) {
  auto parsed = withParsedAttributes<LinearCrossEntropyTrainOp>(adaptor, context);
  return inferLinearCrossEntropy(context, loc, parsed, HeadResults::LossAndGrad, types,
                                 parsed.getFrozenWeight());
}

/// The whole-vocabulary head's `num_classes` leaves out at most w's last
/// classes.
template <typename HeadOp> static LogicalResult verifyHeadClasses(HeadOp op) {
  int64_t vocab = op.getW().getType().getShape()[op.getTransposeB() ? 0 : 1];
  const int64_t classes = static_cast<int64_t>(op.getNumClasses());
  if (classes < 0 || classes > vocab)
    return op.emitOpError("num_classes = ")
           << classes << " must be in [0, " << vocab << "] (w's classes; 0: all)";
  return success();
}

LogicalResult LinearCrossEntropyOp::verify() { return verifyHeadClasses(*this); }
LogicalResult LinearCrossEntropyTrainOp::verify() { return verifyHeadClasses(*this); }

/// A vocabulary shard's `classes` columns from `offset` fit in `total`.
static LogicalResult checkClassRange(Operation *op, int64_t classes, int64_t offset,
                                     int64_t total) {
  if (total < 1 || offset < 0 || offset + classes > total)
    return op->emitOpError("classes [")
           << offset << ", " << offset + classes << ") do not fit in num_classes = " << total;
  return success();
}

LogicalResult LinearCrossEntropyPartialOp::inferReturnTypes(MLIRContext *context,
                                                            std::optional<Location> loc,
                                                            Adaptor adaptor,
                                                            SmallVectorImpl<Type> &types) {
  return inferLinearCrossEntropy(
      context, loc, withParsedAttributes<LinearCrossEntropyPartialOp>(adaptor, context),
      HeadResults::RowStats, types);
}

LogicalResult LinearCrossEntropyPartialOp::verify() {
  int64_t classes = getW().getType().getShape()[getTransposeB() ? 0 : 1];
  return checkClassRange(*this, classes, getClassOffset(), getNumClasses());
}

LogicalResult LinearCrossEntropyPartialGradOp::inferReturnTypes(MLIRContext *context,
                                                                std::optional<Location> loc,
                                                                Adaptor adaptor,
                                                                SmallVectorImpl<Type> &types) {
  auto parsed = withParsedAttributes<LinearCrossEntropyPartialGradOp>(adaptor, context);
  if (failed(inferLinearCrossEntropy(context, loc, parsed, HeadResults::Grad, types,
                                     parsed.getFrozenWeight())))
    return failure();
  ArrayRef<int64_t> rows = tensorOf(adaptor.getTargets()).getShape();
  for (auto [stat, name] : {std::pair<Value, StringRef>{adaptor.getShift(), "shift"},
                            {adaptor.getDsumexp(), "dsumexp"},
                            {adaptor.getDtargetLogit(), "dtarget_logit"}})
    if (failed(checkRowStats(loc, rows, stat, name)))
      return failure();
  return success();
}

LogicalResult LinearCrossEntropyPartialGradOp::verify() {
  int64_t classes = getW().getType().getShape()[getTransposeB() ? 0 : 1];
  return checkClassRange(*this, classes, getClassOffset(), getNumClasses());
}

LogicalResult ReduceMaxOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorOf(adaptor.getX());
  if (x.getRank() < 1)
    return emitOptionalError(loc, "input must have rank >= 1");
  types.push_back(RankedTensorType::get(x.getShape().drop_back(), Float32Type::get(context)));
  return success();
}

/// Logits `rows × [V]`, targets and shift `rows` (a loss shard's inputs).
static LogicalResult checkPartialOperands(std::optional<Location> loc, Value logits, Value targets,
                                          Value shift) {
  if (failed(checkLossShapes(loc, logits, targets)))
    return failure();
  return checkRowStats(loc, tensorOf(logits).getShape().drop_back(), shift, "shift");
}

LogicalResult CrossEntropyPartialOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type> &types) {
  if (failed(
          checkPartialOperands(loc, adaptor.getLogits(), adaptor.getTargets(), adaptor.getShift())))
    return failure();
  types.append(2, adaptor.getShift().getType());
  return success();
}

LogicalResult CrossEntropyPartialOp::verify() {
  return checkClassRange(*this, getLogits().getType().getShape().back(), getClassOffset(),
                         getNumClasses());
}

LogicalResult CrossEntropyPartialGradOp::inferReturnTypes(MLIRContext *,
                                                          std::optional<Location> loc,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type> &types) {
  // dsumexp and dtarget_logit have shift's type (AllTypesMatch).
  if (failed(
          checkPartialOperands(loc, adaptor.getLogits(), adaptor.getTargets(), adaptor.getShift())))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult CrossEntropyFinishOp::verify() {
  ArrayRef<int64_t> rows = getTargets().getType().getShape();
  for (auto [value, name] : {std::pair<Value, StringRef>{getSumexp(), "sumexp"},
                             {getShift(), "shift"},
                             {getTargetLogit(), "target_logit"}})
    if (failed(checkRowStats(getLoc(), rows, value, name)))
      return failure();
  return success();
}

LogicalResult CrossEntropyFinishGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                         Adaptor adaptor,
                                                         SmallVectorImpl<Type> &types) {
  if (failed(checkRowStats(loc, tensorOf(adaptor.getTargets()).getShape(), adaptor.getSumexp(),
                           "sumexp")))
    return failure();
  types.append(3, adaptor.getSumexp().getType());
  return success();
}
