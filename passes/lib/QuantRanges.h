//===- DelayedRange.h - a delayed scheme's range and its record -*- C++ -*-===//
//
// Delayed fp8 scaling at one site: the range the amax histories give
// (qat.delayed_range) and the record of this step's observed range into
// them (qat.amax_history). Used by llmc-qat for weights and inputs, and by
// qat.quantize_grad's VJP for dY, whose amaxes are kept in one rank's
// units.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_DELAYEDRANGE_H
#define LLMC_PASSES_LIB_DELAYEDRANGE_H

#include "dialects/QAT/QATDialect.h"

#include "mlir/IR/Builders.h"

namespace llmc {

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
