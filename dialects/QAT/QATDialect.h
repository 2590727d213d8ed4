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

namespace llmc::qat {
/// The fp8 element type of a scheme's `format` ("fp8_e4m3": f8E4M3FN,
/// "fp8_e5m2": f8E5M2); null for any other format.
mlir::Type fp8ElementType(mlir::MLIRContext *context, llvm::StringRef format);
/// Whether qat.quantize_fp8 keeps `scheme`'s groups as fp8 codes: an fp8
/// format, symmetric, without outlier columns, one scale per tensor or per
/// slice of dimension 0 (channel axis 0).
bool isFp8ScaledScheme(SchemeAttr scheme);
} // namespace llmc::qat

#endif
