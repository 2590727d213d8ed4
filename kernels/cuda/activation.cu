//===- activation.cu - the activations and their gradients on the GPU -----===//
//
// Pointwise maps: one grid-stride loop per op, each thread reading its
// elements and writing the results, so every op is memory bound and needs
// no shared memory or synchronisation. The formulas are kernels/cpu/
// activation.cpp's exactly (the tanh GELU through 1 + tanh(u) = 2·σ(2u),
// same constants, same order of operations); σ uses the accurate expf (not
// __expf), so results stay within a few ulp of the CPU's.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Activation.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/Gelu.cuh"

namespace llmc::cuda {
namespace {

using Act = contracts::Activation;

/// Up to three inputs a, b, c and two outputs o0, o1 of n elements; `cap`
/// is softcap's.
template <Act A, typename T>
__global__ void activationKernel(const T *a, const T *b, const T *c, T *o0, T *o1, int64_t n,
                                 float cap) {
  LLMC_GRID_STRIDE(i, n) {
    if constexpr (A == Act::Gelu) {
      store(o0, i, geluTanh(load(a, i)));
    } else if constexpr (A == Act::GeluGrad) {
      store(o0, i, geluTanhGrad(load(a, i), load(b, i)));
    } else if constexpr (A == Act::Silu) {
      store(o0, i, siluOf(load(a, i)));
    } else if constexpr (A == Act::SiluGrad) {
      store(o0, i, siluGradOf(load(a, i), load(b, i)));
    } else if constexpr (A == Act::Sigmoid) {
      store(o0, i, sigmoid(load(a, i)));
    } else if constexpr (A == Act::SigmoidGrad) {
      store(o0, i, sigmoidGradOf(load(a, i), load(b, i)));
    } else if constexpr (A == Act::Geglu) {
      store(o0, i, geluTanh(load(a, i)) * load(b, i));
    } else if constexpr (A == Act::GegluGrad) {
      float g = load(a, i), up = load(b, i), dy = load(c, i);
      store(o0, i, geluTanhGrad(g, dy * up));
      store(o1, i, dy * geluTanh(g));
    } else if constexpr (A == Act::Softcap) {
      store(o0, i, cap * tanhf(load(a, i) * (1.0f / cap)));
    } else if constexpr (A == Act::SoftcapGrad) {
      const float t = tanhf(load(a, i) * (1.0f / cap));
      store(o0, i, load(b, i) * (1.0f - t * t));
    } else if constexpr (A == Act::Swiglu) {
      store(o0, i, swigluOf(load(a, i), load(b, i)));
    } else {
      float g = load(a, i), up = load(b, i), dy = load(c, i);
      store(o0, i, swigluGradGate(g, up, dy));
      store(o1, i, swigluGradUp(g, dy));
    }
  }
}

template <Act A> struct ActivationOp {
  template <typename T> class Kernel final : public ::llmc::Kernel {
  public:
    Kernel(const KernelArgs &args, float cap) : n_(args.inputs[0].numel()), cap_(cap) {
      for (size_t i = 0; i < args.inputs.size(); ++i) in_[i] = args.inputs[i].as<T>();
      for (size_t i = 0; i < args.outputs.size(); ++i) out_[i] = args.outputs[i].as<T>();
    }

    void run(const StepContext &ctx) override {
      if (n_ == 0) return;
      activationKernel<A, T><<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(in_[0], in_[1], in_[2],
                                                                        out_[0], out_[1], n_, cap_);
      LLMC_CUDA_CHECK_LAUNCH();
    }

  private:
    int64_t n_;
    float cap_;
    const T *in_[3] = {};
    T *out_[2] = {};
  };
};

/// A binding contract of kernels/contracts/Activation.h.
using BindActivation = bool (*)(const KernelArgs &, std::string &, contracts::ActivationBinding *);

template <Act A>
std::unique_ptr<Kernel> makeActivation(BindActivation bind, const KernelArgs &args,
                                       std::string &error) {
  contracts::ActivationBinding b;
  if (!bind(args, error, &b)) return nullptr;
  return makeFloatKernel<ActivationOp<A>::template Kernel>(b.dtype, args, b.cap);
}

std::unique_ptr<Kernel> makeCudaGelu(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::Gelu>(contracts::bindGelu, args, error);
}
std::unique_ptr<Kernel> makeCudaGeluGrad(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::GeluGrad>(contracts::bindGeluGrad, args, error);
}
std::unique_ptr<Kernel> makeCudaSilu(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::Silu>(contracts::bindSilu, args, error);
}
std::unique_ptr<Kernel> makeCudaSiluGrad(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::SiluGrad>(contracts::bindSiluGrad, args, error);
}
std::unique_ptr<Kernel> makeCudaSigmoid(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::Sigmoid>(contracts::bindSigmoid, args, error);
}
std::unique_ptr<Kernel> makeCudaSigmoidGrad(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::SigmoidGrad>(contracts::bindSigmoidGrad, args, error);
}
std::unique_ptr<Kernel> makeCudaSwiglu(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::Swiglu>(contracts::bindSwiglu, args, error);
}
std::unique_ptr<Kernel> makeCudaSwigluGrad(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::SwigluGrad>(contracts::bindSwigluGrad, args, error);
}
std::unique_ptr<Kernel> makeCudaGeglu(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::Geglu>(contracts::bindGeglu, args, error);
}
std::unique_ptr<Kernel> makeCudaGegluGrad(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::GegluGrad>(contracts::bindGegluGrad, args, error);
}
std::unique_ptr<Kernel> makeCudaSoftcap(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::Softcap>(contracts::bindSoftcap, args, error);
}
std::unique_ptr<Kernel> makeCudaSoftcapGrad(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::SoftcapGrad>(contracts::bindSoftcapGrad, args, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "gelu", makeCudaGelu);
LLMC_REGISTER_KERNEL(CUDA, "gelu_grad", makeCudaGeluGrad);
LLMC_REGISTER_KERNEL(CUDA, "silu", makeCudaSilu);
LLMC_REGISTER_KERNEL(CUDA, "silu_grad", makeCudaSiluGrad);
LLMC_REGISTER_KERNEL(CUDA, "sigmoid", makeCudaSigmoid);
LLMC_REGISTER_KERNEL(CUDA, "sigmoid_grad", makeCudaSigmoidGrad);
LLMC_REGISTER_KERNEL(CUDA, "swiglu", makeCudaSwiglu);
LLMC_REGISTER_KERNEL(CUDA, "swiglu_grad", makeCudaSwigluGrad);
LLMC_REGISTER_KERNEL(CUDA, "geglu", makeCudaGeglu);
LLMC_REGISTER_KERNEL(CUDA, "geglu_grad", makeCudaGegluGrad);
LLMC_REGISTER_KERNEL(CUDA, "softcap", makeCudaSoftcap);
LLMC_REGISTER_KERNEL(CUDA, "softcap_grad", makeCudaSoftcapGrad);

} // namespace llmc::cuda
