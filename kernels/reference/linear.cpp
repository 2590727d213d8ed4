//===- linear.cpp - the matmul with its epilogue, unfused -----------------===//
//
// What the fused kernels must equal: matmul, add of the bias and, with
// gelu, gelu, each by its own reference, over x flattened to [rows, K].
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"

namespace llmc::ref {

std::vector<RefTensor> linear(const RefTensor &x, const RefTensor &w, const RefTensor &bias,
                              bool transposeB, bool gelu) {
  require(x.shape.size() >= 2 && w.shape.size() == 2 && bias.shape.size() == 1, "linear",
          "x must be [..., K], w a matrix and bias a vector");
  RefTensor rows = x;
  rows.shape = {product(x.shape, 0, x.shape.size() - 1), x.shape.back()};
  RefTensor pre = add(matmul(rows, w, false, transposeB), bias);
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(pre.shape.back());
  pre.shape = shape;
  if (!gelu)
    return {pre};
  return {ref::gelu(pre), pre};
}

} // namespace llmc::ref
