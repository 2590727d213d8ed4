//===- GlobalNorm.h - binding contract of global_norm and sqrt -*- C++ -*-===//
//
// The checks of global_norm (the l2 norm of any number of float tensors, an
// f32 scalar) and sqrt (elementwise, f32), shared by the CPU factories
// (kernels/cpu/global_norm.cpp) and the CUDA ones (kernels/cuda/global_norm.cu).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_GLOBALNORM_H
#define LLMC_KERNELS_CONTRACTS_GLOBALNORM_H

#include "kernels/Kernel.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmc::contracts {

/// global_norm(inputs...) -> norm.
struct GlobalNormBinding {
  size_t tensors = 0; ///< the inputs
};
bool bindGlobalNorm(const KernelArgs &args, std::string &error, GlobalNormBinding *out);

/// sqrt(x) -> out.
struct SqrtBinding {
  int64_t numel = 0;
};
bool bindSqrt(const KernelArgs &args, std::string &error, SqrtBinding *out);

} // namespace llmc::contracts

#endif
