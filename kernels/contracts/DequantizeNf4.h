//===- DequantizeNf4.h - binding contract of qat_dequantize_nf4 -*- C++ -*-===//
//
// The checks and derived numbers of qat_dequantize_nf4 (QLoRA's NF4 weight
// expansion: packed codes, double-quantized absmax), shared by the CPU
// factory (kernels/cpu/dequantize_nf4.cpp) and the CUDA one
// (kernels/cuda/dequantize_nf4.cu); and of NF4 storage operands, which
// matmul_nf4 reads too.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_DEQUANTIZENF4_H
#define LLMC_KERNELS_CONTRACTS_DEQUANTIZENF4_H

#include "common/Nf4Piece.h"
#include "common/QuantScheme.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {
class Validator;
} // namespace llmc

namespace llmc::contracts {

/// qat_dequantize_nf4(codes, absmax_q, absmax_scale, absmax_mean) -> result.
struct DequantizeNf4Binding {
  DType dtype = DType::F32; ///< the result's
  int64_t block = 0;        ///< elements per absmax
  int64_t numel = 0, groups = 0, scales = 0;
  Nf4Piece piece; ///< where the result lies in the whole weight
  quant::AbsmaxFormat absmaxFormat = quant::AbsmaxFormat::Int8;
};
inline bool bindDequantizeNf4(const KernelArgs &args, std::string &error,
                              DequantizeNf4Binding *out);

/// Checks inputs `first`..`first + 3` as the NF4 storage (codes, absmax_q,
/// absmax_scale, absmax_mean) of a weight of `shape` in blocks of `block`
/// (which divides its last dimension), and reads the optional attributes
/// that place a 2-D weight in a whole one split by tensor parallelism:
/// whole_shape [R, C], chunks [row chunks, column chunks] and piece_offset
/// [first row, first column within each chunk] — all three or none — and
/// absmax_format, how absmax_q holds its levels (quant::AbsmaxFormat; 0,
/// int8, when absent). Whole, the codes and absmax_q are flat; a piece's
/// hold its elements in any shape, and absmax_scale holds the whole
/// weight's scales.
inline bool bindNf4Storage(Validator &v, size_t first, const std::vector<int64_t> &shape,
                           int64_t block, Nf4Piece *piece, quant::AbsmaxFormat *absmaxFormat);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace dequantize_nf4_impl {

/// Reads whole_shape, chunks, piece_offset and the optional held_chunks
/// into `piece` (left whole when none is given).
inline bool bindPiece(Validator &v, const std::vector<int64_t> &shape, int64_t block,
                      Nf4Piece *piece) {
  const KernelAttrs &a = v.attrs();
  if (!a.hasInts("whole_shape") && !a.hasInts("chunks") && !a.hasInts("piece_offset") &&
      !a.hasInts("held_chunks"))
    return true;
  std::vector<int64_t> whole, chunks, offset, held;
  if (!v.intsAttr("whole_shape", &whole) || !v.intsAttr("chunks", &chunks) ||
      !v.intsAttr("piece_offset", &offset) ||
      (a.hasInts("held_chunks") && !v.intsAttr("held_chunks", &held)))
    return false;
  std::string error;
  *piece = makeNf4Piece(shape, block, whole, chunks, offset, error, held);
  return error.empty() || v.fail(error);
}

/// Reads absmax_format (int8 when absent).
inline bool bindAbsmaxFormat(Validator &v, quant::AbsmaxFormat *format) {
  int64_t code = v.attrs().getInt("absmax_format", 0);
  if (code != static_cast<int64_t>(quant::AbsmaxFormat::Int8) &&
      code != static_cast<int64_t>(quant::AbsmaxFormat::Fp8E4M3))
    return v.fail("attribute 'absmax_format' must be 0 (int8) or 1 (fp8_e4m3), got " +
                  std::to_string(code));
  *format = static_cast<quant::AbsmaxFormat>(code);
  return true;
}

} // namespace dequantize_nf4_impl
using namespace dequantize_nf4_impl;

inline bool bindNf4Storage(Validator &v, size_t first, const std::vector<int64_t> &shape,
                           int64_t block, Nf4Piece *piece, quant::AbsmaxFormat *absmaxFormat) {
  if (!bindPiece(v, shape, block, piece) || !bindAbsmaxFormat(v, absmaxFormat))
    return false;
  int64_t n = product(shape), groups = n / block;
  if (!piece->split) {
    return v.hasType(v.in(first), "codes", DType::U8, {(n + 1) / 2}) &&
           v.hasType(v.in(first + 1), "absmax_q", DType::U8, {groups}) &&
           v.hasType(v.in(first + 2), "absmax_scale", DType::F32, {quant::nf4ScaleCount(groups)}) &&
           v.isF32Scalar(v.in(first + 3), "absmax_mean");
  }
  return v.holds(v.in(first), "codes", DType::U8, n / 2) &&
         v.holds(v.in(first + 1), "absmax_q", DType::U8, groups) &&
         v.hasType(v.in(first + 2), "absmax_scale", DType::F32,
                   {quant::nf4ScaleCount(piece->wholeBlocks(groups))}) &&
         v.isF32Scalar(v.in(first + 3), "absmax_mean");
}

inline bool bindDequantizeNf4(const KernelArgs &args, std::string &error,
                              DequantizeNf4Binding *out) {
  Validator v("qat_dequantize_nf4", args, error);
  int64_t block = 0;
  if (!v.arity(4, 1) || !v.intAttr("block", &block, 0))
    return false;
  const TensorView &result = v.out(0);
  if (!v.isFloat(result, "result"))
    return false;
  if (block < 1 || result.rank() < 1 || result.shape.back() % block != 0)
    return v.fail("attribute 'block' (" + std::to_string(block) +
                  ") must divide the last dimension of the result " + result.describe());
  if (!bindNf4Storage(v, 0, result.shape, block, &out->piece, &out->absmaxFormat))
    return false;
  out->dtype = result.dtype;
  out->block = block;
  out->numel = result.numel();
  out->groups = out->numel / block;
  out->scales = v.in(2).numel();
  return true;
}

} // namespace llmc::contracts

#endif
