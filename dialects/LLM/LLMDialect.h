//===- LLMDialect.h - the llm dialect ---------------------------*- C++ -*-===//
//
// Model-graph ops on ranked tensors. See LLMOps.td and Rationale.md.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_DIALECTS_LLM_LLMDIALECT_H
#define LLMC_DIALECTS_LLM_LLMDIALECT_H

#include "dialects/Traits.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/LLM/LLMOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/LLM/LLMAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/LLM/LLMInterfaces.h.inc"

#include "dialects/LLM/LLMOps.h.inc"

namespace llmc::llm {

/// Name of the function-argument attribute that marks a parameter.
inline constexpr llvm::StringLiteral kParamAttrName = "llm.param";

/// The parameter attribute of argument `index` of `func`, or null.
ParamAttr getParamAttr(mlir::func::FuncOp func, unsigned index);

} // namespace llmc::llm

#endif
