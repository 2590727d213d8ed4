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

#include "kernels/Kernel.h"
#include "common/Nf4Piece.h"

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
};
bool bindDequantizeNf4(const KernelArgs &args, std::string &error, DequantizeNf4Binding *out);

/// Checks inputs `first`..`first + 3` as the NF4 storage (codes, absmax_q,
/// absmax_scale, absmax_mean) of a weight of `shape` in blocks of `block`
/// (which divides its last dimension), and reads the optional attributes
/// that place a 2-D weight in a whole one split by tensor parallelism:
/// whole_shape [R, C], chunks [row chunks, column chunks] and piece_offset
/// [first row, first column within each chunk] — all three or none.
/// Whole, the codes and absmax_q are flat; a piece's hold its elements in
/// any shape, and absmax_scale holds the whole weight's scales.
bool bindNf4Storage(Validator &v, size_t first, const std::vector<int64_t> &shape, int64_t block,
                    Nf4Piece *piece);

} // namespace llmc::contracts

#endif
