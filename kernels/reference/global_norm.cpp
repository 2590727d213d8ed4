//===- global_norm.cpp - L2 norm over many tensors reference --------------===//
//
// √(Σ x²) over every element of every input: what gradient clipping
// divides by.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

RefTensor globalNorm(const std::vector<RefTensor> &xs) {
  double sum = 0.0;
  for (const RefTensor &x : xs)
    for (double v : x.data) sum += v * v;
  return RefTensor{{}, {std::sqrt(sum)}};
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.global_norm", [](const RefCall &c) -> Results {
  RefTensor n = globalNorm(c.variadic(0));
  if (c.flag("squared"))
    n.data[0] *= n.data[0];
  return {n};
});
LLMC_REGISTER_EVALUATOR("llm.sqrt", [](const RefCall &c) -> Results {
  RefTensor t = c.in(0);
  for (double &v : t.data) v = std::sqrt(v);
  return {t};
});

} // namespace llmc::ref
