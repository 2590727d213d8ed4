//===- MatmulFp8.h - binding contract of the fp8 GEMM kernels ---*- C++ -*-===//
//
// The checks of qat_quantize_fp8 (fp8 codes of a tensor, one scale or one
// per slice of dimension 0) and
// qat_matmul_fp8 (the product of two such operands), shared by the CPU
// factories (kernels/cpu/matmul_fp8.cpp) and the CUDA ones
// (kernels/cuda/matmul_fp8.cu), so both backends accept the same inputs
// with the same messages. Codes travel as bytes; attributes say their
// formats (common/QuantScheme.h: 2 fp8_e4m3, 3 fp8_e5m2).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_MATMULFP8_H
#define LLMC_KERNELS_CONTRACTS_MATMULFP8_H

#include "common/QuantScheme.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"
#include "kernels/contracts/Matmul.h"

#include <string>
#include <vector>

namespace llmc::contracts {

/// qat_quantize_fp8(x, range) -> codes, scale; attribute format. One scale
/// (range [1, 2], scale [1]) or one per slice of x's dimension 0 (range
/// [x.dim(0), 2], scale [x.dim(0)]: each slice's numel / groups elements
/// are contiguous).
///
/// qat_quantize_fp8(x, range, offsets) -> codes, scale: x [M, K] in a
/// mixture of experts' row groups (offsets [G + 1]), range [G, 2], scale
/// [G]; rows past offsets[G] get code 0. The offsets are data: invalid
/// ones make every scale NaN and every code 0.
struct QuantizeFp8Binding {
  DType dtype = DType::F32; ///< of x
  int64_t numel = 0;
  int64_t groups = 1;
  bool rowGroups = false; ///< groups of rows given by offsets
  int64_t rows = 0;       ///< M, with rowGroups
  fp8::Kind kind = fp8::Kind::E4M3;
};
inline bool bindQuantizeFp8(const KernelArgs &args, std::string &error, QuantizeFp8Binding *out);

/// qat_matmul_fp8(a, a_scale, b, b_scale) -> c [, workspace]; attributes
/// transpose_a, transpose_b, a_format, b_format, fast_accumulation.
/// `dims.dtype` is c's.
struct MatmulFp8Binding {
  MatmulBinding dims;
  fp8::Kind a = fp8::Kind::E4M3, b = fp8::Kind::E4M3;
  /// The GEMM may add partial sums in the tensor cores' narrower
  /// accumulator (cuBLASLt's fast accumulation); the CPU sums in fp32
  /// either way.
  bool fastAccumulation = false;
};
inline bool bindMatmulFp8(const KernelArgs &args, std::string &error, MatmulFp8Binding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace matmul_fp8_impl {

/// An fp8 format attribute (2 fp8_e4m3, 3 fp8_e5m2).
inline bool fp8Format(Validator &v, const char *name, fp8::Kind *out) {
  int64_t format = -1;
  if (!v.intAttr(name, &format, -1))
    return false;
  if (format != static_cast<int64_t>(quant::Format::Fp8E4M3) &&
      format != static_cast<int64_t>(quant::Format::Fp8E5M2))
    return v.fail(std::string("attribute '") + name +
                  "' must be an fp8 format (2 fp8_e4m3, 3 fp8_e5m2), got " +
                  std::to_string(format));
  *out = quant::fp8KindOf(static_cast<quant::Format>(format));
  return true;
}

/// qat_quantize_fp8's form with offsets: x [M, K] in G row groups.
inline bool bindRowGroups(Validator &v, QuantizeFp8Binding *out) {
  const TensorView &x = v.in(0), &offsets = v.in(2);
  if (!v.hasRank(x, "x", 2) || !v.isIndex(offsets, "offsets"))
    return false;
  if (offsets.rank() != 1 || offsets.dim(0) < 2)
    return v.fail("offsets must be [G + 1] for G >= 1 groups, got " + offsets.describe());
  const int64_t groups = offsets.dim(0) - 1;
  if (!v.hasType(v.in(1), "range", DType::F32, {groups, 2}) ||
      !v.hasType(v.out(0), "codes", DType::U8, x.shape) ||
      !v.hasType(v.out(1), "scale", DType::F32, {groups}))
    return false;
  out->dtype = x.dtype;
  out->numel = x.numel();
  out->groups = groups;
  out->rowGroups = true;
  out->rows = x.dim(0);
  return true;
}

} // namespace matmul_fp8_impl

inline bool bindQuantizeFp8(const KernelArgs &args, std::string &error, QuantizeFp8Binding *out) {
  Validator v("qat_quantize_fp8", args, error);
  if (!v.arity(2, 3, 2) || !matmul_fp8_impl::fp8Format(v, "format", &out->kind))
    return false;
  const TensorView &x = v.in(0), &range = v.in(1), &codes = v.out(0);
  if (!v.isFloat(x, "x"))
    return false;
  if (args.inputs.size() == 3)
    return matmul_fp8_impl::bindRowGroups(v, out);
  const int64_t groups = range.rank() == 2 ? range.dim(0) : 0;
  if (groups != 1 && (x.rank() == 0 || groups != x.dim(0)))
    return v.fail("range must be [1, 2] (one scale) or one row per slice of x's dimension 0, "
                  "got " +
                  range.describe() + " for x " + x.describe());
  if (!v.hasType(range, "range", DType::F32, {groups, 2}) ||
      !v.hasType(codes, "codes", DType::U8, x.shape) ||
      !v.hasType(v.out(1), "scale", DType::F32, {groups}))
    return false;
  out->dtype = x.dtype;
  out->numel = x.numel();
  out->groups = groups;
  return true;
}

inline bool bindMatmulFp8(const KernelArgs &args, std::string &error, MatmulFp8Binding *out) {
  Validator v("qat_matmul_fp8", args, error);
  MatmulBinding &d = out->dims;
  // A second output is the CUDA kernel's workspace (the memory plan's).
  if (args.outputs.size() != 1 && args.outputs.size() != 2)
    return v.fail("expects 1 or 2 outputs (c, then an optional workspace), got " +
                  std::to_string(args.outputs.size()));
  if (args.inputs.size() != 4)
    return v.fail("expects 4 inputs (a, a_scale, b, b_scale), got " +
                  std::to_string(args.inputs.size()));
  if (!v.flagAttr("transpose_a", &d.transposeA) || !v.flagAttr("transpose_b", &d.transposeB) ||
      !v.flagAttr("fast_accumulation", &out->fastAccumulation) ||
      !matmul_fp8_impl::fp8Format(v, "a_format", &out->a) ||
      !matmul_fp8_impl::fp8Format(v, "b_format", &out->b))
    return false;
  if (out->a == fp8::Kind::E5M2 && out->b == fp8::Kind::E5M2)
    return v.fail("both operands are E5M2, which no fp8 tensor core multiplies");
  const TensorView &a = v.in(0), &b = v.in(2), &c = v.out(0);
  if (!v.hasDType(a, "a", DType::U8) || !v.hasDType(b, "b", DType::U8) ||
      !v.hasType(v.in(1), "a_scale", DType::F32, {1}) ||
      !v.hasType(v.in(3), "b_scale", DType::F32, {1}) || !v.isFloat(c, "c"))
    return false;
  std::vector<int64_t> shape;
  if (!matmulDims(v, a, b, &d, &shape) || !v.hasType(c, "c", c.dtype, shape))
    return false;
  d.dtype = c.dtype;
  return true;
}

} // namespace llmc::contracts

#endif
