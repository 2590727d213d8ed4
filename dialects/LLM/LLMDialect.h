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

/// The kernels' attribute `format` (common/QuantScheme.h's number) of the
/// codes that the pools of a kv_cache_write or paged_attention hold: int8
/// for i8 pools, fp8_e4m3 for f8E4M3FN pools; none for float pools and
/// other ops. Buffers hold bytes, so the exec lowering and the IR
/// interpreter pass the element type on as this attribute.
std::optional<int64_t> cacheCodeFormat(mlir::Operation *op);

} // namespace llmc::llm

#endif
