//===- RefTensor.cpp - the references' dense tensor of doubles ------------===//
//
// RefTensor is the one type every reference takes and returns: a shape and
// its row-major data, nothing else.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"

namespace llmc::ref {

RefTensor RefTensor::zeros(std::vector<int64_t> shape) {
  RefTensor t;
  t.data.assign(static_cast<size_t>(product(shape)), 0.0);
  t.shape = std::move(shape);
  return t;
}

int64_t RefTensor::numel() const { return product(shape); }

} // namespace llmc::ref
