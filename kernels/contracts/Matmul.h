//===- Matmul.h - binding contract of matmul --------------------*- C++ -*-===//
//
// The checks and derived dimensions of matmul (c = op(a) · op(b), batched
// over a's leading dims, b either one shared matrix or batched like a),
// shared by the CPU factory (kernels/cpu/matmul.cpp, OpenBLAS) and the CUDA
// one (kernels/cuda/matmul.cu, cuBLASLt).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_MATMUL_H
#define LLMC_KERNELS_CONTRACTS_MATMUL_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

/// matmul(a, b) -> c, attributes transpose_a, transpose_b, accumulate.
struct MatmulBinding {
  DType dtype = DType::F32; ///< of a, b and c
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transposeA = false, transposeB = false;
  bool sharedB = false;    ///< b is 2-D: one matrix for every batch entry
  bool accumulate = false; ///< c += a · b
};
bool bindMatmul(const KernelArgs &args, std::string &error, MatmulBinding *out);

} // namespace llmc::contracts

#endif
