//===- cast.cpp - element type conversion between f32, bf16 and f16 -------===//
//
// Every conversion goes through fp32, which holds bf16 and f16 exactly, so
// each result is rounded once (to nearest even) and NaN stays NaN. The f16
// conversions are written out bitwise (common/Half.h, shared with the CUDA
// kernel) rather than with F16C, so the result depends on no target flags.
//
//===----------------------------------------------------------------------===//

#include "common/Half.h"
#include "kernels/contracts/Cast.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

template <typename From, typename To> class CastKernel final : public Kernel {
public:
  explicit CastKernel(const KernelArgs &args)
      : x_(args.inputs[0].as<From>()), out_(args.outputs[0].as<To>()), n_(args.inputs[0].numel()) {}

  void run(const StepContext &) override {
    const From *x = x_;
    To *out = out_;
#pragma omp parallel for simd schedule(static) if (n_ > kParallelGrain)
    for (int64_t i = 0; i < n_; ++i) store(out, i, load(x, i));
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

std::unique_ptr<Kernel> makeCast(const KernelArgs &args, std::string &error) {
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

LLMC_REGISTER_KERNEL(CPU, "cast", makeCast);

} // namespace llmc::cpu
