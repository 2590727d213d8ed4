//===- fill.cu - fill and copy on the GPU ---------------------------------===//
//
// The simplest kernels of the contract (docs/kernels.md), registered under
// the CUDA backend with the same names as kernels/cpu: `fill` sets every
// element, `copy` moves bytes. Every launch is followed by an error check.
//
//===----------------------------------------------------------------------===//

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
    else
      fillKernel<<<gridFor(n), kBlock, 0, streamOf(ctx)>>>(out_.as<bf16>(), n, value_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  TensorView out_;
  float value_;
};

std::unique_ptr<Kernel> makeFill(const KernelArgs &args, std::string &error) {
  if (!args.inputs.empty() || args.outputs.size() != 1) {
    error = "fill: expects no inputs and one output";
    return nullptr;
  }
  DType t = args.outputs[0].dtype;
  if (t != DType::F32 && t != DType::BF16) {
    error = std::string("fill: output must be f32 or bf16, got ") + dtypeName(t);
    return nullptr;
  }
  return std::make_unique<FillKernel>(args.outputs[0],
                                      static_cast<float>(args.attrs.getFloat("value")));
}

class CopyKernel final : public Kernel {
public:
  CopyKernel(TensorView in, TensorView out) : in_(std::move(in)), out_(std::move(out)) {}
  void run(const StepContext &ctx) override {
    if (in_.data != out_.data)
      LLMC_CUDA_CHECK(cudaMemcpyAsync(out_.data, in_.data, in_.bytes(),
                                      cudaMemcpyDeviceToDevice,
                                      streamOf(ctx)));
  }

private:
  TensorView in_, out_;
};

std::unique_ptr<Kernel> makeCopy(const KernelArgs &args, std::string &error) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1) {
    error = "copy: expects one input and one output";
    return nullptr;
  }
  if (args.inputs[0].bytes() != args.outputs[0].bytes() ||
      args.inputs[0].dtype != args.outputs[0].dtype) {
    error = "copy: input " + args.inputs[0].describe() + " and output " +
            args.outputs[0].describe() + " differ in dtype or size";
    return nullptr;
  }
  return std::make_unique<CopyKernel>(args.inputs[0], args.outputs[0]);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "fill", makeFill);
LLMC_REGISTER_KERNEL(CUDA, "copy", makeCopy);

} // namespace llmc::cuda
