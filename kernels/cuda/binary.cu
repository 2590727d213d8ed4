//===- binary.cu - add, mul, scale on the GPU -----------------------------===//
//
// Elementwise arithmetic with trailing broadcast, the contract of
// kernels/cpu/binary.cpp: rhs has the shape of a suffix of lhs (a bias [C]
// against [B, T, C]), so element i of lhs meets element i mod rhs.numel() of
// rhs. One grid-stride loop, thread i owning element i: reads and writes are
// coalesced, and the small rhs stays in cache. A full-size rhs and a scalar
// rhs skip the modulo. Every element is read by the thread that writes it,
// so `add` and `scale` may run in place (out == lhs / x). bf16 is storage
// only: each result is computed in fp32 and rounded once.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Binary.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {
namespace {

enum class BinaryOp { Add, Mul };

/// How rhs lines up with lhs: same size, a single value, or a repeated suffix.
enum class Broadcast { None, Scalar, Suffix };

template <BinaryOp Op> __device__ __forceinline__ float apply(float a, float b) {
  if constexpr (Op == BinaryOp::Add)
    return a + b;
  else
    return a * b;
}

template <BinaryOp Op, Broadcast B, typename T>
__global__ void binaryKernel(const T *lhs, const T *rhs, T *out, int64_t n, int64_t inner) {
  LLMC_GRID_STRIDE(i, n) {
    int64_t j = B == Broadcast::None ? i : B == Broadcast::Scalar ? 0 : i % inner;
    store(out, i, apply<Op>(load(lhs, i), load(rhs, j)));
  }
}

template <typename T> class BroadcastKernel final : public Kernel {
public:
  BroadcastKernel(const KernelArgs &args, BinaryOp op)
      : op_(op), lhs_(args.inputs[0].as<T>()), rhs_(args.inputs[1].as<T>()),
        out_(args.outputs[0].as<T>()), n_(args.inputs[0].numel()), inner_(args.inputs[1].numel()),
        broadcast_(inner_ == n_ ? Broadcast::None
                   : inner_ == 1 ? Broadcast::Scalar
                                 : Broadcast::Suffix) {}

  void run(const StepContext &ctx) override {
    if (n_ == 0) return;
    if (op_ == BinaryOp::Add)
      launch<BinaryOp::Add>(streamOf(ctx));
    else
      launch<BinaryOp::Mul>(streamOf(ctx));
  }

private:
  template <BinaryOp Op> void launch(cudaStream_t stream) {
    const int grid = gridFor(n_);
    switch (broadcast_) {
    case Broadcast::None:
      binaryKernel<Op, Broadcast::None><<<grid, kBlock, 0, stream>>>(lhs_, rhs_, out_, n_, inner_);
      break;
    case Broadcast::Scalar:
      binaryKernel<Op, Broadcast::Scalar><<<grid, kBlock, 0, stream>>>(lhs_, rhs_, out_, n_, inner_);
      break;
    case Broadcast::Suffix:
      binaryKernel<Op, Broadcast::Suffix><<<grid, kBlock, 0, stream>>>(lhs_, rhs_, out_, n_, inner_);
      break;
    }
    LLMC_CUDA_CHECK_LAUNCH();
  }

  BinaryOp op_;
  const T *lhs_, *rhs_;
  T *out_;
  int64_t n_, inner_;
  Broadcast broadcast_;
};

std::unique_ptr<Kernel> makeCudaAdd(const KernelArgs &args, std::string &error) {
  contracts::BroadcastBinding b;
  if (!contracts::bindAdd(args, error, &b)) return nullptr;
  return makeFloatKernel<BroadcastKernel>(b.dtype, args, BinaryOp::Add);
}

std::unique_ptr<Kernel> makeCudaMul(const KernelArgs &args, std::string &error) {
  contracts::BroadcastBinding b;
  if (!contracts::bindMul(args, error, &b)) return nullptr;
  return makeFloatKernel<BroadcastKernel>(b.dtype, args, BinaryOp::Mul);
}

template <typename T> __global__ void scaleKernel(const T *x, T *out, int64_t n, float factor) {
  LLMC_GRID_STRIDE(i, n) store(out, i, factor * load(x, i));
}

template <typename T> class ScaleKernel final : public Kernel {
public:
  ScaleKernel(const KernelArgs &args, float factor)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()), n_(args.inputs[0].numel()),
        factor_(factor) {}

  void run(const StepContext &ctx) override {
    if (n_ == 0) return;
    scaleKernel<<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(x_, out_, n_, factor_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_;
  T *out_;
  int64_t n_;
  float factor_;
};

std::unique_ptr<Kernel> makeCudaScale(const KernelArgs &args, std::string &error) {
  contracts::ScaleBinding b;
  if (!contracts::bindScale(args, error, &b)) return nullptr;
  return makeFloatKernel<ScaleKernel>(b.dtype, args, static_cast<float>(b.factor));
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "add", makeCudaAdd);
LLMC_REGISTER_KERNEL(CUDA, "mul", makeCudaMul);
LLMC_REGISTER_KERNEL(CUDA, "scale", makeCudaScale);

} // namespace llmc::cuda
