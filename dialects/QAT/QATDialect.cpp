//===- QATDialect.cpp - qat verifiers -------------------------------------===//

#include "dialects/QAT/QATDialect.h"
#include "common/QuantScheme.h"
#include "dialects/Nf4Piece.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace llmc::qat;

#include "dialects/QAT/QATOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/QAT/QATOpsAttrs.cpp.inc"

void QATDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/QAT/QATOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/QAT/QATOpsAttrs.cpp.inc"
      >();
}

/// The delayed-scaling parameters: meaningful (and then checked) under the
/// `delayed` observer only, which needs an fp8 format per tensor or per
/// slice of dimension 0 (one history per expert of a stack or per group of
/// rows).
static LogicalResult verifyDelayed(function_ref<InFlightDiagnostic()> emitError, StringRef format,
                                   StringRef granularity, int64_t axis, StringRef observer,
                                   int64_t history, int64_t margin, StringRef algo) {
  if (observer != "delayed") {
    if (history != 0 || margin != 0 || algo != "max")
      return emitError() << "history, margin and algo need the delayed observer";
    return success();
  }
  if (format != "fp8_e4m3" && format != "fp8_e5m2")
    return emitError() << "delayed scaling needs an fp8 format, got '" << format << "'";
  if (granularity != "tensor" && !(granularity == "channel" && axis == 0))
    return emitError() << "delayed scaling is per tensor or per slice of dimension 0 (channel "
                          "axis 0: an amax history per expert), got granularity "
                       << granularity << (granularity == "channel" ? " axis " : "")
                       << (granularity == "channel" ? std::to_string(axis) : "");
  if (history < 1)
    return emitError() << "delayed scaling's amax history length must be >= 1, got " << history;
  if (margin < 0)
    return emitError() << "delayed scaling's margin must be >= 0, got " << margin;
  if (algo != "max" && algo != "most_recent")
    return emitError() << "unknown amax algorithm '" << algo << "' (expected max or most_recent)";
  return success();
}

LogicalResult SchemeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef format, StringRef granularity, int64_t axis,
                                 int64_t block, bool symmetric, StringRef observer,
                                 APFloat momentum, APFloat outlier, int64_t history,
                                 int64_t margin, StringRef algo) {
  bool integer = format == "int8" || format == "int4" || format == "int3";
  if (!integer && format != "fp8_e4m3" && format != "fp8_e5m2" && format != "nf4")
    return emitError() << "unknown format '" << format
                       << "' (expected int8, int4, int3, fp8_e4m3, fp8_e5m2 or nf4)";
  if (granularity != "tensor" && granularity != "channel" && granularity != "block")
    return emitError() << "unknown granularity '" << granularity
                       << "' (expected tensor, channel or block)";
  if (granularity == "block" ? block < 1 : block != 0)
    return emitError() << "block size " << block << " is only valid (and then required, >= 1) "
                       << "with block granularity";
  if (axis < 0)
    return emitError() << "channel axis must be >= 0, got " << axis;
  if (!symmetric && !integer)
    return emitError() << "format '" << format << "' is symmetric only";
  if (observer != "minmax" && observer != "ema" && observer != "delayed")
    return emitError() << "unknown observer '" << observer
                       << "' (expected minmax, ema or delayed)";
  if (failed(verifyDelayed(emitError, format, granularity, axis, observer, history, margin, algo)))
    return failure();
  double m = momentum.convertToDouble();
  if (!(m > 0 && m < 1))
    return emitError() << "ema momentum must be in (0, 1), got " << m;
  double t = outlier.convertToDouble();
  if (!(t >= 0 && std::isfinite(t)))
    return emitError() << "outlier threshold must be finite and >= 0 (0: none), got " << t;
  if (t > 0 && !integer)
    return emitError() << "outlier columns need an integer format, got '" << format << "'";
  if (t > 0 && granularity == "block")
    return emitError() << "outlier columns need tensor or channel granularity, got block";
  return success();
}

int64_t SchemeAttr::groupCount(ArrayRef<int64_t> shape) const {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (getGranularity() == "channel")
    return shape[getAxis()];
  if (getGranularity() == "block")
    return numel / getBlock();
  return 1;
}

namespace {

/// The scheme's group count for a tensor of `type`, or failure (reported
/// through `emitError`) when the scheme does not fit its shape.
FailureOr<int64_t> groupsFor(SchemeAttr scheme, RankedTensorType type,
                             function_ref<InFlightDiagnostic()> emitError) {
  if (scheme.getGranularity() == "channel" && scheme.getAxis() >= type.getRank()) {
    emitError() << "channel axis " << scheme.getAxis() << " is out of range for rank "
                << type.getRank();
    return failure();
  }
  if (scheme.getGranularity() == "block" &&
      (type.getRank() < 1 || type.getShape().back() % scheme.getBlock() != 0)) {
    emitError() << "block size " << scheme.getBlock() << " does not divide the last dimension ("
                << (type.getRank() ? type.getShape().back() : 0) << ")";
    return failure();
  }
  return scheme.groupCount(type.getShape());
}

RankedTensorType rangeType(MLIRContext *context, int64_t groups) {
  return RankedTensorType::get({groups, 2}, Float32Type::get(context));
}

/// x, range and scheme of a fake_quant or its gradient agree.
LogicalResult verifyRange(Operation *op, Value x, Value range, SchemeAttr scheme) {
  auto emit = [&]() { return op->emitOpError(); };
  FailureOr<int64_t> groups = groupsFor(scheme, cast<RankedTensorType>(x.getType()), emit);
  if (failed(groups))
    return failure();
  auto expected = rangeType(op->getContext(), *groups);
  if (range.getType() != expected)
    return op->emitOpError("range must be ") << expected << " ([groups, −min/max]), got "
                                             << range.getType();
  return success();
}

/// `columns` is present exactly when the scheme has an outlier threshold,
/// and then holds one [−min, max] range per index of x's last dimension.
LogicalResult verifyColumns(Operation *op, Value x, Value columns, SchemeAttr scheme) {
  bool outliers = scheme.getOutlier().convertToDouble() > 0;
  if (!outliers && columns)
    return op->emitOpError("has columns but its scheme has no outlier threshold");
  if (outliers && !columns)
    return op->emitOpError("needs the columns operand (per-column ranges) for its scheme's "
                           "outlier threshold");
  if (!columns)
    return success();
  auto type = cast<RankedTensorType>(x.getType());
  auto expected = rangeType(op->getContext(), type.getRank() ? type.getShape().back() : 0);
  if (columns.getType() != expected)
    return op->emitOpError("columns must be ")
           << expected << " ([last dimension, −min/max]), got " << columns.getType();
  return success();
}

/// A delayed scheme's amax history and the range it records: one history
/// `tensor<(history + 1)xf32>` with `observed` tensor<1x2xf32>, or one per
/// group, `tensor<G x (history + 1) x f32>` with `observed` tensor<Gx2xf32>.
LogicalResult verifyHistoryState(Operation *op, Value state, Value observed, SchemeAttr scheme) {
  if (scheme.getObserver() != "delayed")
    return op->emitOpError("needs a delayed scheme, got observer '")
           << scheme.getObserver() << "'";
  auto type = cast<RankedTensorType>(state.getType());
  int64_t width = scheme.getHistory() + 1;
  bool single = type.getRank() == 1 && type.getDimSize(0) == width;
  bool grouped = type.getRank() == 2 && type.getDimSize(0) >= 1 && type.getDimSize(1) == width;
  if (!single && !grouped)
    return op->emitOpError("state must be tensor<")
           << width << "xf32> or tensor<Gx" << width << "xf32> (per group: the range, then "
           << scheme.getHistory() << " amaxes), got " << state.getType();
  auto expected = rangeType(op->getContext(), grouped ? type.getDimSize(0) : 1);
  if (observed && observed.getType() != expected)
    return op->emitOpError("observed must be ")
           << expected << " (a range per history), got " << observed.getType();
  return success();
}

} // namespace

LogicalResult ObserveOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                          ObserveOp::Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto emit = [&]() { return mlir::emitError(loc ? *loc : UnknownLoc::get(context)); };
  FailureOr<int64_t> groups =
      groupsFor(adaptor.getScheme(), cast<RankedTensorType>(adaptor.getX().getType()), emit);
  if (failed(groups))
    return failure();
  types.push_back(rangeType(context, *groups));
  return success();
}

LogicalResult ObserveOp::verify() {
  return verifyColumns(*this, getX(), getColumns(), getScheme());
}

LogicalResult FakeQuantOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                            FakeQuantOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getX().getType());
  return success();
}

LogicalResult FakeQuantOp::verify() {
  if (failed(verifyRange(*this, getX(), getRange(), getScheme())))
    return failure();
  return verifyColumns(*this, getX(), getColumns(), getScheme());
}

LogicalResult FakeQuantGradOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                                FakeQuantGradOp::Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getX().getType());
  return success();
}

LogicalResult FakeQuantGradOp::verify() {
  if (failed(verifyRange(*this, getX(), getRange(), getScheme())))
    return failure();
  return verifyColumns(*this, getX(), getColumns(), getScheme());
}

LogicalResult DequantizeNf4Op::verify() {
  auto result = cast<RankedTensorType>(getResult().getType());
  int64_t block = getBlock();
  if (block < 1 || result.getRank() < 1 || result.getShape().back() % block != 0)
    return emitOpError("blocks of ") << block << " must divide the last dimension of " << result;
  FailureOr<Nf4Piece> piece = verifyNf4Piece(*this, result.getShape(), block, getWholeShape(),
                                             getChunks(), getPieceOffset(), getHeldChunks());
  if (failed(piece) || failed(verifyAbsmaxFormat(*this, getAbsmaxFormat())))
    return failure();
  int64_t numel = result.getNumElements();
  int64_t groups = numel / block;
  int64_t scales = quant::nf4ScaleCount(piece->wholeBlocks(groups));
  // Whole storage is flat, as the file holds it; a piece's may be shaped.
  auto expect = [&](Value v, int64_t n, StringRef what, bool flat) -> LogicalResult {
    auto t = cast<RankedTensorType>(v.getType());
    if ((t.getRank() == 1 || !flat) && t.hasStaticShape() && t.getNumElements() == n)
      return success();
    return emitOpError() << what << (flat ? " must be 1-D of " : " must hold ") << n
                         << " elements for " << result << ", got " << t;
  };
  if (failed(expect(getCodes(), (numel + 1) / 2, "codes (two per byte)", !piece->split)) ||
      failed(expect(getAbsmaxQ(), groups, "absmax_q (one per block)", !piece->split)) ||
      failed(expect(getAbsmaxScale(), scales, "absmax_scale (one per 256 blocks)", true)))
    return failure();
  return success();
}

LogicalResult EmaOp::verify() {
  auto type = cast<RankedTensorType>(getState().getType());
  if (type.getRank() != 2 || type.getDimSize(1) != 2)
    return emitOpError("state must be [groups, 2] (−min, max), got ") << type;
  double m = getMomentum().convertToDouble();
  if (!(m >= 0 && m <= 1))
    return emitOpError("momentum must be in [0, 1], got ") << m;
  return success();
}

/// The groups of an offsets tensor [G + 1], or failure.
static FailureOr<int64_t> groupsOf(Operation *op, Value offsets) {
  auto type = cast<RankedTensorType>(offsets.getType());
  if (type.getRank() != 1 || type.getDimSize(0) < 2)
    return op->emitOpError("offsets must be [G + 1] for G >= 1 groups, got ") << type;
  return type.getDimSize(0) - 1;
}

LogicalResult QuantizeGradOp::verify() {
  // One range for the whole gradient: quantize_grad observes dy itself.
  qat::SchemeAttr scheme = getScheme();
  bool delayed = scheme.getObserver() == "delayed";
  if (scheme.getGranularity() != "tensor" || scheme.getObserver() == "ema" ||
      !scheme.getSymmetric() || scheme.getOutlier().convertToDouble() > 0)
    return emitOpError("scheme must be per tensor, symmetric, minmax or delayed, without "
                       "outlier columns");
  if (delayed != static_cast<bool>(getState()))
    return emitOpError(delayed ? "needs the state operand (dY's amax history) for its delayed "
                                 "scheme"
                               : "has a state operand but its scheme is not delayed");
  if (getOffsets() && cast<RankedTensorType>(getX().getType()).getRank() != 2)
    return emitOpError("with offsets, x must be the rows [M, F], got ") << getX().getType();
  if (getBatchRanks() < 1 || (!delayed && getBatchRanks() != 1))
    return emitOpError("batch_ranks must be >= 1, and 1 without a delayed scheme, got ")
           << getBatchRanks();
  FailureOr<int64_t> groups = getOffsets() ? groupsOf(*this, getOffsets()) : FailureOr<int64_t>(1);
  if (failed(groups))
    return failure();
  if (!delayed)
    return success();
  if (failed(verifyHistoryState(*this, getState(), Value(), scheme)))
    return failure();
  // One history per group of rows with offsets, one for the tensor without.
  auto state = cast<RankedTensorType>(getState().getType());
  if (getOffsets() ? state.getRank() != 2 || state.getDimSize(0) != *groups : state.getRank() != 1)
    return emitOpError("state must hold ")
           << (getOffsets() ? std::to_string(*groups) + " histories, one per group of rows"
                            : std::string("one history (no offsets)"))
           << ", got " << state;
  return success();
}

LogicalResult DelayedRangeOp::verify() {
  return verifyHistoryState(*this, getState(), getObserved(), getScheme());
}

LogicalResult AmaxHistoryOp::verify() {
  return verifyHistoryState(*this, getState(), getObserved(), getScheme());
}

/// The fp8 element type of `format` ("fp8_e4m3", "fp8_e5m2"); null for any
/// other format.
Type llmc::qat::fp8ElementType(MLIRContext *context, StringRef format) {
  if (format == "fp8_e4m3")
    return Float8E4M3FNType::get(context);
  if (format == "fp8_e5m2")
    return Float8E5M2Type::get(context);
  return {};
}

void QuantizeFp8Op::build(OpBuilder &builder, OperationState &state, Value x, Value range,
                          Value offsets, SchemeAttr scheme) {
  auto type = cast<RankedTensorType>(x.getType());
  Type codes = type.clone(fp8ElementType(builder.getContext(), scheme.getFormat()));
  int64_t groups = offsets ? cast<RankedTensorType>(offsets.getType()).getDimSize(0) - 1
                           : scheme.groupCount(type.getShape());
  auto scale = RankedTensorType::get({groups}, builder.getF32Type());
  build(builder, state, codes, scale, x, range, offsets, scheme);
}

/// Whether `scheme` gives one fp8 scale per tensor or per slice of
/// dimension 0: symmetric, no outlier columns.
bool llmc::qat::isFp8ScaledScheme(SchemeAttr scheme) {
  bool perSlice = scheme.getGranularity() == "channel" && scheme.getAxis() == 0;
  return fp8ElementType(scheme.getContext(), scheme.getFormat()) &&
         (scheme.getGranularity() == "tensor" || perSlice) && scheme.getSymmetric() &&
         scheme.getOutlier().convertToDouble() <= 0;
}

LogicalResult QuantizeFp8Op::verify() {
  SchemeAttr scheme = getScheme();
  if (!isFp8ScaledScheme(scheme))
    return emitOpError("scheme must be fp8 (fp8_e4m3 or fp8_e5m2), symmetric, per tensor or per "
                       "slice of dimension 0 (channel axis 0), without outlier columns");
  auto x = cast<RankedTensorType>(getX().getType());
  if (getOffsets())
    return verifyRowGroups();
  if (failed(verifyRange(*this, getX(), getRange(), scheme)))
    return failure();
  Type element = fp8ElementType(getContext(), scheme.getFormat());
  if (getCodes().getType() != x.clone(element))
    return emitOpError("codes must be ") << x.clone(element) << " (x's shape in the scheme's "
                                         << "format), got " << getCodes().getType();
  auto scale =
      RankedTensorType::get({scheme.groupCount(x.getShape())}, Float32Type::get(getContext()));
  if (getScale().getType() != scale)
    return emitOpError("scale must be ")
           << scale << " (one per group), got " << getScale().getType();
  return success();
}

/// Whether two fp8 operand types are both E5M2 (no tensor core multiplies
/// them).
static bool bothE5M2(Type a, Type b) {
  return isa<Float8E5M2Type>(cast<RankedTensorType>(a).getElementType()) &&
         isa<Float8E5M2Type>(cast<RankedTensorType>(b).getElementType());
}

LogicalResult MatmulFp8Op::verify() {
  auto a = cast<RankedTensorType>(getA().getType()), b = cast<RankedTensorType>(getB().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  auto scalar = RankedTensorType::get({1}, Float32Type::get(getContext()));
  if (getAScale().getType() != scalar || getBScale().getType() != scalar)
    return emitOpError("scales must be tensor<1xf32>");
  if (bothE5M2(a, b))
    return emitOpError("multiplies two E5M2 operands, which no fp8 tensor core does");
  if (a.getRank() < 2 || (b.getRank() != 2 && b.getRank() != a.getRank()))
    return emitOpError("a must have rank >= 2 and b rank 2 or a's, got ") << a << " and " << b;
  int64_t rank = a.getRank();
  ArrayRef<int64_t> as = a.getShape(), bs = b.getShape();
  bool ta = getTransposeA(), tb = getTransposeB();
  int64_t m = ta ? as[rank - 1] : as[rank - 2], k = ta ? as[rank - 2] : as[rank - 1];
  int64_t kb = tb ? bs.back() : bs[bs.size() - 2], n = tb ? bs[bs.size() - 2] : bs.back();
  if (k != kb)
    return emitOpError("contraction dims differ: a ")
           << a << " has K = " << k << ", b " << b << " has K = " << kb;
  if (b.getRank() == rank && as.drop_back(2) != bs.drop_back(2))
    return emitOpError("batched b must have a's leading dims, got ") << a << " and " << b;
  SmallVector<int64_t> shape(as.drop_back(2));
  shape.append({m, n});
  if (result.getShape() != ArrayRef<int64_t>(shape))
    return emitOpError("result must have shape [") << shape << "], got " << result;
  return success();
}

/// With offsets: x [M, K] quantized group by group of rows, a range and a
/// scale per group.
LogicalResult QuantizeFp8Op::verifyRowGroups() {
  FailureOr<int64_t> groups = groupsOf(*this, getOffsets());
  if (failed(groups))
    return failure();
  auto x = cast<RankedTensorType>(getX().getType());
  if (getScheme().getGranularity() != "tensor" || x.getRank() != 2)
    return emitOpError("with offsets, x must be the rows [M, K] and the scheme per tensor (per "
                       "group of rows), got ")
           << x;
  auto f32 = Float32Type::get(getContext());
  if (getRange().getType() != RankedTensorType::get({*groups, 2}, f32))
    return emitOpError("range must be ") << RankedTensorType::get({*groups, 2}, f32)
                                         << " (one per group), got " << getRange().getType();
  Type element = fp8ElementType(getContext(), getScheme().getFormat());
  if (getCodes().getType() != x.clone(element))
    return emitOpError("codes must be ") << x.clone(element) << ", got " << getCodes().getType();
  if (getScale().getType() != RankedTensorType::get({*groups}, f32))
    return emitOpError("scale must be ") << RankedTensorType::get({*groups}, f32)
                                         << " (one per group), got " << getScale().getType();
  return success();
}

LogicalResult GroupRangesOp::verify() {
  FailureOr<int64_t> groups = groupsOf(*this, getOffsets());
  if (failed(groups))
    return failure();
  auto rows = cast<RankedTensorType>(getRows().getType());
  if (rows.getRank() != 2 || rows.getDimSize(1) != 2)
    return emitOpError("rows must be [M, 2] ranges, got ") << rows;
  auto result = RankedTensorType::get({*groups, 2}, Float32Type::get(getContext()));
  if (getResult().getType() != result)
    return emitOpError("result must be ") << result << ", got " << getResult().getType();
  return success();
}

LogicalResult RowRangesOp::verify() {
  FailureOr<int64_t> groups = groupsOf(*this, getOffsets());
  if (failed(groups))
    return failure();
  auto f32 = Float32Type::get(getContext());
  if (getGroups().getType() != RankedTensorType::get({*groups, 2}, f32))
    return emitOpError("groups must be ")
           << RankedTensorType::get({*groups, 2}, f32) << ", got " << getGroups().getType();
  auto result = cast<RankedTensorType>(getResult().getType());
  if (result.getRank() != 2 || result.getDimSize(1) != 2)
    return emitOpError("result must be [M, 2] ranges, got ") << result;
  return success();
}

/// Checks a grouped fp8 operand's scale: tensor<1xf32> or one per group.
static LogicalResult verifyGroupScale(Operation *op, StringRef name, Value scale, int64_t groups) {
  auto type = cast<RankedTensorType>(scale.getType());
  if (type.getRank() != 1 || (type.getDimSize(0) != 1 && type.getDimSize(0) != groups))
    return op->emitOpError() << name << " must be tensor<1xf32> or one per group (tensor<" << groups
                             << "xf32>), got " << type;
  return success();
}

LogicalResult GroupedMatmulFp8Op::verify() {
  FailureOr<int64_t> groups = groupsOf(*this, getOffsets());
  if (failed(groups))
    return failure();
  auto x = cast<RankedTensorType>(getX().getType()), w = cast<RankedTensorType>(getW().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (bothE5M2(x, w))
    return emitOpError("multiplies two E5M2 operands, which no fp8 tensor core does");
  if (x.getRank() != 2 || w.getRank() != 3)
    return emitOpError("x must be [M, K] and w the stacked [G, K, F] (or [G, F, K]), got ")
           << x << " and " << w;
  bool tb = getTransposeB();
  int64_t k = w.getDimSize(tb ? 2 : 1), f = w.getDimSize(tb ? 1 : 2);
  if (w.getDimSize(0) != *groups || k != x.getDimSize(1))
    return emitOpError("w ") << w << " does not match x " << x << " and " << *groups
                             << " groups (stacked weights are "
                             << (tb ? "[G, F, K] with transpose_b)" : "[G, K, F])");
  if (result.getShape() != ArrayRef<int64_t>{x.getDimSize(0), f})
    return emitOpError("result must be [") << x.getDimSize(0) << ", " << f << "], got " << result;
  if (failed(verifyGroupScale(*this, "x_scale", getXScale(), *groups)))
    return failure();
  return verifyGroupScale(*this, "w_scale", getWScale(), *groups);
}

LogicalResult GroupedMatmulWeightGradFp8Op::verify() {
  FailureOr<int64_t> groups = groupsOf(*this, getOffsets());
  if (failed(groups))
    return failure();
  auto x = cast<RankedTensorType>(getX().getType()), dy = cast<RankedTensorType>(getDy().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (bothE5M2(x, dy))
    return emitOpError("multiplies two E5M2 operands, which no fp8 tensor core does");
  if (x.getRank() != 2 || dy.getRank() != 2 || x.getDimSize(0) != dy.getDimSize(0))
    return emitOpError("x [M, K] and dy [M, F] must have the same rows, got ")
           << x << " and " << dy;
  int64_t k = x.getDimSize(1), f = dy.getDimSize(1);
  SmallVector<int64_t> shape =
      getTransposeB() ? SmallVector<int64_t>{*groups, f, k} : SmallVector<int64_t>{*groups, k, f};
  if (result.getShape() != ArrayRef<int64_t>(shape))
    return emitOpError("result must be [") << shape << "], got " << result;
  if (failed(verifyGroupScale(*this, "x_scale", getXScale(), *groups)))
    return failure();
  return verifyGroupScale(*this, "dy_scale", getDyScale(), *groups);
}

#define GET_OP_CLASSES
#include "dialects/QAT/QATOps.cpp.inc"
