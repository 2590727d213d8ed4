//===- QATDialect.h - the qat dialect ---------------------------*- C++ -*-===//
//
// Fake quantization for quantization-aware training. See QATOps.td and
// Rationale.md.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_DIALECTS_QAT_QATDIALECT_H
#define LLMC_DIALECTS_QAT_QATDIALECT_H

#include "dialects/Traits.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/QAT/QATOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/QAT/QATOpsAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/QAT/QATOps.h.inc"

#endif
