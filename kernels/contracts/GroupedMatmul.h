//===- GroupedMatmul.h - contract of the grouped (expert) matmuls -*- C++ -*-===//
//
// grouped_matmul: inputs x [M, K], offsets [G + 1] (i32 or i64), then G
// weights, each [K, F] or with `transpose_b` [F, K], all of x's float
// dtype; output y [M, F] of x's dtype. Group g is rows [offsets[g],
// offsets[g + 1]) of x and y: y's rows of group g = x's rows · weight g
// (fp32 accumulation, rounded once, as matmul computes it). Groups may be
// empty.
//
// grouped_matmul_weight_grad: inputs x [M, K], dy [M, F] (x's dtype),
// offsets [G + 1]; outputs G gradients, each [K, F] = xᵀ·dy over the
// group's rows, or with `transpose_b` [F, K] = dyᵀ·x; zeros for an empty
// group.
//
// The offsets are data: the binding checks only their shape. They are
// valid when offsets[0] = 0, offsets[G] = M and they never decrease
// (every offset then lies in [0, M]); both backends check them on every
// run, where they are (the CUDA kernels on the device, without a host
// read, so a captured CUDA graph stays valid), and on invalid offsets fill
// every output with NaN, so the loss shows it, rather than read or write
// outside a tensor.
//
// Both backends bind through here.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_GROUPEDMATMUL_H
#define LLMC_KERNELS_CONTRACTS_GROUPEDMATMUL_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

/// The dimensions both grouped kernels derive.
struct GroupedMatmulBinding {
  DType dtype = DType::F32; ///< of every float operand
  int64_t rows = 0, k = 0, f = 0, groups = 0; ///< M, K, F, G
  bool transposeB = false;
  /// The weight's (or gradient's) shape: [K, F], or [F, K] transposed.
  std::vector<int64_t> weightShape() const {
    return transposeB ? std::vector<int64_t>{f, k} : std::vector<int64_t>{k, f};
  }
};
/// grouped_matmul(x, offsets, w_0 ... w_{G-1}) -> y.
inline bool bindGroupedMatmul(const KernelArgs &args, std::string &error,
                              GroupedMatmulBinding *out);
/// grouped_matmul_weight_grad(x, dy, offsets) -> dw_0 ... dw_{G-1}.
inline bool bindGroupedMatmulWeightGrad(const KernelArgs &args, std::string &error,
                                        GroupedMatmulBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace grouped_matmul_impl {

/// x [M, K] of a float dtype, M and K BLAS ints; sets dtype, rows and k.
inline bool bindRows(Validator &v, const TensorView &x, GroupedMatmulBinding &b) {
  if (!v.isFloat(x, "x") || !v.hasRank(x, "x", 2) || !v.fitsInt(x, "x"))
    return false;
  b.dtype = x.dtype;
  b.rows = x.dim(0);
  b.k = x.dim(1);
  return true;
}

/// offsets [G + 1], i32 or i64, for G groups (`per`: what there is one of
/// per group, for the message).
inline bool bindOffsets(Validator &v, const TensorView &offsets, int64_t groups, const char *per) {
  if (!v.isIndex(offsets, "offsets"))
    return false;
  if (offsets.rank() != 1 || offsets.dim(0) != groups + 1)
    return v.fail("offsets must be [" + std::to_string(groups + 1) + "] for " +
                  std::to_string(groups) + " " + per + ", got " + offsets.describe());
  return true;
}

} // namespace grouped_matmul_impl

inline bool bindGroupedMatmul(const KernelArgs &args, std::string &error,
                              GroupedMatmulBinding *out) {
  using namespace grouped_matmul_impl;
  Validator v("grouped_matmul", args, error);
  GroupedMatmulBinding b;
  if (!v.flagAttr("transpose_b", &b.transposeB) || !v.arity(3, SIZE_MAX, 1) ||
      !bindRows(v, v.in(0), b))
    return false;
  b.groups = static_cast<int64_t>(args.inputs.size()) - 2;
  if (!bindOffsets(v, v.in(1), b.groups, b.groups == 1 ? "weight" : "weights"))
    return false;
  const TensorView &w0 = v.in(2);
  if (!v.hasDType(w0, "weight 0", b.dtype) || !v.hasRank(w0, "weight 0", 2) ||
      !v.fitsInt(w0, "weight 0"))
    return false;
  b.f = w0.dim(b.transposeB ? 0 : 1);
  if (w0.dim(b.transposeB ? 1 : 0) != b.k)
    return v.fail(
        "weight 0 " + w0.describe() + " does not match x " + v.in(0).describe() +
        (b.transposeB ? " (weights are [F, K] with transpose_b)" : " (weights are [K, F])"));
  for (int64_t g = 1; g < b.groups; ++g) {
    const std::string name = "weight " + std::to_string(g);
    if (!v.hasType(v.in(2 + g), name.c_str(), b.dtype, w0.shape))
      return false;
  }
  if (!v.hasType(v.out(0), "y", b.dtype, {b.rows, b.f}))
    return false;
  *out = b;
  return true;
}

inline bool bindGroupedMatmulWeightGrad(const KernelArgs &args, std::string &error,
                                        GroupedMatmulBinding *out) {
  using namespace grouped_matmul_impl;
  Validator v("grouped_matmul_weight_grad", args, error);
  GroupedMatmulBinding b;
  if (!v.flagAttr("transpose_b", &b.transposeB))
    return false;
  if (args.outputs.empty())
    return v.fail("expected one output per group, got none");
  b.groups = static_cast<int64_t>(args.outputs.size());
  if (!v.arity(3, args.outputs.size()) || !bindRows(v, v.in(0), b))
    return false;
  const TensorView &dy = v.in(1);
  if (!v.hasDType(dy, "dy", b.dtype) || !v.hasRank(dy, "dy", 2) || !v.fitsInt(dy, "dy"))
    return false;
  if (dy.dim(0) != b.rows)
    return v.fail("dy " + dy.describe() + " must have as many rows as x " + v.in(0).describe());
  b.f = dy.dim(1);
  if (!bindOffsets(v, v.in(2), b.groups, b.groups == 1 ? "output" : "outputs"))
    return false;
  const std::vector<int64_t> shape = b.weightShape();
  for (int64_t g = 0; g < b.groups; ++g) {
    const std::string name = "dw " + std::to_string(g);
    if (!v.hasType(v.out(g), name.c_str(), b.dtype, shape))
      return false;
  }
  *out = b;
  return true;
}

} // namespace llmc::contracts

#endif
