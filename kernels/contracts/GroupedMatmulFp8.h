//===- GroupedMatmulFp8.h - contract of the grouped fp8 products -*- C++ -*-===//
//
// qat_grouped_matmul_fp8(x, x_scale, offsets, w, w_scale) -> y: grouped_matmul
// (contracts/GroupedMatmul.h) on fp8 codes, group g's rows of y = (x's rows
// · w_g) · x_scale · w_scale[g], summed in fp32; attributes transpose_b,
// x_format, w_format.
//
// qat_grouped_matmul_weight_grad_fp8(x, x_scale, dy, dy_scale, offsets) ->
// dw: grouped_matmul_weight_grad on fp8 codes, group g's gradient scaled by
// x_scale · dy_scale; attributes transpose_b, x_format, dy_format.
//
// Codes travel as bytes, their formats as attributes (2 fp8_e4m3, 3
// fp8_e5m2; never two E5M2). Each scale is [1] (the whole operand's) or
// [G] (one per group). The offsets are data, checked on every run as the
// grouped_matmul kernels check them (invalid ones make every output NaN).
// The CPU (kernels/cpu/grouped_matmul_fp8.cpp) and CUDA
// (kernels/cuda/grouped_matmul_fp8.cu) factories bind through here.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_GROUPEDMATMULFP8_H
#define LLMC_KERNELS_CONTRACTS_GROUPEDMATMULFP8_H

#include "kernels/contracts/GroupedMatmul.h"
#include "kernels/contracts/MatmulFp8.h"

namespace llmc::contracts {

/// The dimensions (dtype: the output's) and the two operands' formats;
/// whether each scale is one per group.
struct GroupedMatmulFp8Binding {
  GroupedMatmulBinding dims;
  fp8::Kind a = fp8::Kind::E4M3, b = fp8::Kind::E4M3;
  bool aScalePerGroup = false, bScalePerGroup = false;
};
inline bool bindGroupedMatmulFp8(const KernelArgs &args, std::string &error,
                                 GroupedMatmulFp8Binding *out);
inline bool bindGroupedMatmulWeightGradFp8(const KernelArgs &args, std::string &error,
                                           GroupedMatmulFp8Binding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace grouped_matmul_fp8_impl {

/// A scale [1] or [groups]; sets `perGroup`.
inline bool groupScale(Validator &v, const TensorView &scale, const char *name, int64_t groups,
                       bool *perGroup) {
  if (!v.hasDType(scale, name, DType::F32))
    return false;
  if (scale.rank() != 1 || (scale.dim(0) != 1 && scale.dim(0) != groups))
    return v.fail(std::string(name) + " must be [1] or one per group ([" + std::to_string(groups) +
                  "]), got " + scale.describe());
  *perGroup = scale.dim(0) == groups && groups > 1;
  return true;
}

/// Codes [rows, cols] as bytes, both dimensions BLAS ints.
inline bool codes2d(Validator &v, const TensorView &t, const char *name) {
  return v.hasDType(t, name, DType::U8) && v.hasRank(t, name, 2) && v.fitsInt(t, name);
}

/// The two formats, never both E5M2.
inline bool formats(Validator &v, const char *aName, const char *bName,
                    GroupedMatmulFp8Binding &b) {
  if (!matmul_fp8_impl::fp8Format(v, aName, &b.a) || !matmul_fp8_impl::fp8Format(v, bName, &b.b))
    return false;
  if (b.a == fp8::Kind::E5M2 && b.b == fp8::Kind::E5M2)
    return v.fail("both operands are E5M2, which no fp8 tensor core multiplies");
  return true;
}

} // namespace grouped_matmul_fp8_impl

inline bool bindGroupedMatmulFp8(const KernelArgs &args, std::string &error,
                                 GroupedMatmulFp8Binding *out) {
  using namespace grouped_matmul_fp8_impl;
  Validator v("qat_grouped_matmul_fp8", args, error);
  GroupedMatmulFp8Binding b;
  GroupedMatmulBinding &d = b.dims;
  if (!v.arity(5, 1) || !v.flagAttr("transpose_b", &d.transposeB) ||
      !formats(v, "x_format", "w_format", b))
    return false;
  const TensorView &x = v.in(0), &w = v.in(3), &y = v.out(0);
  if (!codes2d(v, x, "x") || !grouped_matmul_impl::bindOffsets(v, v.in(2), d))
    return false;
  d.rows = x.dim(0);
  d.k = x.dim(1);
  if (!grouped_matmul_impl::bindStack(v, w, DType::U8, x, d))
    return false;
  if (!groupScale(v, v.in(1), "x_scale", d.groups, &b.aScalePerGroup) ||
      !groupScale(v, v.in(4), "w_scale", d.groups, &b.bScalePerGroup) || !v.isFloat(y, "y") ||
      !v.hasType(y, "y", y.dtype, {d.rows, d.f}))
    return false;
  d.dtype = y.dtype;
  *out = b;
  return true;
}

inline bool bindGroupedMatmulWeightGradFp8(const KernelArgs &args, std::string &error,
                                           GroupedMatmulFp8Binding *out) {
  using namespace grouped_matmul_fp8_impl;
  Validator v("qat_grouped_matmul_weight_grad_fp8", args, error);
  GroupedMatmulFp8Binding b;
  GroupedMatmulBinding &d = b.dims;
  if (!v.arity(5, 1) || !v.flagAttr("transpose_b", &d.transposeB) ||
      !formats(v, "x_format", "dy_format", b))
    return false;
  const TensorView &x = v.in(0), &dy = v.in(2), &dw = v.out(0);
  if (!codes2d(v, x, "x") || !codes2d(v, dy, "dy") ||
      !grouped_matmul_impl::bindOffsets(v, v.in(4), d))
    return false;
  if (dy.dim(0) != x.dim(0))
    return v.fail("dy " + dy.describe() + " must have as many rows as x " + x.describe());
  d.rows = x.dim(0);
  d.k = x.dim(1);
  d.f = dy.dim(1);
  if (!groupScale(v, v.in(1), "x_scale", d.groups, &b.aScalePerGroup) ||
      !groupScale(v, v.in(3), "dy_scale", d.groups, &b.bScalePerGroup) || !v.isFloat(dw, "dw") ||
      !v.hasType(dw, "dw", dw.dtype, d.weightShape()))
    return false;
  d.dtype = dw.dtype;
  *out = b;
  return true;
}

} // namespace llmc::contracts

#endif
