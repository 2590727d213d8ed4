//===- linear.cpp - the linear layer's fused ops, unfused -----------------===//
//
// What the fused kernels must equal: matmul, add of the bias, add of the
// residual and, with gelu, gelu, each by its own reference, over x
// flattened to [rows, K]; for the weight gradients, matmul and reduce_sum
// over the rows of x and dy.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

std::vector<RefTensor> linear(const RefTensor &x, const RefTensor &w, const RefTensor *bias,
                              const RefTensor *residual, bool transposeB, bool gelu) {
  require(x.shape.size() >= 2 && w.shape.size() == 2 && (!bias || bias->shape.size() == 1),
          "linear", "x must be [..., K], w a matrix and bias a vector");
  RefTensor rows = x;
  rows.shape = {product(x.shape, 0, x.shape.size() - 1), x.shape.back()};
  RefTensor pre = matmul(rows, w, false, transposeB);
  if (bias)
    pre = add(pre, *bias);
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(pre.shape.back());
  pre.shape = shape;
  if (residual)
    return {add(pre, *residual)};
  if (!gelu)
    return {pre};
  return {ref::gelu(pre), pre};
}

std::vector<RefTensor> linearWeightGrad(const RefTensor &x, const RefTensor &dy) {
  require(x.shape.size() >= 2 && dy.shape.size() >= 2, "linear_weight_grad",
          "x and dy must be [..., K] and [..., N]");
  RefTensor xRows = x, dyRows = dy;
  xRows.shape = {product(x.shape, 0, x.shape.size() - 1), x.shape.back()};
  dyRows.shape = {product(dy.shape, 0, dy.shape.size() - 1), dy.shape.back()};
  require(xRows.shape[0] == dyRows.shape[0], "linear_weight_grad",
          "x and dy must have as many rows");
  return {matmul(xRows, dyRows, true, false), reduceSum(dyRows, {dy.shape.back()})};
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
// linear: operands x, w, bias?, residual?; results y and, with keep_pre,
// the pre-activation.
LLMC_REGISTER_EVALUATOR("llm.linear", [](const RefCall &c) -> Results {
  Results results =
      linear(c.in(0), c.in(1), c.optional(2), c.optional(3), c.flag("transpose_b"), c.flag("gelu"));
  if (!c.flag("keep_pre"))
    results.resize(1);
  return results;
});
// matmul_gelu_grad: dpre and, when the op has the result, its bias
// gradient.
LLMC_REGISTER_EVALUATOR("llm.matmul_gelu_grad", [](const RefCall &c) -> Results {
  Results results = {geluGrad(c.in(2), matmul(c.in(0), c.in(1), false, c.flag("transpose_b")))};
  if (c.resultShapes.size() > 1)
    results.push_back(reduceSum(results[0], c.resultShapes[1]));
  return results;
});
LLMC_REGISTER_EVALUATOR("llm.matmul_swiglu_grad", [](const RefCall &c) -> Results {
  return swigluGrad(c.in(2), c.in(3), matmul(c.in(0), c.in(1), false, c.flag("transpose_b")));
});
LLMC_REGISTER_EVALUATOR("llm.linear_weight_grad", [](const RefCall &c) -> Results {
  return linearWeightGrad(c.in(0), c.in(1));
});

} // namespace llmc::ref
