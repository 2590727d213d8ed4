//===- VJPRules.h - the one table of vector-Jacobian products ---*- C++ -*-===//
#ifndef LLMC_PASSES_LIB_VJPRULES_H
#define LLMC_PASSES_LIB_VJPRULES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

namespace llmc {

/// Emits, at `builder`'s insertion point, the gradient of each operand of
/// `op` given the gradients of its results (`resultGrads[i]` is null when
/// result i has no gradient, i.e. zero). `needsGrad[i]` says whether operand
/// i needs one; the returned vector has one entry per operand, null where no
/// gradient is needed or the operand is not differentiable. Fails with a
/// diagnostic at the op when no rule exists.
mlir::FailureOr<llvm::SmallVector<mlir::Value>> emitVJP(mlir::OpBuilder &builder,
                                                        mlir::Operation *op,
                                                        llvm::ArrayRef<mlir::Value> resultGrads,
                                                        llvm::ArrayRef<bool> needsGrad);

} // namespace llmc

#endif
