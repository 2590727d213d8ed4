//===- Binary.h - binding contract of add, mul and scale --------*- C++ -*-===//
//
// The checks and derived numbers of add, mul (rhs broadcast over lhs) and
// scale, shared by the CPU factories (kernels/cpu/binary.cpp) and the CUDA
// ones (kernels/cuda/binary.cu).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_BINARY_H
#define LLMC_KERNELS_CONTRACTS_BINARY_H

#include "kernels/Kernel.h"

#include <string>

namespace llmc::contracts {

/// add(lhs, rhs) -> out and mul(lhs, rhs) -> out: rhs's shape a suffix of
/// lhs's, out lhs's type.
struct BroadcastBinding {
  DType dtype = DType::F32;
};
bool bindAdd(const KernelArgs &args, std::string &error, BroadcastBinding *out);
bool bindMul(const KernelArgs &args, std::string &error, BroadcastBinding *out);

/// scale(x) -> out = factor · x.
struct ScaleBinding {
  DType dtype = DType::F32;
  double factor = 0;
};
bool bindScale(const KernelArgs &args, std::string &error, ScaleBinding *out);

} // namespace llmc::contracts

#endif
