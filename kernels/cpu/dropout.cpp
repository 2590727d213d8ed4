//===- dropout.cpp - seeded inverted dropout ------------------------------===//
//
// out = keep ? x / (1 − rate) : 0, where keep is a pure function of (seed,
// training step, flat element index) from kernels/DropoutHash.h. No mask is
// stored: the backward is this same kernel applied to the upstream
// gradient, and the CUDA kernel draws the identical mask. The threshold is
// an integer computed once, so the hot loop is integer hashing only.
//
//===----------------------------------------------------------------------===//

#include "kernels/DropoutHash.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

template <typename T> class DropoutKernel final : public Kernel {
public:
  DropoutKernel(const KernelArgs &args, double rate, int64_t seed)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()), n_(args.inputs[0].numel()),
        seed_(static_cast<uint64_t>(seed)), threshold_(dropoutThreshold(rate)),
        keepScale_(static_cast<float>(1.0 / (1.0 - rate))) {}

  void run(const StepContext &ctx) override {
    const T *x = x_;
    T *out = out_;
    uint64_t seed = seed_, step = static_cast<uint64_t>(ctx.step), threshold = threshold_;
    float keepScale = keepScale_;
#pragma omp parallel for simd schedule(static) if (n_ > kParallelGrain)
    for (int64_t i = 0; i < n_; ++i) {
      bool keep = dropoutHash(seed, step, static_cast<uint64_t>(i)) >= threshold;
      store(out, i, keep ? load(x, i) * keepScale : 0.0f);
    }
  }

private:
  const T *x_;
  T *out_;
  int64_t n_;
  uint64_t seed_, threshold_;
  float keepScale_;
};

std::unique_ptr<Kernel> makeDropout(const KernelArgs &args, std::string &error) {
  Validator v("dropout", args, error);
  double rate;
  int64_t seed;
  if (!v.arity(1, 1) || !v.floatAttr("rate", &rate)) return nullptr;
  if (!args.attrs.hasInt("seed")) return v.reject("missing int attribute 'seed'");
  if (!v.intAttr("seed", &seed, 0)) return nullptr;
  if (!(rate >= 0.0 && rate < 1.0))
    return v.reject("attribute 'rate' must be in [0, 1), got " + std::to_string(rate));
  if (!v.isFloat(v.in(0), "x") || !v.hasType(v.out(0), "out", v.in(0).dtype, v.in(0).shape))
    return nullptr;
  return makeFloatKernel<DropoutKernel>(v.in(0).dtype, args, rate, seed);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "dropout", makeDropout);

} // namespace llmc::cpu
