//===- QuantRanges.cpp - a fake quantization's range ---------------------===//

#include "passes/lib/QuantRanges.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "passes/lib/Layout.h"

using namespace mlir;

namespace llmc {

Value rangeOverAxes(OpBuilder &b, Location loc, Value partial, ArrayAttr axes) {
  if (!axes || axes.empty())
    return partial;
  return dist::AllReduceOp::create(b, loc, partial.getType(), partial,
                                   FlatSymbolRefAttr::get(b.getContext(), kMeshName), axes,
                                   b.getStringAttr("max"));
}

Value delayedRange(OpBuilder &b, Location loc, Value histories, Value observed,
                   qat::SchemeAttr scheme, int64_t units) {
  auto scaled = [&](Value v, double factor) -> Value {
    return units == 1 ? v : llm::ScaleOp::create(b, loc, v.getType(), v, b.getF64FloatAttr(factor));
  };
  Value oneRank = scaled(observed, 1.0 / static_cast<double>(units));
  Value range = qat::DelayedRangeOp::create(b, loc, histories, oneRank, scheme);
  qat::AmaxHistoryOp::create(b, loc, histories, oneRank, scheme);
  return scaled(range, static_cast<double>(units));
}

} // namespace llmc
