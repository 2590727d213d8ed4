//===- MatmulNf4.h - binding contract of matmul_nf4 -------------*- C++ -*-===//
//
// The checks and derived numbers of matmul_nf4 (x · W with W in NF4
// storage, expanded inside the product), shared by the CPU factory
// (kernels/cpu/matmul_nf4.cpp) and the CUDA one (kernels/cuda/matmul_nf4.cu).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_MATMULNF4_H
#define LLMC_KERNELS_CONTRACTS_MATMULNF4_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

/// matmul_nf4(x, codes, absmax_q, absmax_scale, absmax_mean) -> y, with
/// attributes block, weight_shape ([K, N], or [N, K] with transpose_b) and
/// transpose_b.
struct MatmulNf4Binding {
  DType dtype = DType::F32; ///< x's and y's
  int64_t m = 0;            ///< rows: the product of x's leading dims
  int64_t k = 0, n = 0;
  int64_t block = 0; ///< elements per absmax, along W's last dimension
  bool transposeB = false;
};
bool bindMatmulNf4(const KernelArgs &args, std::string &error, MatmulNf4Binding *out);

} // namespace llmc::contracts

#endif
