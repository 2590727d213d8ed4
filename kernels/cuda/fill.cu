//===- fill.cu - fill and copy on the GPU ---------------------------------===//
//
// The simplest kernels of the contract (docs/kernels.md), registered under
// the CUDA backend with the same names as kernels/cpu: `fill` sets every
// element, `copy` moves bytes. Every launch is followed by an error check.
//
//===----------------------------------------------------------------------===//

#include "kernels/Kernel.h"
#include "kernels/cuda/Device.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define LLMC_CUDA_CHECK(expr) ::llmc::cuda::check((expr), #expr, __FILE__, __LINE__)

namespace llmc {
namespace {

template <typename T> __global__ void fillKernel(T *out, int64_t n, float value) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = static_cast<T>(value);
}

int gridFor(int64_t n, int block) {
  int64_t blocks = (n + block - 1) / block;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

class FillKernel final : public Kernel {
public:
  FillKernel(TensorView out, float value) : out_(std::move(out)), value_(value) {}
  void run(const StepContext &ctx) override {
    auto stream = static_cast<cudaStream_t>(ctx.stream);
    int64_t n = out_.numel();
    if (out_.dtype == DType::F32)
      fillKernel<<<gridFor(n, 256), 256, 0, stream>>>(out_.as<float>(), n, value_);
    else
      fillKernel<<<gridFor(n, 256), 256, 0, stream>>>(out_.as<__nv_bfloat16>(), n, value_);
    LLMC_CUDA_CHECK(cudaGetLastError());
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
                                      static_cast<cudaStream_t>(ctx.stream)));
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

} // namespace llmc
