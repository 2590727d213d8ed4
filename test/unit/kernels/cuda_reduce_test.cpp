//===- cuda_reduce_test.cpp - reduce_sum, reduce_max, global_norm on the GPU -===//
//
// Sums use the norm metric (a column sum can cancel); both backends add in
// double and round once, so the results agree far inside the tolerances.
// A maximum is exact: compared with tolerance 0. Every kernel here is
// deterministic, which the last test checks by running one binding twice.

#include "CudaConformance.h"

#include "kernels/cuda/Device.h"

namespace llmc::test {
namespace {

TEST(CudaReduce, ReduceMaxMatchesCpu) {
  LLMC_REQUIRE_GPU();
  // Warp-per-row (< 1024) and block-per-row widths, odd row counts, and
  // GPT-2's logits rows.
  const std::vector<std::vector<int64_t>> shapes = {
      {1},       {7},        {1, 1},       {37, 1},    {3, 7},     {37, 129},  {3, 1023},
      {3, 1024}, {37, 1000}, {2, 3, 1025}, {3, 50257}, {1, 50257}, {2048, 31}, {64, 50257},
  };
  uint64_t seed = 200;
  for (DType dtype : kFloatTypes)
    for (const auto &shape : shapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(shape));
      // Shifted negative so a wrong -inf or 0 initial value would show.
      Buffer x = Buffer::of(randomTensor(shape, ++seed, 1.0, -10.0), dtype);
      Buffer out(DType::F32, std::vector<int64_t>(shape.begin(), shape.end() - 1));
      expectCudaMatchesCpu("reduce_max", {&x}, {&out}, {}, {Metric::Elementwise, {0.0}});
    }
}

TEST(CudaReduce, GlobalNormOverMixedInputs) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 300;
  for (int squared = 0; squared < 2; ++squared) {
    SCOPED_TRACE(squared ? "squared" : "norm");
    // One tiny input.
    Buffer one = Buffer::of(randomTensor({1}, ++seed), DType::F32), norm(DType::F32, {});
    expectCudaMatchesCpu("global_norm", {&one}, {&norm}, attrs({}, {{"squared", squared}}),
                         {Metric::Norm, {1e-6}});
    // Mixed f32 / bf16, sizes below, at and across the 64K chunk, an empty
    // input, and GPT-2-sized parameters.
    std::vector<Buffer> buffers;
    const std::vector<std::pair<std::vector<int64_t>, DType>> inputs = {
        {{7}, DType::F32},           {{37, 129}, DType::BF16},
        {{1 << 16}, DType::F32},     {{(1 << 16) + 1}, DType::BF16},
        {{0}, DType::F32},           {{768, 3072}, DType::F32},
        {{50257, 768}, DType::BF16}, {{3, 1000}, DType::F32},
        {{1}, DType::BF16},
    };
    for (const auto &[shape, dtype] : inputs)
      buffers.push_back(Buffer::of(randomTensor(shape, ++seed, 0.02), dtype));
    std::vector<Buffer *> ptrs;
    for (Buffer &b : buffers) ptrs.push_back(&b);
    Buffer out(DType::F32, {1});
    expectCudaMatchesCpu("global_norm", ptrs, {&out}, attrs({}, {{"squared", squared}}),
                         {Metric::Norm, {1e-6}});
  }
}

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
