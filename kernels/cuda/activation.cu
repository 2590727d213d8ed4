//===- activation.cu - gelu, silu, swiglu and their gradients on the GPU --===//
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

enum class Act { Gelu, GeluGrad, Silu, SiluGrad, Swiglu, SwigluGrad };

/// Up to three inputs a, b, c and two outputs o0, o1 of n elements.
template <Act A, typename T>
__global__ void activationKernel(const T *a, const T *b, const T *c, T *o0, T *o1, int64_t n) {
  LLMC_GRID_STRIDE(i, n) {
    if constexpr (A == Act::Gelu) {
      store(o0, i, geluTanh(load(a, i)));
    } else if constexpr (A == Act::GeluGrad) {
      store(o0, i, geluTanhGrad(load(a, i), load(b, i)));
    } else if constexpr (A == Act::Silu) {
      store(o0, i, siluOf(load(a, i)));
    } else if constexpr (A == Act::SiluGrad) {
      store(o0, i, siluGradOf(load(a, i), load(b, i)));
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
    explicit Kernel(const KernelArgs &args) : n_(args.inputs[0].numel()) {
      for (size_t i = 0; i < args.inputs.size(); ++i) in_[i] = args.inputs[i].as<T>();
      for (size_t i = 0; i < args.outputs.size(); ++i) out_[i] = args.outputs[i].as<T>();
    }

    void run(const StepContext &ctx) override {
      if (n_ == 0) return;
      activationKernel<A, T><<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(in_[0], in_[1], in_[2],
                                                                        out_[0], out_[1], n_);
      LLMC_CUDA_CHECK_LAUNCH();
    }

  private:
    int64_t n_;
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
  return makeFloatKernel<ActivationOp<A>::template Kernel>(b.dtype, args);
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
std::unique_ptr<Kernel> makeCudaSwiglu(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::Swiglu>(contracts::bindSwiglu, args, error);
}
std::unique_ptr<Kernel> makeCudaSwigluGrad(const KernelArgs &args, std::string &error) {
  return makeActivation<Act::SwigluGrad>(contracts::bindSwigluGrad, args, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "gelu", makeCudaGelu);
LLMC_REGISTER_KERNEL(CUDA, "gelu_grad", makeCudaGeluGrad);
LLMC_REGISTER_KERNEL(CUDA, "silu", makeCudaSilu);
LLMC_REGISTER_KERNEL(CUDA, "silu_grad", makeCudaSiluGrad);
LLMC_REGISTER_KERNEL(CUDA, "swiglu", makeCudaSwiglu);
LLMC_REGISTER_KERNEL(CUDA, "swiglu_grad", makeCudaSwigluGrad);

} // namespace llmc::cuda
