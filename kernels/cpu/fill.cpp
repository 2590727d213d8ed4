//===- fill.cpp - set every element to one value --------------------------===//
//
// fill: out = value everywhere, f32 or bf16 (the value rounded once to the
// output's type). It is llm.fill lowered: the zero gradient of a parameter
// nothing reaches, the loss's seed gradient 1, other constants. No inputs;
// one parallel store loop.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Fill.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

template <typename T> class FillKernel final : public Kernel {
public:
  FillKernel(const KernelArgs &args, float value)
      : out_(args.outputs[0].as<T>()), n_(args.outputs[0].numel()), value_(value) {}

  void run(const StepContext &) override {
    T *out = out_;
    float value = value_;
#pragma omp parallel for simd schedule(static) if (n_ > kParallelGrain)
    for (int64_t i = 0; i < n_; ++i) store(out, i, value);
  }

private:
  T *out_;
  int64_t n_;
  float value_;
};

std::unique_ptr<Kernel> makeFill(const KernelArgs &args, std::string &error) {
  float value;
  if (!contracts::bindFill(args, error, &value))
    return nullptr;
  return makeFloatKernel<FillKernel>(args.outputs[0].dtype, args, value);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "fill", makeFill);

} // namespace llmc::cpu
