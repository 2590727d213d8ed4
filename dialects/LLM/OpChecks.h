//===- OpChecks.h - what the llm ops' shape rules share ---------*- C++ -*-===//
//
// Helpers of the shape rules and verifiers in LLMOps.cpp, AttentionOps.cpp
// and LossOps.cpp: the dialect's own, not part of its interface.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_DIALECTS_LLM_OPCHECKS_H
#define LLMC_DIALECTS_LLM_OPCHECKS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"

#include <optional>
#include <string>

namespace llmc::llm::detail {

/// `value`'s type, which every llm operand has: a ranked tensor.
mlir::RankedTensorType tensorOf(mlir::Value value);

/// `4x64x128`, the way MLIR spells a shape.
std::string shapeString(llvm::ArrayRef<int64_t> shape);

/// An error at `loc` unless `a` and `b` (named aName, bName) have one
/// element type.
mlir::LogicalResult sameElementType(std::optional<mlir::Location> loc, mlir::Value a, mlir::Value b,
                                    llvm::StringRef aName, llvm::StringRef bName);

/// `adaptor` with the op's inherent attributes. The generated parsers infer
/// result types before the op exists, while those attributes are still in
/// the attribute dictionary and the properties empty, so they are read from
/// there (a built op's dictionary holds only discardable attributes: its
/// properties stand).
template <typename OpT>
typename OpT::Adaptor withParsedAttributes(typename OpT::Adaptor adaptor,
                                           mlir::MLIRContext *context) {
  mlir::DictionaryAttr attrs = adaptor.getAttributes();
  if (!attrs || attrs.empty())
    return adaptor;
  typename OpT::Properties properties = adaptor.getProperties();
  auto emitError = [&] { return mlir::emitError(mlir::UnknownLoc::get(context)); };
  if (failed(OpT::setPropertiesFromAttr(properties, attrs, emitError)))
    return adaptor;
  return typename OpT::Adaptor(adaptor.getOperands(), attrs, properties);
}

/// The rotation attributes llm.rope and the attention ops that apply it
/// share: theta and the Llama 3 scaling (all four or none).
template <typename Op> mlir::LogicalResult verifyRopeAttrs(Op op) {
  if (!(op.getTheta().convertToDouble() > 0))
    return op.emitOpError("theta must be > 0");
  int given = !!op.getScalingFactorAttr() + !!op.getLowFreqFactorAttr() +
              !!op.getHighFreqFactorAttr() + !!op.getOriginalMaxPositionsAttr();
  if (given == 0)
    return mlir::success();
  if (given != 4)
    return op.emitOpError("scaling_factor, low_freq_factor, high_freq_factor and "
                          "original_max_positions go together (Llama 3 scaling)");
  if (!(op.getScalingFactorAttr().getValueAsDouble() > 0))
    return op.emitOpError("scaling_factor must be > 0");
  double low = op.getLowFreqFactorAttr().getValueAsDouble(),
         high = op.getHighFreqFactorAttr().getValueAsDouble();
  if (!(low > 0 && high > low))
    return op.emitOpError("low_freq_factor (")
           << low << ") and high_freq_factor (" << high << ") must satisfy 0 < low < high";
  if (op.getOriginalMaxPositionsAttr().getInt() < 1)
    return op.emitOpError("original_max_positions must be >= 1");
  return mlir::success();
}

} // namespace llmc::llm::detail

#endif
