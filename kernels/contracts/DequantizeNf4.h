//===- DequantizeNf4.h - binding contract of qat_dequantize_nf4 -*- C++ -*-===//
//
// The checks and derived numbers of qat_dequantize_nf4 (QLoRA's NF4 weight
// expansion: packed codes, double-quantized absmax), shared by the CPU
// factory (kernels/cpu/dequantize_nf4.cpp) and the CUDA one
// (kernels/cuda/dequantize_nf4.cu).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_DEQUANTIZENF4_H
#define LLMC_KERNELS_CONTRACTS_DEQUANTIZENF4_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

/// qat_dequantize_nf4(codes, absmax_q, absmax_scale, absmax_mean) -> result.
struct DequantizeNf4Binding {
  DType dtype = DType::F32; ///< the result's
  int64_t block = 0;        ///< elements per absmax
  int64_t numel = 0, groups = 0, scales = 0;
};
bool bindDequantizeNf4(const KernelArgs &args, std::string &error, DequantizeNf4Binding *out);

} // namespace llmc::contracts

#endif
