//===- LLMDialect.cpp - llm dialect registration and attributes -----------===//

#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace llmc::llm;

#include "dialects/LLM/LLMOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/LLM/LLMAttrs.cpp.inc"

void LLMDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/LLM/LLMOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/LLM/LLMAttrs.cpp.inc"
      >();
}

LogicalResult ParamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StringRef name, StringRef init, APFloat scale,
                                bool trainable) {
  if (name.empty())
    return emitError() << "parameter name must not be empty";
  if (init != "normal" && init != "uniform" && init != "zeros" && init != "ones")
    return emitError() << "unknown initializer '" << init
                       << "' (expected normal, uniform, zeros or ones)";
  if ((init == "normal" || init == "uniform") && !(scale.convertToDouble() > 0.0))
    return emitError() << "initializer '" << init << "' needs scale > 0";
  return success();
}

ParamAttr llmc::llm::getParamAttr(func::FuncOp func, unsigned index) {
  return func.getArgAttrOfType<ParamAttr>(index, kParamAttrName);
}

LogicalResult LLMDialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned regionIndex,
                                                   unsigned argIndex,
                                                   NamedAttribute attr) {
  if (attr.getName() != kParamAttrName)
    return op->emitError() << "unknown llm argument attribute '"
                           << attr.getName().getValue() << "'";
  if (!isa<ParamAttr>(attr.getValue()))
    return op->emitError() << "'" << kParamAttrName << "' on argument "
                           << argIndex << " must be a #llm.param attribute";
  auto &region = op->getRegion(regionIndex);
  if (region.empty())
    return success();
  Type type = region.getArgument(argIndex).getType();
  auto tensor = dyn_cast<RankedTensorType>(type);
  // Frozen parameters may also be quantized storage: 8-bit codes, and the
  // int32 zero points of an asymmetric integer scheme.
  bool storage = tensor &&
                 (tensor.getElementType().isInteger(8) || tensor.getElementType().isInteger(32)) &&
                 !cast<ParamAttr>(attr.getValue()).getTrainable();
  if (!tensor || !(isa<FloatType>(tensor.getElementType()) || storage) ||
      !tensor.hasStaticShape())
    return op->emitError() << "parameter argument " << argIndex
                           << " must be a statically shaped float tensor (or, frozen, i8 or "
                              "i32 storage), got "
                           << type;
  return success();
}
