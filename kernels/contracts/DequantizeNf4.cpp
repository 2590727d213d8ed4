//===- DequantizeNf4.cpp - binding contract of qat_dequantize_nf4 ---------===//
//
// Part of llmc: see DequantizeNf4.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/DequantizeNf4.h"
#include "common/QuantScheme.h"
#include "kernels/Validator.h"

namespace llmc::contracts {
namespace {

/// Reads whole_shape, chunks and piece_offset into `piece` (left whole when
/// none is given).
bool bindPiece(Validator &v, const std::vector<int64_t> &shape, int64_t block, Nf4Piece *piece) {
  const KernelAttrs &a = v.attrs();
  if (!a.hasInts("whole_shape") && !a.hasInts("chunks") && !a.hasInts("piece_offset"))
    return true;
  std::vector<int64_t> whole, chunks, offset;
  if (!v.intsAttr("whole_shape", &whole) || !v.intsAttr("chunks", &chunks) ||
      !v.intsAttr("piece_offset", &offset))
    return false;
  std::string error;
  *piece = makeNf4Piece(shape, block, whole, chunks, offset, error);
  return error.empty() || v.fail(error);
}

} // namespace

bool bindNf4Storage(Validator &v, size_t first, const std::vector<int64_t> &shape, int64_t block,
                    Nf4Piece *piece) {
  if (!bindPiece(v, shape, block, piece)) return false;
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

bool bindDequantizeNf4(const KernelArgs &args, std::string &error, DequantizeNf4Binding *out) {
  Validator v("qat_dequantize_nf4", args, error);
  int64_t block = 0;
  if (!v.arity(4, 1) || !v.intAttr("block", &block, 0)) return false;
  const TensorView &result = v.out(0);
  if (!v.isFloat(result, "result")) return false;
  if (block < 1 || result.rank() < 1 || result.shape.back() % block != 0)
    return v.fail("attribute 'block' (" + std::to_string(block) +
                  ") must divide the last dimension of the result " + result.describe());
  if (!bindNf4Storage(v, 0, result.shape, block, &out->piece)) return false;
  out->dtype = result.dtype;
  out->block = block;
  out->numel = result.numel();
  out->groups = out->numel / block;
  out->scales = v.in(2).numel();
  return true;
}

} // namespace llmc::contracts
