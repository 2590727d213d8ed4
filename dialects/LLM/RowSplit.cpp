//===- RowSplit.cpp - the data-parallel sharding rule of each op ---------===//
//
// RowSplitOpInterface: when may an op run on each rank's block of batch
// rows? Only the ops that can mix rows or misuse a row block implement it;
// llmc-shard asks every op it splits.
//
//===----------------------------------------------------------------------===//

#include "dialects/LLM/LLMDialect.h"

using namespace mlir;

namespace llmc::llm {

LogicalResult TransposeOp::verifyRowSplit(ArrayRef<bool>, int64_t) {
  if (getPermutation()[0] != 0)
    return emitOpError("moves the batch dimension; it cannot be split over ranks");
  return success();
}

LogicalResult ConcatOp::verifyRowSplit(ArrayRef<bool>, int64_t) {
  if (getDim() == 0)
    return emitOpError("concatenates along the batch dimension; it cannot be split");
  return success();
}

/// A slice or pad keeps the rows whole: its operand is already local and
/// its result still has the global shape.
static LogicalResult verifyRowsKept(Operation *op, ArrayRef<int64_t> offsets, int64_t parts) {
  auto in = cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = cast<RankedTensorType>(op->getResult(0).getType());
  if (offsets[0] != 0 || in.getDimSize(0) * parts != out.getDimSize(0))
    return op->emitOpError("cuts the batch dimension; it cannot be split over ranks");
  return success();
}

LogicalResult SliceOp::verifyRowSplit(ArrayRef<bool>, int64_t parts) {
  return verifyRowsKept(*this, getOffsets(), parts);
}

LogicalResult PadOp::verifyRowSplit(ArrayRef<bool>, int64_t parts) {
  return verifyRowsKept(*this, getOffsets(), parts);
}

LogicalResult EmbeddingOp::verifyRowSplit(ArrayRef<bool> rowSplit, int64_t) {
  if (rowSplit[0])
    return emitOpError("uses a batch-derived value as its table");
  return success();
}

LogicalResult MatmulOp::verifyRowSplit(ArrayRef<bool> rowSplit, int64_t) {
  bool a = rowSplit[0], b = rowSplit[1];
  if (getTransposeA() && getA().getType().getRank() == 2)
    return emitOpError("contracts over the batch dimension; it cannot be split");
  if (b && !a)
    return emitOpError("multiplies a replicated value by a batch-derived one");
  if (b && getB().getType().getRank() == 2)
    return emitOpError("uses a batch-derived matrix as a shared weight");
  return success();
}

/// A reshape keeps the order of the elements, so each rank's block of the
/// input's rows is a block of the output's rows whenever the output's
/// leading dimension splits as evenly ([B·T, C] back to [B, T, C] too).
LogicalResult ReshapeOp::verifyRowSplit(ArrayRef<bool>, int64_t parts) {
  auto in = getX().getType(), out = getType();
  if (in.getRank() == 0 || out.getRank() == 0 || out.getDimSize(0) % parts != 0)
    return emitOpError("reshapes the batch dimension away (")
           << in << " to " << out << "); it cannot be split";
  return success();
}

} // namespace llmc::llm

#include "dialects/LLM/LLMInterfaces.cpp.inc"
