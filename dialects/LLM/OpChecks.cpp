//===- OpChecks.cpp - what the llm ops' shape rules share -----------------===//

#include "dialects/LLM/OpChecks.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace llmc::llm::detail {

RankedTensorType tensorOf(Value value) { return cast<RankedTensorType>(value.getType()); }

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text;
  for (auto [i, dim] : llvm::enumerate(shape)) text += (i ? "x" : "") + std::to_string(dim);
  return shape.empty() ? "scalar" : text;
}

LogicalResult sameElementType(std::optional<Location> loc, Value a, Value b, StringRef aName,
                              StringRef bName) {
  if (tensorOf(a).getElementType() != tensorOf(b).getElementType())
    return emitOptionalError(loc, aName, " and ", bName, " must have the same element type, got ",
                             tensorOf(a).getElementType(), " and ", tensorOf(b).getElementType());
  return success();
}

} // namespace llmc::llm::detail
