//===- fill.cu - set every element to one value on the GPU ----------------===//
//
// fill (CPU twin in kernels/cpu/fill.cpp): out = value everywhere, f32,
// bf16 or f16, one grid-stride loop. Every launch is followed by an error check.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Fill.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {
namespace {

template <typename T> __global__ void fillKernel(T *out, int64_t n, float value) {
  LLMC_GRID_STRIDE(i, n) store(out, i, value);
}

class FillKernel final : public Kernel {
public:
  FillKernel(TensorView out, float value) : out_(std::move(out)), value_(value) {}
  void run(const StepContext &ctx) override {
    int64_t n = out_.numel();
    if (out_.dtype == DType::F32)
      fillKernel<<<gridFor(n), kBlock, 0, streamOf(ctx)>>>(out_.as<float>(), n, value_);
    else if (out_.dtype == DType::BF16)
      fillKernel<<<gridFor(n), kBlock, 0, streamOf(ctx)>>>(out_.as<bf16>(), n, value_);
    else
      fillKernel<<<gridFor(n), kBlock, 0, streamOf(ctx)>>>(out_.as<f16>(), n, value_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  TensorView out_;
  float value_;
};

std::unique_ptr<Kernel> makeFill(const KernelArgs &args, std::string &error) {
  float value;
  if (!contracts::bindFill(args, error, &value))
    return nullptr;
  return std::make_unique<FillKernel>(args.outputs[0], value);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "fill", makeFill);

} // namespace llmc::cuda
