//===- DistDialect.h - the dist dialect -------------------------*- C++ -*-===//
//
// Meshes, shardings and collectives. See DistOps.td and Rationale.md.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_DIALECTS_DIST_DISTDIALECT_H
#define LLMC_DIALECTS_DIST_DISTDIALECT_H

#include "dialects/Traits.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Dist/DistOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/DistOpsAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/Dist/DistOps.h.inc"

#endif
