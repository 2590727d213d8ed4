//===- cast.cu - element type conversion between f32, bf16 and f16 --------===//
//
// Every conversion goes through fp32, which holds bf16 and f16 exactly, so
// each result is rounded once (to nearest even) and NaN stays NaN, as in
// kernels/cpu/cast.cpp. The f16 conversions are the CPU's bitwise ones
// (common/Half.h, not __half intrinsics), so both backends produce the same
// bits even for NaN payloads and subnormals. One grid-stride loop, one element per thread.
//
//===----------------------------------------------------------------------===//

#include "common/Half.h"
#include "kernels/contracts/Cast.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {
namespace {

// The f32/bf16 overloads join the f16 ones below.
using cuda::load;
using cuda::store;

/// IEEE binary16 storage converted by common/Half.h rather than the __half
/// intrinsics, so casts match the CPU bit for bit (NaN payloads included).
struct HalfBits {
  uint16_t bits;
};

__device__ __forceinline__ float load(const HalfBits *p, int64_t i) {
  return half::toFloat(p[i].bits);
}
__device__ __forceinline__ void store(HalfBits *p, int64_t i, float value) {
  p[i].bits = half::fromFloat(value);
}

template <typename From, typename To>
__global__ void castKernel(const From *x, To *out, int64_t n) {
  LLMC_GRID_STRIDE(i, n) store(out, i, load(x, i));
}

template <typename From, typename To> class CastKernel final : public Kernel {
public:
  explicit CastKernel(const KernelArgs &args)
      : x_(args.inputs[0].as<From>()), out_(args.outputs[0].as<To>()), n_(args.inputs[0].numel()) {}

  void run(const StepContext &ctx) override {
    if (n_ == 0) return;
    castKernel<<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(x_, out_, n_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const From *x_;
  To *out_;
  int64_t n_;
};

template <typename From> std::unique_ptr<Kernel> makeCastFrom(DType to, const KernelArgs &args) {
  switch (to) {
  case DType::F32:
    return std::make_unique<CastKernel<From, float>>(args);
  case DType::BF16:
    return std::make_unique<CastKernel<From, bf16>>(args);
  default:
    return std::make_unique<CastKernel<From, HalfBits>>(args);
  }
}

std::unique_ptr<Kernel> makeCudaCast(const KernelArgs &args, std::string &error) {
  contracts::CastBinding b;
  if (!contracts::bindCast(args, error, &b)) return nullptr;
  switch (b.from) {
  case DType::F32:
    return makeCastFrom<float>(b.to, args);
  case DType::BF16:
    return makeCastFrom<bf16>(b.to, args);
  default:
    return makeCastFrom<HalfBits>(b.to, args);
  }
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "cast", makeCudaCast);

} // namespace llmc::cuda
