//===- Activation.cpp - binding contract of the activations ---------------===//
//
// The checks and derivations kernels/cpu/activation.cpp and
// kernels/cuda/activation.cu share.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Activation.h"

#include "kernels/Validator.h"

#include <initializer_list>

namespace llmc::contracts {
namespace {

/// Every operand of one float dtype and shape.
bool bindActivation(const char *name, std::initializer_list<const char *> inputNames,
                    std::initializer_list<const char *> outputNames, const KernelArgs &args,
                    std::string &error, ActivationBinding *out) {
  Validator v(name, args, error);
  if (!v.arity(inputNames.size(), outputNames.size())) return false;
  const TensorView &first = v.in(0);
  if (!v.isFloat(first, *inputNames.begin())) return false;
  size_t i = 0;
  for (const char *what : inputNames)
    if (!v.hasType(v.in(i++), what, first.dtype, first.shape)) return false;
  i = 0;
  for (const char *what : outputNames)
    if (!v.hasType(v.out(i++), what, first.dtype, first.shape)) return false;
  *out = {first.dtype, first.numel()};
  return true;
}

} // namespace

bool bindGelu(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("gelu", {"x"}, {"out"}, args, error, out);
}
bool bindGeluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("gelu_grad", {"x", "dy"}, {"dx"}, args, error, out);
}
bool bindSilu(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("silu", {"x"}, {"out"}, args, error, out);
}
bool bindSiluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("silu_grad", {"x", "dy"}, {"dx"}, args, error, out);
}
bool bindSwiglu(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("swiglu", {"gate", "up"}, {"out"}, args, error, out);
}
bool bindSwigluGrad(const KernelArgs &args, std::string &error, ActivationBinding *out) {
  return bindActivation("swiglu_grad", {"gate", "up", "dy"}, {"dgate", "dup"}, args, error, out);
}

} // namespace llmc::contracts
