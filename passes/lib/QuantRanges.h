//===- QuantRanges.h - a fake quantization's range -------------*- C++ -*-===//
//
// The range one fake quantization uses: what the ranks holding pieces of
// the tensor observed, combined (an all_reduce max over their mesh axes),
// and under delayed fp8 scaling the range the amax histories give
// (qat.delayed_range) with the record of this step's range into them
// (qat.amax_history). Used by llmc-qat for weights and inputs, by the row
// groups of experts, and by qat.quantize_grad's VJP for dY, whose amaxes
// are kept in one rank's units.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_QUANTRANGES_H
#define LLMC_PASSES_LIB_QUANTRANGES_H

#include "dialects/QAT/QATDialect.h"

#include "mlir/IR/Builders.h"

namespace llmc {

/// `partial`, the range (or ranges) of a piece of a tensor, combined into
/// the whole tensor's: the max over the mesh axes `axes` that split it,
/// or `partial` itself where none do.
mlir::Value rangeOverAxes(mlir::OpBuilder &b, mlir::Location loc, mlir::Value partial,
                          mlir::ArrayAttr axes);

/// The range `histories` (one, or one per group) give the tensor whose
/// combined range this step is `observed`, after recording `observed`.
/// `units`: how many times one rank's values the tensor's are (dY of a
/// rank's share of the batch's mean loss: the batch ranks' count); the
/// histories record observed / units and the range is theirs times units,
/// so every layout keeps one rank's histories and quantizes as one rank
/// would.
mlir::Value delayedRange(mlir::OpBuilder &b, mlir::Location loc, mlir::Value histories,
                         mlir::Value observed, qat::SchemeAttr scheme, int64_t units = 1);

} // namespace llmc

#endif
