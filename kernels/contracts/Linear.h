//===- Linear.h - contract of the matmul with its epilogue ------*- C++ -*-===//
//
// linear: inputs x [..., K] (any leading shape), w [K, N] or [N, K]
// (transpose_b), then a bias [N], a residual [..., N] (y's shape) or both
// in that order (a 1-D third input is the bias), all of one float dtype;
// output y [..., N] = x·w + bias + residual, each sum rounded to the dtype
// as add rounds it, or with `gelu` (bias, no residual) the tanh GELU of
// x·w + bias. With `keep_pre` (gelu only) a second output pre [..., N]
// receives x·w + bias.
//
// matmul_gelu_grad: inputs x [..., K], w as linear's, and pre [..., N],
// GELU's input, all of one float dtype; output y [..., N] =
// gelu_grad(pre, x·w), the product rounded to the dtype as matmul rounds
// it: the gradient of GELU's input from the data-gradient product of the
// layer after it. With `bias_grad` a second output db [N] = y's rows
// summed, as reduce_sum sums them.
//
// matmul_swiglu_grad: inputs x and w as matmul_gelu_grad's, then gate and
// up [..., N]; outputs dgate and dup [..., N] = swiglu_grad(gate, up,
// x·w), the product rounded as matmul rounds it.
//
// linear_weight_grad: inputs x [..., K] and dy [..., N] of one float dtype
// with as many rows; outputs dw [K, N] = xᵀ·dy and db [N], dy's rows
// summed: the layer's weight and bias gradients.
//
// Both backends bind through here.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_LINEAR_H
#define LLMC_KERNELS_CONTRACTS_LINEAR_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

struct LinearBinding {
  DType dtype = DType::F32; ///< of every operand
  int64_t rows = 0, k = 0, n = 0;
  bool transposeB = false, gelu = false, keepPre = false;
  int bias = -1, residual = -1; ///< input index, -1 where absent
  int geluInput = -1; ///< matmul_gelu_grad: the input index of pre
  bool biasGrad = false; ///< matmul_gelu_grad: output 1 sums y's rows
  int swigluGate = -1, swigluUp = -1; ///< matmul_swiglu_grad: their input indices
};
inline bool bindLinear(const KernelArgs &args, std::string &error, LinearBinding *out);
inline bool bindMatmulGeluGrad(const KernelArgs &args, std::string &error, LinearBinding *out);
inline bool bindMatmulSwigluGrad(const KernelArgs &args, std::string &error, LinearBinding *out);

struct LinearWeightGradBinding {
  DType dtype = DType::F32; ///< of every operand
  int64_t rows = 0, k = 0, n = 0;
};
inline bool bindLinearWeightGrad(const KernelArgs &args, std::string &error,
                                 LinearWeightGradBinding *out);
/// The two kernels linear_weight_grad is without a fused one: `product`,
/// dw = (x as [rows, K])ᵀ · (dy as [rows, N]) (a matmul), and `sum`, db =
/// dy's rows summed (a reduce_sum).
inline void splitLinearWeightGrad(const KernelArgs &args, const LinearWeightGradBinding &b,
                                  KernelArgs *product, KernelArgs *sum);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace linear_impl {

/// The product's part of both contracts: x [..., K] and w [K, N] (or
/// [N, K] with `transpose_b`) of one float dtype; sets dtype, k, n, rows
/// and `shape`, the product's [..., N].
inline bool bindProduct(Validator &v, LinearBinding &b, std::vector<int64_t> &shape) {
  const TensorView &x = v.in(0), &w = v.in(1);
  if (!v.isFloat(x, "x") || !v.hasDType(w, "w", x.dtype) || !v.hasRank(w, "w", 2) ||
      !v.fitsInt(x, "x") || !v.fitsInt(w, "w"))
    return false;
  if (x.rank() < 2)
    return v.fail("x must be [..., K] with rank >= 2, got " + x.describe());
  b.dtype = x.dtype;
  b.k = x.dim(-1);
  b.n = w.dim(b.transposeB ? 0 : 1);
  if (w.dim(b.transposeB ? 1 : 0) != b.k)
    return v.fail("w " + w.describe() + " does not match x " + x.describe() +
                  (b.transposeB ? " (w is [N, K] with transpose_b)" : " (w is [K, N])"));
  shape.assign(x.shape.begin(), x.shape.end() - 1);
  b.rows = product(shape);
  if (b.rows > INT_MAX)
    return v.fail("x has too many rows for BLAS: " + x.describe());
  shape.push_back(b.n);
  return true;
}

} // namespace linear_impl
using namespace linear_impl;

inline bool bindLinear(const KernelArgs &args, std::string &error, LinearBinding *out) {
  Validator v("linear", args, error);
  LinearBinding b;
  if (!v.flagAttr("transpose_b", &b.transposeB) || !v.flagAttr("gelu", &b.gelu) ||
      !v.flagAttr("keep_pre", &b.keepPre))
    return false;
  if (b.keepPre && !b.gelu)
    return v.fail("keep_pre needs gelu");
  if (!v.arity(3, 4, b.keepPre ? 2 : 1))
    return false;
  std::vector<int64_t> shape;
  if (!bindProduct(v, b, shape))
    return false;
  const int inputs = static_cast<int>(args.inputs.size());
  if (inputs == 4 || v.in(2).rank() == 1)
    b.bias = 2;
  if (inputs == 4 || b.bias < 0)
    b.residual = inputs - 1;
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

inline bool bindMatmulGeluGrad(const KernelArgs &args, std::string &error, LinearBinding *out) {
  Validator v("matmul_gelu_grad", args, error);
  LinearBinding b;
  if (!v.flagAttr("transpose_b", &b.transposeB) || !v.flagAttr("bias_grad", &b.biasGrad) ||
      !v.arity(3, b.biasGrad ? 2 : 1))
    return false;
  std::vector<int64_t> shape;
  if (!bindProduct(v, b, shape))
    return false;
  b.geluInput = 2;
  if (!v.hasType(v.in(2), "pre", b.dtype, shape) || !v.hasType(v.out(0), "y", b.dtype, shape) ||
      (b.biasGrad && !v.hasType(v.out(1), "db", b.dtype, {b.n})))
    return false;
  *out = b;
  return true;
}

inline bool bindMatmulSwigluGrad(const KernelArgs &args, std::string &error, LinearBinding *out) {
  Validator v("matmul_swiglu_grad", args, error);
  LinearBinding b;
  if (!v.flagAttr("transpose_b", &b.transposeB) || !v.arity(4, 2))
    return false;
  std::vector<int64_t> shape;
  if (!bindProduct(v, b, shape))
    return false;
  b.swigluGate = 2, b.swigluUp = 3;
  if (!v.hasType(v.in(2), "gate", b.dtype, shape) || !v.hasType(v.in(3), "up", b.dtype, shape) ||
      !v.hasType(v.out(0), "dgate", b.dtype, shape) || !v.hasType(v.out(1), "dup", b.dtype, shape))
    return false;
  *out = b;
  return true;
}

inline bool bindLinearWeightGrad(const KernelArgs &args, std::string &error,
                                 LinearWeightGradBinding *out) {
  Validator v("linear_weight_grad", args, error);
  LinearWeightGradBinding b;
  if (!v.arity(2, 2))
    return false;
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
  if (b.rows > INT_MAX)
    return v.fail("x has too many rows for BLAS: " + x.describe());
  if (!v.hasType(v.out(0), "dw", b.dtype, {b.k, b.n}) || !v.hasType(v.out(1), "db", b.dtype, {b.n}))
    return false;
  *out = b;
  return true;
}

inline void splitLinearWeightGrad(const KernelArgs &args, const LinearWeightGradBinding &b,
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

#endif
