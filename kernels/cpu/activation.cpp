//===- activation.cpp - gelu, silu, sigmoid, swiglu, softcap, gradients ---===//
//
// Pointwise nonlinearities in fp32 with vectorised exp. GELU is the tanh
// approximation, rewritten through 1 + tanh(u) = 2·σ(2u):
//   gelu(x)  = x · σ(2u),                 u = √(2/π)(x + 0.044715x³)
//   gelu'(x) = σ(2u) + 2x·σ(2u)(1 − σ(2u))·u'(x)
// which avoids the cancellation of 1 + tanh(u) for negative x and needs a
// single exp. SiLU is x·σ(x), its gate σ(x) alone the sigmoid (whose
// gradient is dy·σ(1 − σ)); SwiGLU is silu(gate)·up; GeGLU gelu(gate)·up
// (Gemma's MLP). Softcap is
// cap·tanh(x / cap), its gradient dy·(1 − tanh²(x / cap)).
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Activation.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

using Act = contracts::Activation;

/// One elementwise kernel for all twelve ops: up to three inputs, two
/// outputs, all of one shape and dtype; `cap` is softcap's.
template <typename T> class ActivationKernel final : public Kernel {
public:
  ActivationKernel(const KernelArgs &args, Act act, float cap)
      : act_(act), cap_(cap), n_(args.inputs[0].numel()) {
    for (size_t i = 0; i < args.inputs.size(); ++i) in_[i] = args.inputs[i].as<T>();
    for (size_t i = 0; i < args.outputs.size(); ++i) out_[i] = args.outputs[i].as<T>();
  }

  void run(const StepContext &) override {
    const T *a = in_[0], *b = in_[1], *c = in_[2];
    T *o0 = out_[0], *o1 = out_[1];
    int64_t n = n_;
    switch (act_) {
    case Act::Gelu:
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(o0, i, geluTanh(load(a, i)));
      break;
    case Act::GeluGrad:
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(o0, i, geluTanhGrad(load(a, i), load(b, i)));
      break;
    case Act::Silu:
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(o0, i, siluOf(load(a, i)));
      break;
    case Act::SiluGrad:
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(o0, i, siluGradOf(load(a, i), load(b, i)));
      break;
    case Act::Sigmoid:
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(o0, i, sigmoidFast(load(a, i)));
      break;
    case Act::SigmoidGrad:
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(o0, i, sigmoidGradOf(load(a, i), load(b, i)));
      break;
    case Act::Swiglu:
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(o0, i, swigluOf(load(a, i), load(b, i)));
      break;
    case Act::Geglu:
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(o0, i, geluTanh(load(a, i)) * load(b, i));
      break;
    case Act::GegluGrad:
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        float g = load(a, i), up = load(b, i), dy = load(c, i);
        store(o0, i, geluTanhGrad(g, dy * up));
        store(o1, i, dy * geluTanh(g));
      }
      break;
    case Act::Softcap: {
      const float cap = cap_, inverse = 1.0f / cap_;
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(o0, i, cap * std::tanh(load(a, i) * inverse));
      break;
    }
    case Act::SoftcapGrad: {
      const float inverse = 1.0f / cap_;
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        float t = std::tanh(load(a, i) * inverse);
        store(o0, i, load(b, i) * (1.0f - t * t));
      }
      break;
    }
    case Act::SwigluGrad:
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        float g = load(a, i), up = load(b, i), dy = load(c, i);
        store(o0, i, swigluGradGate(g, up, dy));
        store(o1, i, swigluGradUp(g, dy));
      }
      break;
    }
  }

private:
  Act act_;
  float cap_;
  int64_t n_;
  const T *in_[3] = {};
  T *out_[2] = {};
};

/// A binding contract of kernels/contracts/Activation.h.
using BindActivation = bool (*)(const KernelArgs &, std::string &, contracts::ActivationBinding *);

std::unique_ptr<Kernel> makeActivation(BindActivation bind, Act act, const KernelArgs &args,
                                       std::string &error) {
  contracts::ActivationBinding b;
  if (!bind(args, error, &b)) return nullptr;
  return makeFloatKernel<ActivationKernel>(b.dtype, args, act, b.cap);
}

std::unique_ptr<Kernel> makeGelu(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindGelu, Act::Gelu, args, error);
}
std::unique_ptr<Kernel> makeGeluGrad(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindGeluGrad, Act::GeluGrad, args, error);
}
std::unique_ptr<Kernel> makeSilu(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindSilu, Act::Silu, args, error);
}
std::unique_ptr<Kernel> makeSiluGrad(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindSiluGrad, Act::SiluGrad, args, error);
}
std::unique_ptr<Kernel> makeSigmoid(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindSigmoid, Act::Sigmoid, args, error);
}
std::unique_ptr<Kernel> makeSigmoidGrad(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindSigmoidGrad, Act::SigmoidGrad, args, error);
}
std::unique_ptr<Kernel> makeSwiglu(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindSwiglu, Act::Swiglu, args, error);
}
std::unique_ptr<Kernel> makeSwigluGrad(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindSwigluGrad, Act::SwigluGrad, args, error);
}
std::unique_ptr<Kernel> makeGeglu(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindGeglu, Act::Geglu, args, error);
}
std::unique_ptr<Kernel> makeGegluGrad(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindGegluGrad, Act::GegluGrad, args, error);
}
std::unique_ptr<Kernel> makeSoftcap(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindSoftcap, Act::Softcap, args, error);
}
std::unique_ptr<Kernel> makeSoftcapGrad(const KernelArgs &args, std::string &error) {
  return makeActivation(contracts::bindSoftcapGrad, Act::SoftcapGrad, args, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "gelu", makeGelu);
LLMC_REGISTER_KERNEL(CPU, "gelu_grad", makeGeluGrad);
LLMC_REGISTER_KERNEL(CPU, "silu", makeSilu);
LLMC_REGISTER_KERNEL(CPU, "silu_grad", makeSiluGrad);
LLMC_REGISTER_KERNEL(CPU, "sigmoid", makeSigmoid);
LLMC_REGISTER_KERNEL(CPU, "sigmoid_grad", makeSigmoidGrad);
LLMC_REGISTER_KERNEL(CPU, "swiglu", makeSwiglu);
LLMC_REGISTER_KERNEL(CPU, "swiglu_grad", makeSwigluGrad);
LLMC_REGISTER_KERNEL(CPU, "geglu", makeGeglu);
LLMC_REGISTER_KERNEL(CPU, "geglu_grad", makeGegluGrad);
LLMC_REGISTER_KERNEL(CPU, "softcap", makeSoftcap);
LLMC_REGISTER_KERNEL(CPU, "softcap_grad", makeSoftcapGrad);

} // namespace llmc::cpu
