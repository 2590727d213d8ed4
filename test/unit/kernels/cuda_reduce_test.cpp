//===- cuda_reduce_test.cpp - reduce_sum, reduce_max, global_norm on the GPU -===//
//
// The three are conformance cases (shape_test.cpp, loss_test.cpp,
// optimizer_test.cpp), run on the GPU by CudaKernelConformance. Here: their
// binding errors, and determinism: one binding run twice gives the same
// bits.

#include "CudaConformance.h"

#include "kernels/cuda/Device.h"

namespace llmc::test {
namespace {

TEST(CudaReduce, BindingErrorsMatchTheCpu) {
  LLMC_REQUIRE_GPU();
  std::vector<TensorView> x = {typeOnly(DType::F32, {3, 7})};
  std::vector<TensorView> notSuffix = {typeOnly(DType::F32, {3})};
  EXPECT_EQ(cudaBindError("reduce_sum", x, notSuffix), bindError("reduce_sum", x, notSuffix));
  EXPECT_NE(bindError("reduce_sum", x, notSuffix), "");
  std::vector<TensorView> bfRows = {typeOnly(DType::BF16, {3})};
  EXPECT_EQ(cudaBindError("reduce_max", x, bfRows), "reduce_max: out must be f32[3], got bf16[3]");
  EXPECT_EQ(cudaBindError("reduce_max", x, bfRows), bindError("reduce_max", x, bfRows));
  std::vector<TensorView> mixed = {typeOnly(DType::F32, {3}), typeOnly(DType::I32, {3})};
  std::vector<TensorView> scalar = {typeOnly(DType::F32, {})};
  EXPECT_EQ(cudaBindError("global_norm", mixed, scalar), bindError("global_norm", mixed, scalar));
  EXPECT_EQ(cudaBindError("global_norm", mixed, scalar),
            "global_norm: input 1 must be f32, bf16 or f16, got i32[3]");
}

/// Binds `name` once on the GPU, runs it twice, and returns both outputs.
std::pair<std::vector<float>, std::vector<float>> runTwice(const std::string &name, const Buffer &x,
                                                           const Buffer &out) {
  void *dx = cuda::deviceAlloc(x.view().bytes()), *dout = cuda::deviceAlloc(out.view().bytes());
  cuda::copyToDevice(dx, x.view().data, x.view().bytes());
  KernelArgs args;
  args.inputs.push_back(x.view());
  args.inputs.back().data = dx;
  args.outputs.push_back(out.view());
  args.outputs.back().data = dout;
  std::string error;
  std::unique_ptr<Kernel> kernel = findKernel(Backend::CUDA, name)(args, error);
  EXPECT_TRUE(kernel) << error;
  std::vector<float> first(out.view().numel()), second(first.size());
  if (kernel) {
    kernel->run(StepContext{});
    cuda::synchronize();
    cuda::copyToHost(first.data(), dout, first.size() * sizeof(float));
    cuda::deviceFill(dout, 0, first.size() * sizeof(float));
    kernel->run(StepContext{});
    cuda::synchronize();
    cuda::copyToHost(second.data(), dout, second.size() * sizeof(float));
  }
  kernel.reset();
  cuda::deviceFree(dx);
  cuda::deviceFree(dout);
  return {first, second};
}

TEST(CudaReduce, SumsAreDeterministic) {
  LLMC_REQUIRE_GPU();
  Buffer x = Buffer::of(randomTensor({4096, 7}, 400), DType::F32), sum(DType::F32, {7});
  auto [a, b] = runTwice("reduce_sum", x, sum);
  EXPECT_EQ(a, b);
  Buffer big = Buffer::of(randomTensor({1 << 20}, 401), DType::F32), norm(DType::F32, {});
  auto [c, d] = runTwice("global_norm", big, norm);
  EXPECT_EQ(c, d);
}

} // namespace
} // namespace llmc::test
