//===- Activation.h - binding contract of gelu, silu, swiglu and their grads -*- C++ -*-===//
//
// What both backends check and derive when they bind the elementwise
// activations gelu, silu and swiglu and their gradients: every operand is
// of one float dtype and one shape. The CPU and CUDA factories call the
// bind functions and add only what is specific to their backend.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ACTIVATION_H
#define LLMC_KERNELS_CONTRACTS_ACTIVATION_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

struct ActivationBinding {
  DType dtype = DType::F32; ///< of every operand
  int64_t numel = 0;
};
bool bindGelu(const KernelArgs &args, std::string &error, ActivationBinding *out);
bool bindGeluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);
bool bindSilu(const KernelArgs &args, std::string &error, ActivationBinding *out);
bool bindSiluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);
bool bindSwiglu(const KernelArgs &args, std::string &error, ActivationBinding *out);
bool bindSwigluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);

} // namespace llmc::contracts

#endif
