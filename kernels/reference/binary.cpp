//===- binary.cpp - add, mul, scale references ----------------------------===//
//
// Elementwise arithmetic with trailing broadcast (rhs's shape is a suffix
// of lhs's), one plain loop each.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

RefTensor add(const RefTensor &lhs, const RefTensor &rhs) {
  require(isSuffix(rhs.shape, lhs.shape), "add", "rhs shape must be a suffix of lhs shape");
  RefTensor out = like(lhs);
  int64_t inner = rhs.numel();
  for (int64_t i = 0; i < lhs.numel(); ++i) out.data[i] = lhs.data[i] + rhs.data[i % inner];
  return out;
}

RefTensor mul(const RefTensor &lhs, const RefTensor &rhs) {
  require(isSuffix(rhs.shape, lhs.shape), "mul", "rhs shape must be a suffix of lhs shape");
  RefTensor out = like(lhs);
  int64_t inner = rhs.numel();
  for (int64_t i = 0; i < lhs.numel(); ++i) out.data[i] = lhs.data[i] * rhs.data[i % inner];
  return out;
}

RefTensor scale(const RefTensor &x, double factor) {
  RefTensor out = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = factor * x.data[i];
  return out;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.add",
                        [](const RefCall &c) -> Results { return {add(c.in(0), c.in(1))}; });
LLMC_REGISTER_EVALUATOR("llm.mul",
                        [](const RefCall &c) -> Results { return {mul(c.in(0), c.in(1))}; });
LLMC_REGISTER_EVALUATOR("llm.scale", [](const RefCall &c) -> Results {
  return {scale(c.in(0), c.real("factor"))};
});

} // namespace llmc::ref
