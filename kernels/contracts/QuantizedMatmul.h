//===- QuantizedMatmul.h - binding contracts of the quantized matmuls -*- C++ -*-===//
//
// The checks and derived numbers of matmul_nf4 and matmul_int (x · W with
// W in quantized storage, expanded inside the product), shared by the CPU
// factories (kernels/cpu/matmul_nf4.cpp, matmul_int.cpp) and the CUDA ones
// (kernels/cuda/matmul_nf4.cu, matmul_int.cu).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_QUANTIZEDMATMUL_H
#define LLMC_KERNELS_CONTRACTS_QUANTIZEDMATMUL_H

#include "common/Nf4Piece.h"
#include "common/QuantScheme.h"
#include "kernels/IntWeight.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"
#include "kernels/contracts/DequantizeNf4.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

/// The product's sizes, common to both kernels: attribute weight_shape is
/// [K, N], or [N, K] with transpose_b.
struct QuantizedProduct {
  DType dtype = DType::F32; ///< x's and y's
  int64_t m = 0;            ///< rows: the product of x's leading dims
  int64_t k = 0, n = 0;
  int64_t rows = 0, cols = 0; ///< W's stored shape (weight_shape)
  bool transposeB = false;
};

/// matmul_nf4(x, codes, absmax_q, absmax_scale, absmax_mean) -> y, with
/// attributes block, weight_shape and transpose_b, and, for a piece of a
/// weight split by tensor parallelism, whole_shape, chunks and
/// piece_offset, and absmax_format (contracts::bindNf4Storage).
struct MatmulNf4Binding : QuantizedProduct {
  int64_t block = 0; ///< elements per absmax, along W's last dimension
  Nf4Piece piece;    ///< where W lies in the whole weight
  quant::AbsmaxFormat absmaxFormat = quant::AbsmaxFormat::Int8;
};
inline bool bindMatmulNf4(const KernelArgs &args, std::string &error, MatmulNf4Binding *out);

/// matmul_int(x, codes, scale[, zero_point]) -> y, with attributes bits,
/// fp8 (8-bit codes that are E4M3 values; symmetric), block or
/// channel_axis (or neither: one scale), weight_shape and transpose_b.
struct MatmulIntBinding : QuantizedProduct {
  IntWeightLayout layout;
  int64_t block = 0; ///< 0 unless grouped in blocks
};
inline bool bindMatmulInt(const KernelArgs &args, std::string &error, MatmulIntBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace quantized_matmul_impl {

/// Checks x (input 0), y (output 0) and the attributes weight_shape and
/// transpose_b; fills the sizes.
inline bool bindProduct(Validator &v, QuantizedProduct &d) {
  std::vector<int64_t> w;
  if (!v.intsAttr("weight_shape", &w) || !v.flagAttr("transpose_b", &d.transposeB))
    return false;
  const TensorView &x = v.in(0), &y = v.out(0);
  if (!v.isFloat(x, "x"))
    return false;
  if (x.rank() < 1)
    return v.fail("x must have rank >= 1, got " + x.describe());
  if (w.size() != 2 || w[0] < 1 || w[1] < 1)
    return v.fail("attribute 'weight_shape' must be two positive sizes");
  d.rows = w[0], d.cols = w[1];
  d.k = d.transposeB ? w[1] : w[0];
  d.n = d.transposeB ? w[0] : w[1];
  if (x.dim(-1) != d.k)
    return v.fail("x " + x.describe() + " must end in the weight's K = " + std::to_string(d.k));
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(d.n);
  if (!v.hasType(y, "y", x.dtype, shape) || !v.fitsInt(x, "x") || !v.fitsInt(y, "y"))
    return false;
  d.m = x.numel() / d.k;
  d.dtype = x.dtype;
  return true;
}

} // namespace quantized_matmul_impl
using namespace quantized_matmul_impl;

inline bool bindMatmulNf4(const KernelArgs &args, std::string &error, MatmulNf4Binding *out) {
  Validator v("matmul_nf4", args, error);
  MatmulNf4Binding d;
  if (!v.arity(5, 1) || !v.intAttr("block", &d.block, 0) || !bindProduct(v, d))
    return false;
  if (d.block < 1 || d.cols % d.block != 0)
    return v.fail("attribute 'block' (" + std::to_string(d.block) +
                  ") must divide the weight's last dimension (" + std::to_string(d.cols) + ")");
  if (!bindNf4Storage(v, 1, {d.rows, d.cols}, d.block, &d.piece, &d.absmaxFormat))
    return false;
  *out = d;
  return true;
}

inline bool bindMatmulInt(const KernelArgs &args, std::string &error, MatmulIntBinding *out) {
  Validator v("matmul_int", args, error);
  MatmulIntBinding d;
  int64_t bits = 0, axis = -1;
  bool fp8 = false;
  if (!v.arity(3, 4, 1) || !v.intAttr("bits", &bits, 0) || !v.intAttr("block", &d.block, 0) ||
      !v.intAttr("channel_axis", &axis, -1) || !v.flagAttr("fp8", &fp8) || !bindProduct(v, d))
    return false;
  if (bits != 8 && bits != 4)
    return v.fail("attribute 'bits' must be 8 or 4, got " + std::to_string(bits));
  if (fp8 && (bits != 8 || args.inputs.size() == 4))
    return v.fail("fp8 codes are 8 bits each and take no zero point");
  if (d.block > 0 && axis >= 0)
    return v.fail("attributes 'block' and 'channel_axis' exclude each other");
  if (d.block < 0 || (d.block > 0 && d.cols % d.block != 0))
    return v.fail("attribute 'block' (" + std::to_string(d.block) +
                  ") must divide the weight's last dimension (" + std::to_string(d.cols) + ")");
  if (axis > 1)
    return v.fail("attribute 'channel_axis' must be 0 or 1, got " + std::to_string(axis));
  const bool asymmetric = args.inputs.size() == 4;
  d.layout = IntWeightLayout::of(static_cast<int>(bits), d.rows, d.cols, axis, d.block, asymmetric);
  d.layout.fp8 = fp8;
  const int64_t groups = d.layout.groups(d.rows);
  if (!v.holds(v.in(1), "codes", DType::U8, intCodeBytes(d.layout.bits, d.rows * d.cols)) ||
      !v.holds(v.in(2), "scale", DType::F32, groups) ||
      (asymmetric && !v.holds(v.in(3), "zero_point", DType::I32, groups)))
    return false;
  *out = d;
  return true;
}

} // namespace llmc::contracts

#endif
