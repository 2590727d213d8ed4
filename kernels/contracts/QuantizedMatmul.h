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

#include "kernels/IntWeight.h"
#include "common/Nf4Piece.h"
#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

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
/// piece_offset (contracts::bindNf4Storage).
struct MatmulNf4Binding : QuantizedProduct {
  int64_t block = 0; ///< elements per absmax, along W's last dimension
  Nf4Piece piece;    ///< where W lies in the whole weight
};
bool bindMatmulNf4(const KernelArgs &args, std::string &error, MatmulNf4Binding *out);

/// matmul_int(x, codes, scale[, zero_point]) -> y, with attributes bits,
/// block or channel_axis (or neither: one scale), weight_shape and
/// transpose_b.
struct MatmulIntBinding : QuantizedProduct {
  IntWeightLayout layout;
  int64_t block = 0; ///< 0 unless grouped in blocks
};
bool bindMatmulInt(const KernelArgs &args, std::string &error, MatmulIntBinding *out);

} // namespace llmc::contracts

#endif
