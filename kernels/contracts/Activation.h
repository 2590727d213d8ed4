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
#include "kernels/Validator.h"

#include <cstdint>
#include <initializer_list>
#include <string>

namespace llmc::contracts {

struct ActivationBinding {
  DType dtype = DType::F32; ///< of every operand
  int64_t numel = 0;
};
inline bool bindGelu(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindGeluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindSilu(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindSiluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindSwiglu(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindSwigluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace activation_impl {

/// Every operand of one float dtype and shape.
inline bool bindActivation(const char *name, std::initializer_list<const char *> inputNames,
                           std::initializer_list<const char *> outputNames, const KernelArgs &args,
                           std::string &error, ActivationBinding *out) {
  Validator v(name, args, error);
  if (!v.arity(inputNames.size(), outputNames.size()))
    return false;
  const TensorView &first = v.in(0);
  if (!v.isFloat(first, *inputNames.begin()))
    return false;
  size_t i = 0;
  for (const char *what : inputNames)
    if (!v.hasType(v.in(i++), what, first.dtype, first.shape))
      return false;
  i = 0;
  for (const char *what : outputNames)
    if (!v.hasType(v.out(i++), what, first.dtype, first.shape))
      return false;
  *out = {first.dtype, first.numel()};
  return true;
}

} // namespace activation_impl
using namespace activation_impl;

inline bool bindGelu(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("gelu", {"x"}, {"out"}, args, error, out);
}
inline bool bindGeluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("gelu_grad", {"x", "dy"}, {"dx"}, args, error, out);
}
inline bool bindSilu(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("silu", {"x"}, {"out"}, args, error, out);
}
inline bool bindSiluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("silu_grad", {"x", "dy"}, {"dx"}, args, error, out);
}
inline bool bindSwiglu(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("swiglu", {"gate", "up"}, {"out"}, args, error, out);
}
inline bool bindSwigluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("swiglu_grad", {"gate", "up", "dy"}, {"dgate", "dup"}, args, error, out);
}

} // namespace llmc::contracts

#endif
