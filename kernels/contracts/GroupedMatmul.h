//===- GroupedMatmul.h - contract of the grouped (expert) matmuls -*- C++ -*-===//
//
// grouped_matmul: inputs x [M, K], offsets [G + 1] (i32 or i64), the G
// groups' weights stacked, [G, K, F] or with `transpose_b` [G, F, K], of
// x's float dtype; output y [M, F] of x's dtype. Group g is rows
// [offsets[g], offsets[g + 1]) of x and y: y's rows of group g = x's rows ·
// weight g (fp32 accumulation, rounded once, as matmul computes it).
// Groups may be empty; rows from offsets[G] to M belong to no group and
// are zero in y (an expert-parallel buffer sized for the worst case).
//
// grouped_matmul_weight_grad: inputs x [M, K], dy [M, F] (x's dtype),
// offsets [G + 1]; output the stacked gradients [G, K, F], group g's = xᵀ·dy
// over its rows, or with `transpose_b` [G, F, K], dyᵀ·x; zeros for an
// empty group. Rows past offsets[G] are not read.
//
// The offsets are data: the binding checks only their shape. They are
// valid when offsets[0] = 0, they never decrease and offsets[G] <= M
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
  /// The stacked weights' (or gradients') shape: [G, K, F], or [G, F, K]
  /// transposed.
  std::vector<int64_t> weightShape() const {
    return transposeB ? std::vector<int64_t>{groups, f, k} : std::vector<int64_t>{groups, k, f};
  }
};
/// grouped_matmul(x, offsets, w) -> y.
inline bool bindGroupedMatmul(const KernelArgs &args, std::string &error,
                              GroupedMatmulBinding *out);
/// grouped_matmul_weight_grad(x, dy, offsets) -> dw.
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

/// offsets [G + 1], i32 or i64, G >= 1; sets groups.
inline bool bindOffsets(Validator &v, const TensorView &offsets, GroupedMatmulBinding &b) {
  if (!v.isIndex(offsets, "offsets"))
    return false;
  if (offsets.rank() != 1 || offsets.dim(0) < 2)
    return v.fail("offsets must be [G + 1] for G >= 1 groups, got " + offsets.describe());
  b.groups = offsets.dim(0) - 1;
  return true;
}

/// The stacked weights `w` named `name` of `dtype`: [G, K, F], or [G, F,
/// K] with transpose_b, for b's groups and K; sets f.
inline bool bindStack(Validator &v, const TensorView &w, const char *name, DType dtype,
                      const TensorView &x, GroupedMatmulBinding &b) {
  if (!v.hasDType(w, name, dtype) || !v.hasRank(w, name, 3) || !v.fitsInt(w, name))
    return false;
  b.f = w.dim(b.transposeB ? 1 : 2);
  if (w.dim(0) != b.groups || w.dim(b.transposeB ? 2 : 1) != b.k)
    return v.fail(std::string(name) + " " + w.describe() + " does not match x " + x.describe() +
                  " and " + std::to_string(b.groups) + " groups (stacked weights are " +
                  (b.transposeB ? "[G, F, K] with transpose_b)" : "[G, K, F])"));
  return true;
}

/// The stacked weights `w` of `dtype`: [G, K, F], or [G, F, K] with
/// transpose_b, for b's groups and K (x's); sets f.
inline bool bindStack(Validator &v, const TensorView &w, DType dtype, const TensorView &x,
                      GroupedMatmulBinding &b) {
  if (!v.hasDType(w, "weights", dtype) || !v.hasRank(w, "weights", 3) || !v.fitsInt(w, "weights"))
    return false;
  b.f = w.dim(b.transposeB ? 1 : 2);
  if (w.dim(0) != b.groups || w.dim(b.transposeB ? 2 : 1) != b.k)
    return v.fail("weights " + w.describe() + " do not match x " + x.describe() + " and " +
                  std::to_string(b.groups) + " groups (stacked weights are " +
                  (b.transposeB ? "[G, F, K] with transpose_b)" : "[G, K, F])"));
  return true;
}

} // namespace grouped_matmul_impl

inline bool bindGroupedMatmul(const KernelArgs &args, std::string &error,
                              GroupedMatmulBinding *out) {
  using namespace grouped_matmul_impl;
  Validator v("grouped_matmul", args, error);
  GroupedMatmulBinding b;
  if (!v.flagAttr("transpose_b", &b.transposeB) || !v.arity(3, 1) || !bindRows(v, v.in(0), b) ||
      !bindOffsets(v, v.in(1), b))
    return false;
  if (!bindStack(v, v.in(2), b.dtype, v.in(0), b))
    return false;
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
  if (!v.flagAttr("transpose_b", &b.transposeB) || !v.arity(3, 1) || !bindRows(v, v.in(0), b))
    return false;
  const TensorView &dy = v.in(1);
  if (!v.hasDType(dy, "dy", b.dtype) || !v.hasRank(dy, "dy", 2) || !v.fitsInt(dy, "dy"))
    return false;
  if (dy.dim(0) != b.rows)
    return v.fail("dy " + dy.describe() + " must have as many rows as x " + v.in(0).describe());
  b.f = dy.dim(1);
  if (!bindOffsets(v, v.in(2), b) || !v.hasType(v.out(0), "dw", b.dtype, b.weightShape()))
    return false;
  *out = b;
  return true;
}

} // namespace llmc::contracts

#endif
