//===- Cast.h - binding contract of cast ------------------------*- C++ -*-===//
//
// The checks of cast, shared by the CPU factory (kernels/cpu/cast.cpp) and
// the CUDA one (kernels/cuda/cast.cu): x and out each f32, bf16 or f16, of
// one shape.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_CAST_H
#define LLMC_KERNELS_CONTRACTS_CAST_H

#include "kernels/Kernel.h"

#include <string>

namespace llmc::contracts {

/// cast(x) -> out.
struct CastBinding {
  DType from = DType::F32, to = DType::F32;
};
bool bindCast(const KernelArgs &args, std::string &error, CastBinding *out);

} // namespace llmc::contracts

#endif
