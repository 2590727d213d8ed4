//===- RowGroupQuant.cpp - fake quantization group by group of rows -------===//

#include "passes/lib/RowGroupQuant.h"

#include "passes/lib/QuantRanges.h"

using namespace mlir;

namespace llmc {

bool quantizesRowGroups(qat::SchemeAttr scheme) {
  StringRef observer = scheme.getObserver();
  return scheme.getGranularity() == "tensor" && (observer == "minmax" || observer == "delayed") &&
         scheme.getOutlier().convertToDouble() <= 0;
}

qat::SchemeAttr perRowScheme(qat::SchemeAttr s) {
  return qat::SchemeAttr::get(s.getContext(), s.getFormat(), "channel", 0, s.getBlock(),
                              s.getSymmetric(), s.getObserver(), s.getMomentum(), s.getOutlier(),
                              s.getHistory(), s.getMargin(), s.getAlgo());
}

qat::SchemeAttr perTensorScheme(qat::SchemeAttr s) {
  return qat::SchemeAttr::get(s.getContext(), s.getFormat(), "tensor", 0, s.getBlock(),
                              s.getSymmetric(), s.getObserver(), s.getMomentum(), s.getOutlier(),
                              s.getHistory(), s.getMargin(), s.getAlgo());
}

Value fakeQuantRowGroups(OpBuilder &b, Location loc, Value x, Value offsets, qat::SchemeAttr scheme,
                         ArrayAttr axes, Value histories, int64_t units) {
  auto type = cast<RankedTensorType>(x.getType());
  auto offsetsType = cast<RankedTensorType>(offsets.getType());
  Type f32 = b.getF32Type();
  qat::SchemeAttr perRow = perRowScheme(scheme);
  Value rows = qat::ObserveOp::create(b, loc, x, Value(), perRow);
  Value groups = qat::GroupRangesOp::create(
      b, loc, RankedTensorType::get({offsetsType.getDimSize(0) - 1, 2}, f32), rows, offsets);
  groups = rangeOverAxes(b, loc, groups, axes);
  if (histories)
    groups = delayedRange(b, loc, histories, groups, scheme, units);
  Value range = qat::RowRangesOp::create(
      b, loc, RankedTensorType::get({type.getDimSize(0), 2}, f32), groups, offsets);
  return qat::FakeQuantOp::create(b, loc, x, range, Value(), perRow);
}

} // namespace llmc
