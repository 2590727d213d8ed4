//===- QATDialect.cpp - qat verifiers -------------------------------------===//

#include "dialects/QAT/QATDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

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

LogicalResult SchemeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef format, StringRef granularity, int64_t axis,
                                 int64_t block, bool symmetric, StringRef observer,
                                 APFloat momentum) {
  bool integer = format == "int8" || format == "int4";
  if (!integer && format != "fp8_e4m3" && format != "fp8_e5m2" && format != "nf4")
    return emitError() << "unknown format '" << format
                       << "' (expected int8, int4, fp8_e4m3, fp8_e5m2 or nf4)";
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
  if (observer != "minmax" && observer != "ema")
    return emitError() << "unknown observer '" << observer << "' (expected minmax or ema)";
  double m = momentum.convertToDouble();
  if (!(m > 0 && m < 1))
    return emitError() << "ema momentum must be in (0, 1), got " << m;
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

LogicalResult FakeQuantOp::verify() {
  SchemeAttr scheme = getScheme();
  auto x = cast<RankedTensorType>(getX().getType());
  if (getResult().getType() != x)
    return emitOpError("result type must equal the input type ") << x;
  if (scheme.getGranularity() == "channel" && scheme.getAxis() >= x.getRank())
    return emitOpError("channel axis ") << scheme.getAxis() << " is out of range for rank "
                                        << x.getRank();
  if (scheme.getGranularity() == "block") {
    if (x.getRank() < 1 || x.getShape().back() % scheme.getBlock() != 0)
      return emitOpError("block size ") << scheme.getBlock()
                                        << " does not divide the last dimension ("
                                        << (x.getRank() ? x.getShape().back() : 0) << ")";
  }
  bool ema = scheme.getObserver() == "ema";
  if (ema != static_cast<bool>(getState()) || ema != static_cast<bool>(getNewState()))
    return emitOpError(ema ? "an ema observer needs a state operand and a new_state result"
                           : "only an ema observer carries state");
  if (ema) {
    auto expected = RankedTensorType::get({scheme.groupCount(x.getShape()), 2},
                                          Float32Type::get(getContext()));
    if (getState().getType() != expected || getNewState().getType() != expected)
      return emitOpError("observer state must be ") << expected << " ([groups, min/max])";
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/QAT/QATOps.cpp.inc"
