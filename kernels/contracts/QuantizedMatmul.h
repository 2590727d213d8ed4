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

/// The grouped products over quantized stacked weights: x [M, K], offsets
/// [G + 1] (i32 or i64, data, as grouped_matmul reads them), attribute
/// weight_shape [G, K, F] or with transpose_b [G, F, K]; y [M, F] in x's
/// dtype. `expert` is one expert's product as matmul_int/matmul_nf4 would
/// bind it, with m the most rows an expert can get (all M).
struct GroupedQuantizedProduct {
  QuantizedProduct expert;
  int64_t groups = 0;
};

/// grouped_matmul_int(x, offsets, codes, scale[, zero_point]) -> y:
/// matmul_int's attributes, each expert's slice stored as matmul_int
/// stores a weight of the slice's shape, expert after expert (codes in
/// whole bytes per expert).
struct GroupedMatmulIntBinding : GroupedQuantizedProduct {
  IntWeightLayout layout; ///< one expert's
  int64_t block = 0;
  int64_t expertBytes = 0, expertGroups = 0; ///< one expert's codes and scales
};
inline bool bindGroupedMatmulInt(const KernelArgs &args, std::string &error,
                                 GroupedMatmulIntBinding *out);

/// grouped_matmul_nf4(x, offsets, codes, absmax_q, absmax_scale,
/// absmax_mean) -> y: the stack's NF4 storage, flat (attributes block,
/// absmax_format); each expert's slice whole bytes. A tensor-parallel
/// piece of the stack is a piece of its view [G · rows, cols] (whole_shape,
/// chunks, piece_offset, as matmul_nf4's), each chunk of its rows whole
/// experts' rows.
struct GroupedMatmulNf4Binding : GroupedQuantizedProduct {
  int64_t block = 0;
  quant::AbsmaxFormat absmaxFormat = quant::AbsmaxFormat::Int8;
  Nf4Piece piece; ///< where the stack's view lies in the whole stack's
  /// Expert g's slice as a piece of the whole stack read as [G · rows, cols].
  Nf4Piece expertPiece(int64_t g) const {
    Nf4Piece p;
    p.split = true;
    if (!piece.split) {
      p.rows = {groups * expert.rows, expert.rows, 1, g * expert.rows};
      p.blocks = {expert.cols / block, expert.cols / block, 1, 0};
      return p;
    }
    p.rows = {piece.rows.whole, expert.rows, 1, piece.rows.wholeIndex(g * expert.rows)};
    p.blocks = piece.blocks;
    return p;
  }
};
inline bool bindGroupedMatmulNf4(const KernelArgs &args, std::string &error,
                                 GroupedMatmulNf4Binding *out);

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

/// Checks x (input 0), offsets (input 1), y and the attributes
/// weight_shape and transpose_b of a grouped product; fills the sizes.
inline bool bindGroupedProduct(Validator &v, GroupedQuantizedProduct &d) {
  QuantizedProduct &e = d.expert;
  std::vector<int64_t> w;
  if (!v.intsAttr("weight_shape", &w) || !v.flagAttr("transpose_b", &e.transposeB))
    return false;
  const TensorView &x = v.in(0), &offsets = v.in(1), &y = v.out(0);
  if (!v.isFloat(x, "x") || !v.hasRank(x, "x", 2) || !v.isIndex(offsets, "offsets"))
    return false;
  if (w.size() != 3 || w[0] < 1 || w[1] < 1 || w[2] < 1)
    return v.fail("attribute 'weight_shape' must be three positive sizes [G, rows, cols]");
  d.groups = w[0];
  e.rows = w[1], e.cols = w[2];
  e.k = e.transposeB ? w[2] : w[1];
  e.n = e.transposeB ? w[1] : w[2];
  if (offsets.rank() != 1 || offsets.dim(0) != d.groups + 1)
    return v.fail("offsets must be [G + 1] = [" + std::to_string(d.groups + 1) + "], got " +
                  offsets.describe());
  if (x.dim(1) != e.k)
    return v.fail("x " + x.describe() + " must end in the weights' K = " + std::to_string(e.k));
  if (!v.hasType(y, "y", x.dtype, {x.dim(0), e.n}) || !v.fitsInt(x, "x") || !v.fitsInt(y, "y"))
    return false;
  e.m = x.dim(0);
  e.dtype = x.dtype;
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

inline bool bindGroupedMatmulInt(const KernelArgs &args, std::string &error,
                                 GroupedMatmulIntBinding *out) {
  Validator v("grouped_matmul_int", args, error);
  GroupedMatmulIntBinding d;
  int64_t bits = 0, axis = -1;
  bool fp8 = false;
  if (!v.arity(4, 5, 1) || !v.intAttr("bits", &bits, 0) || !v.intAttr("block", &d.block, 0) ||
      !v.intAttr("channel_axis", &axis, -1) || !v.flagAttr("fp8", &fp8) ||
      !bindGroupedProduct(v, d))
    return false;
  const QuantizedProduct &e = d.expert;
  if (bits != 8 && bits != 4)
    return v.fail("attribute 'bits' must be 8 or 4, got " + std::to_string(bits));
  const bool asymmetric = args.inputs.size() == 5;
  if (fp8 && (bits != 8 || asymmetric))
    return v.fail("fp8 codes are 8 bits each and take no zero point");
  if (d.block > 0 && axis >= 0)
    return v.fail("attributes 'block' and 'channel_axis' exclude each other");
  if (d.block < 0 || (d.block > 0 && e.cols % d.block != 0))
    return v.fail("attribute 'block' (" + std::to_string(d.block) +
                  ") must divide the weights' last dimension (" + std::to_string(e.cols) + ")");
  if (axis > 1)
    return v.fail("attribute 'channel_axis' must be 0 or 1, got " + std::to_string(axis));
  if (bits == 4 && (e.rows * e.cols) % 2 != 0)
    return v.fail("each expert's 4-bit codes must fill whole bytes (" +
                  std::to_string(e.rows * e.cols) + " elements)");
  d.layout = IntWeightLayout::of(static_cast<int>(bits), e.rows, e.cols, axis, d.block, asymmetric);
  d.layout.fp8 = fp8;
  d.expertBytes = intCodeBytes(d.layout.bits, e.rows * e.cols);
  d.expertGroups = d.layout.groups(e.rows);
  if (!v.holds(v.in(2), "codes", DType::U8, d.groups * d.expertBytes) ||
      !v.holds(v.in(3), "scale", DType::F32, d.groups * d.expertGroups) ||
      (asymmetric && !v.holds(v.in(4), "zero_point", DType::I32, d.groups * d.expertGroups)))
    return false;
  *out = d;
  return true;
}

inline bool bindGroupedMatmulNf4(const KernelArgs &args, std::string &error,
                                 GroupedMatmulNf4Binding *out) {
  Validator v("grouped_matmul_nf4", args, error);
  GroupedMatmulNf4Binding d;
  if (!v.arity(6, 1) || !v.intAttr("block", &d.block, 0) || !bindGroupedProduct(v, d) ||
      !bindAbsmaxFormat(v, &d.absmaxFormat))
    return false;
  const QuantizedProduct &e = d.expert;
  if (d.block < 1 || e.cols % d.block != 0)
    return v.fail("attribute 'block' (" + std::to_string(d.block) +
                  ") must divide the weights' last dimension (" + std::to_string(e.cols) + ")");
  if ((e.rows * e.cols) % 2 != 0)
    return v.fail("each expert's 4-bit codes must fill whole bytes (" +
                  std::to_string(e.rows * e.cols) + " elements)");
  if (!bindPiece(v, {d.groups * e.rows, e.cols}, d.block, &d.piece))
    return false;
  if (d.piece.split && (d.piece.rows.extent / d.piece.rows.heldChunks()) % e.rows != 0)
    return v.fail("each chunk of the piece's rows must hold whole experts' rows (" +
                  std::to_string(e.rows) + ")");
  const int64_t n = d.groups * e.rows * e.cols, blocks = n / d.block;
  if (!v.holds(v.in(2), "codes", DType::U8, n / 2) ||
      !v.holds(v.in(3), "absmax_q", DType::U8, blocks) ||
      !v.hasType(v.in(4), "absmax_scale", DType::F32,
                 {quant::nf4ScaleCount(d.piece.wholeBlocks(blocks))}) ||
      !v.isF32Scalar(v.in(5), "absmax_mean"))
    return false;
  *out = d;
  return true;
}

} // namespace llmc::contracts

#endif
