//===- cast.cu - element type conversion between f32, bf16 and f16 --------===//
//
// Every conversion goes through fp32, which holds bf16 and f16 exactly, so
// each result is rounded once (to nearest even) and NaN stays NaN, as in
// kernels/cpu/cast.cpp. The f16 conversions are the CPU's bitwise ones
// (not __half intrinsics), so both backends produce the same bits even for
// NaN payloads and subnormals. One grid-stride loop, one element per thread.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Cast.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {
namespace {

// The f32/bf16 overloads join the f16 ones below.
using cuda::load;
using cuda::store;

/// IEEE binary16 storage.
struct f16 {
  uint16_t bits;
};

__device__ __forceinline__ float load(const f16 *p, int64_t i) {
  uint32_t h = p[i].bits;
  uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) { // zero or subnormal: mantissa · 2^-24, exact in fp32
    float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return __uint_as_float(__float_as_uint(v) | sign);
  }
  if (exponent == 31) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13)); // inf / NaN
  return __uint_as_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/// Round to nearest even (after F. Giesen's float_to_half_fast3_rtne).
__device__ __forceinline__ void store(f16 *p, int64_t i, float value) {
  uint32_t u = __float_as_uint(value), sign = u & 0x80000000u;
  u ^= sign;
  uint16_t h;
  if (u >= (143u << 23)) { // >= 65536 (rounds to inf), inf or NaN
    h = u > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (u < (113u << 23)) { // below 2^-14: subnormal or zero
    constexpr uint32_t magic = ((127 - 15) + (23 - 10) + 1) << 23;
    // The addition must round to nearest even in fp32, never be contracted.
    h = static_cast<uint16_t>(__float_as_uint(__fadd_rn(__uint_as_float(u), __uint_as_float(magic))) -
                              magic);
  } else {
    uint32_t odd = (u >> 13) & 1u;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;
    h = static_cast<uint16_t>(u >> 13);
  }
  p[i].bits = static_cast<uint16_t>(h | (sign >> 16));
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
    return std::make_unique<CastKernel<From, f16>>(args);
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
    return makeCastFrom<f16>(b.to, args);
  }
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "cast", makeCudaCast);

} // namespace llmc::cuda
