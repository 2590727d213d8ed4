//===- Activation.h - binding contract of the activations and their grads -*- C++ -*-===//
//
// What both backends check and derive when they bind the elementwise
// activations gelu, silu, sigmoid, swiglu, geglu and softcap and their gradients: every
// operand is of one float dtype and one shape. The CPU and CUDA factories call the
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

/// Which activation (or gradient) a kernel computes: both backends'
/// kernels are one template over it.
enum class Activation {
  Gelu,
  GeluGrad,
  Silu,
  SiluGrad,
  Sigmoid,
  SigmoidGrad,
  Swiglu,
  SwigluGrad,
  Geglu,
  GegluGrad,
  Softcap,
  SoftcapGrad
};

struct ActivationBinding {
  DType dtype = DType::F32; ///< of every operand
  int64_t numel = 0;
  float cap = 0.0f; ///< softcap(_grad)'s attribute `cap` (> 0)
};
inline bool bindGelu(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindGeluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindSilu(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindSiluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);
/// sigmoid(x) -> 1 / (1 + exp(-x)) and sigmoid_grad(x, dy) -> dy·σ(x)(1 − σ(x)).
inline bool bindSigmoid(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindSigmoidGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindSwiglu(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindSwigluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);
/// geglu(gate, up) -> gelu(gate)·up (tanh GELU) and its gradient.
inline bool bindGeglu(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindGegluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);
/// softcap(x) -> cap·tanh(x / cap) and softcap_grad(x, dy) -> dx, with the
/// float attribute `cap` > 0.
inline bool bindSoftcap(const KernelArgs &args, std::string &error, ActivationBinding *out);
inline bool bindSoftcapGrad(const KernelArgs &args, std::string &error, ActivationBinding *out);

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

/// bindActivation, then the `cap` attribute.
inline bool bindCapped(const char *name, std::initializer_list<const char *> inputNames,
                       const KernelArgs &args, std::string &error, ActivationBinding *out) {
  if (!bindActivation(name, inputNames, {inputNames.size() == 1 ? "out" : "dx"}, args, error, out))
    return false;
  Validator v(name, args, error);
  double cap;
  if (!v.floatAttr("cap", &cap))
    return false;
  if (!(cap > 0))
    return v.fail("attribute 'cap' must be > 0, got " + std::to_string(cap));
  out->cap = static_cast<float>(cap);
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
inline bool bindSigmoid(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("sigmoid", {"x"}, {"out"}, args, error, out);
}
inline bool bindSigmoidGrad(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("sigmoid_grad", {"x", "dy"}, {"dx"}, args, error, out);
}
inline bool bindSwiglu(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("swiglu", {"gate", "up"}, {"out"}, args, error, out);
}
inline bool bindSwigluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("swiglu_grad", {"gate", "up", "dy"}, {"dgate", "dup"}, args, error, out);
}
inline bool bindGeglu(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("geglu", {"gate", "up"}, {"out"}, args, error, out);
}
inline bool bindGegluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("geglu_grad", {"gate", "up", "dy"}, {"dgate", "dup"}, args, error, out);
}
inline bool bindSoftcap(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindCapped("softcap", {"x"}, args, error, out);
}
inline bool bindSoftcapGrad(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindCapped("softcap_grad", {"x", "dy"}, args, error, out);
}

} // namespace llmc::contracts

#endif
