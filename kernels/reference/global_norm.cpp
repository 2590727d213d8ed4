//===- global_norm.cpp - L2 norm over many tensors reference --------------===//
//
// √(Σ x²) over every element of every input: what gradient clipping
// divides by.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"

namespace llmc::ref {

RefTensor globalNorm(const std::vector<RefTensor> &xs) {
  double sum = 0.0;
  for (const RefTensor &x : xs)
    for (double v : x.data) sum += v * v;
  return RefTensor{{}, {std::sqrt(sum)}};
}

} // namespace llmc::ref
