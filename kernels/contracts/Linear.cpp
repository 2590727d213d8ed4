//===- Linear.cpp - contract of the matmul with its epilogue --------------===//
//
// Part of llmc: see Linear.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Linear.h"

#include "kernels/Validator.h"

#include <climits>
#include <vector>

namespace llmc::contracts {

namespace {

/// The product's part of both contracts: x [..., K] and w [K, N] (or
/// [N, K] with `transpose_b`) of one float dtype; sets dtype, k, n, rows
/// and `shape`, the product's [..., N].
bool bindProduct(Validator &v, LinearBinding &b, std::vector<int64_t> &shape) {
  const TensorView &x = v.in(0), &w = v.in(1);
  if (!v.isFloat(x, "x") || !v.hasDType(w, "w", x.dtype) || !v.hasRank(w, "w", 2) ||
      !v.fitsInt(x, "x") || !v.fitsInt(w, "w"))
    return false;
  if (x.rank() < 2) return v.fail("x must be [..., K] with rank >= 2, got " + x.describe());
  b.dtype = x.dtype;
  b.k = x.dim(-1);
  b.n = w.dim(b.transposeB ? 0 : 1);
  if (w.dim(b.transposeB ? 1 : 0) != b.k)
    return v.fail("w " + w.describe() + " does not match x " + x.describe() +
                  (b.transposeB ? " (w is [N, K] with transpose_b)" : " (w is [K, N])"));
  shape.assign(x.shape.begin(), x.shape.end() - 1);
  b.rows = product(shape);
  if (b.rows > INT_MAX) return v.fail("x has too many rows for BLAS: " + x.describe());
  shape.push_back(b.n);
  return true;
}

} // namespace

bool bindLinear(const KernelArgs &args, std::string &error, LinearBinding *out) {
  Validator v("linear", args, error);
  LinearBinding b;
  if (!v.flagAttr("transpose_b", &b.transposeB) || !v.flagAttr("gelu", &b.gelu) ||
      !v.flagAttr("keep_pre", &b.keepPre))
    return false;
  if (b.keepPre && !b.gelu) return v.fail("keep_pre needs gelu");
  if (!v.arity(3, 4, b.keepPre ? 2 : 1)) return false;
  std::vector<int64_t> shape;
  if (!bindProduct(v, b, shape)) return false;
  const int inputs = static_cast<int>(args.inputs.size());
  if (inputs == 4 || v.in(2).rank() == 1) b.bias = 2;
  if (inputs == 4 || b.bias < 0) b.residual = inputs - 1;
  if ((b.bias >= 0 && !v.hasType(v.in(b.bias), "bias", b.dtype, {b.n})) ||
      (b.residual >= 0 && !v.hasType(v.in(b.residual), "residual", b.dtype, shape)))
    return false;
  if (b.gelu && (b.bias < 0 || b.residual >= 0))
    return v.fail("gelu needs a bias and takes no residual");
  if (!v.hasType(v.out(0), "y", b.dtype, shape) ||
      (b.keepPre && !v.hasType(v.out(1), "pre", b.dtype, shape)))
    return false;
  *out = b;
  return true;
}

bool bindMatmulGeluGrad(const KernelArgs &args, std::string &error, LinearBinding *out) {
  Validator v("matmul_gelu_grad", args, error);
  LinearBinding b;
  if (!v.flagAttr("transpose_b", &b.transposeB) || !v.flagAttr("bias_grad", &b.biasGrad) ||
      !v.arity(3, b.biasGrad ? 2 : 1))
    return false;
  std::vector<int64_t> shape;
  if (!bindProduct(v, b, shape)) return false;
  b.geluInput = 2;
  if (!v.hasType(v.in(2), "pre", b.dtype, shape) || !v.hasType(v.out(0), "y", b.dtype, shape) ||
      (b.biasGrad && !v.hasType(v.out(1), "db", b.dtype, {b.n})))
    return false;
  *out = b;
  return true;
}

bool bindMatmulSwigluGrad(const KernelArgs &args, std::string &error, LinearBinding *out) {
  Validator v("matmul_swiglu_grad", args, error);
  LinearBinding b;
  if (!v.flagAttr("transpose_b", &b.transposeB) || !v.arity(4, 2)) return false;
  std::vector<int64_t> shape;
  if (!bindProduct(v, b, shape)) return false;
  b.swigluGate = 2, b.swigluUp = 3;
  if (!v.hasType(v.in(2), "gate", b.dtype, shape) || !v.hasType(v.in(3), "up", b.dtype, shape) ||
      !v.hasType(v.out(0), "dgate", b.dtype, shape) || !v.hasType(v.out(1), "dup", b.dtype, shape))
    return false;
  *out = b;
  return true;
}

bool bindLinearWeightGrad(const KernelArgs &args, std::string &error,
                          LinearWeightGradBinding *out) {
  Validator v("linear_weight_grad", args, error);
  LinearWeightGradBinding b;
  if (!v.arity(2, 2)) return false;
  const TensorView &x = v.in(0), &dy = v.in(1);
  if (!v.isFloat(x, "x") || !v.hasDType(dy, "dy", x.dtype) || !v.fitsInt(x, "x") ||
      !v.fitsInt(dy, "dy"))
    return false;
  if (x.rank() < 2 || dy.rank() < 2)
    return v.fail("x and dy must be [..., K] and [..., N] with rank >= 2, got " + x.describe() +
                  " and " + dy.describe());
  b.dtype = x.dtype;
  b.k = x.dim(-1);
  b.n = dy.dim(-1);
  b.rows = product(x.shape, 0, x.shape.size() - 1);
  if (product(dy.shape, 0, dy.shape.size() - 1) != b.rows)
    return v.fail("x " + x.describe() + " and dy " + dy.describe() + " must have as many rows");
  if (b.rows > INT_MAX) return v.fail("x has too many rows for BLAS: " + x.describe());
  if (!v.hasType(v.out(0), "dw", b.dtype, {b.k, b.n}) ||
      !v.hasType(v.out(1), "db", b.dtype, {b.n}))
    return false;
  *out = b;
  return true;
}

void splitLinearWeightGrad(const KernelArgs &args, const LinearWeightGradBinding &b,
                           KernelArgs *product, KernelArgs *sum) {
  product->inputs = {args.inputs[0], args.inputs[1]};
  product->inputs[0].shape = {b.rows, b.k};
  product->inputs[1].shape = {b.rows, b.n};
  product->outputs = {args.outputs[0]};
  product->attrs.setInt("transpose_a", 1);
  sum->inputs = {args.inputs[1]};
  sum->outputs = {args.outputs[1]};
}

} // namespace llmc::contracts
