//===- cuda_norm_test.cpp - CUDA layernorm and rmsnorm against the CPU ----===//
//
// Each norm kernel against the CPU's is a conformance case (norm_test.cpp,
// including the rows the kernels move in 16-byte packs). Here: the
// residual forms equal, bit for bit, the CUDA add and norm kernels run in
// turn (also on packed rows), gradients are deterministic, and binding
// errors match the CPU's. rmsnorm's forward output is a per-element map of
// a well-conditioned row (elementwise metric); layernorm's subtracts the
// row's mean first, so an output near zero carries the mean's rounding
// (summed in another order on the GPU: a few units in the last place of
// the row's scale, up to 3.5e-5 relative to the element on an H200), and
// it uses the norm metric, as do the gradients.

#include "CudaConformance.h"

namespace llmc::test {
namespace {

/// Rows × C shapes: odd sizes, one wide row, and a GPT-2 layer's.
const std::vector<std::vector<int64_t>> kNormShapes = {{1, 1},       {3, 7},    {37, 129},
                                                       {2, 3, 1000}, {1, 5000}, {4, 1024, 768}};

TEST(CudaNormKernels, GradientsAreDeterministic) {
  // dγ is a sum over rows: two runs on one binding agree bit for bit.
  LLMC_REQUIRE_GPU();
  std::vector<int64_t> shape = {2048, 768};
  Buffer x = Buffer::of(randomTensor(shape, 9301), DType::F32);
  Buffer gamma = Buffer::of(randomTensor({768}, 9302, 0.5, 1.0), DType::F32);
  Buffer dy = Buffer::of(randomTensor(shape, 9303), DType::F32);
  Buffer dx(DType::F32, shape), dgamma(DType::F32, {768}), dbeta(DType::F32, {768});
  KernelAttrs a = attrs({{"epsilon", 1e-5}});
  auto first = expectCudaMatchesCpu("layernorm_grad", {&x, &gamma, &dy}, {&dx, &dgamma, &dbeta}, a,
                                    {Metric::Norm, {1e-5}});
  auto second = expectCudaMatchesCpu("layernorm_grad", {&x, &gamma, &dy}, {&dx, &dgamma, &dbeta}, a,
                                     {Metric::Norm, {1e-5}});
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(second.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(first[i].data, second[i].data) << "output " << i;
}

TEST(CudaNormKernels, BindErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  KernelAttrs a = attrs({{"epsilon", 1e-5}});
  std::vector<TensorView> in = {typeOnly(DType::F32, {4, 8}), typeOnly(DType::F32, {7}),
                                typeOnly(DType::F32, {8})};
  std::vector<TensorView> out = {typeOnly(DType::F32, {4, 8})};
  EXPECT_EQ(cudaBindError("layernorm", in, out, a), bindError("layernorm", in, out, a));
  EXPECT_EQ(cudaBindError("layernorm", in, out, a), "layernorm: gamma must be f32[8], got f32[7]");
  EXPECT_EQ(cudaBindError("rmsnorm", {in[0], in[2]}, out),
            bindError("rmsnorm", {in[0], in[2]}, out));
  EXPECT_EQ(cudaBindError("rmsnorm_grad", {in[0], in[2], in[0]}, {in[0], in[1]}, a),
            bindError("rmsnorm_grad", {in[0], in[2], in[0]}, {in[0], in[1]}, a));
}

/// Runs `name` on both backends (compared as `cmp`) and returns the GPU's
/// outputs stored in `dtype`, to feed the next unfused kernel.
std::vector<Buffer> cudaOutputs(const std::string &name, const std::vector<Buffer *> &inputs,
                                const std::vector<Buffer *> &outputs, const KernelAttrs &a,
                                const Comparison &cmp, DType dtype) {
  std::vector<Buffer> result;
  for (const RefTensor &t : expectCudaMatchesCpu(name, inputs, outputs, a, cmp))
    result.push_back(Buffer::of(t, dtype));
  return result;
}

void expectSameData(const std::vector<RefTensor> &fused, const std::vector<Buffer> &unfused) {
  ASSERT_EQ(fused.size(), unfused.size());
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_EQ(fused[i].data, unfused[i].toRef().data) << "output " << i;
}

/// The residual forms of layernorm (or, with `rms`, rmsnorm) on both
/// backends, and on the GPU against the add and norm kernels run in turn:
/// the same values bit for bit.
void expectResidualNormMatchesCpuAndTheUnfusedKernels(
    bool rms, uint64_t seed, const std::vector<std::vector<int64_t>> &shapes = kNormShapes) {
  const std::string norm = rms ? "rmsnorm" : "layernorm";
  for (DType t : kFloatTypes)
    for (const auto &shape : shapes) {
      SCOPED_TRACE(norm + " " + dtypeName(t) + " " + shapeString(shape));
      int64_t c = shape.back();
      Buffer x = Buffer::of(randomTensor(shape, ++seed, 2.0, 0.5), t);
      Buffer h = Buffer::of(randomTensor(shape, ++seed), t);
      Buffer gamma = Buffer::of(randomTensor({c}, ++seed, 0.5, 1.0), t);
      Buffer beta = Buffer::of(randomTensor({c}, ++seed, 0.2), t);
      Buffer dy = Buffer::of(randomTensor(shape, ++seed), t);
      Buffer dres = Buffer::of(randomTensor(shape, ++seed), t);
      Buffer sum(t, shape), y(t, shape), dx(t, shape), dgamma(t, {c}), dbeta(t, {c});
      std::vector<Buffer *> params = {&gamma}, grads = {&dx, &dgamma};
      if (!rms)
        params.push_back(&beta), grads.push_back(&dbeta);
      auto with = [](std::vector<Buffer *> head, const std::vector<Buffer *> &tail) {
        head.insert(head.end(), tail.begin(), tail.end());
        return head;
      };
      KernelAttrs a = attrs({{"epsilon", rms ? 1e-6 : 1e-5}});
      Comparison elementwise{Metric::Elementwise, {tolerance(t)}};
      Comparison normwise{Metric::Norm, {tolerance(t)}};
      Comparison normalized = rms ? elementwise : normwise;
      std::vector<RefTensor> fused =
          expectCudaMatchesCpu("add_" + norm, with({&x, &h}, params), {&sum, &y}, a, normalized);
      std::vector<Buffer> s = cudaOutputs("add", {&x, &h}, {&sum}, {}, elementwise, t);
      std::vector<Buffer> n = cudaOutputs(norm, with({&s[0]}, params), {&y}, a, normalized, t);
      expectSameData(fused, {s[0], n[0]});

      std::vector<RefTensor> fusedGrad =
          expectCudaMatchesCpu(norm + "_grad_add", {&s[0], &gamma, &dy, &dres}, grads, a, normwise);
      std::vector<Buffer> g =
          cudaOutputs(norm + "_grad", {&s[0], &gamma, &dy}, grads, a, normwise, t);
      std::vector<Buffer> d = cudaOutputs("add", {&g[0], &dres}, {&dx}, {}, elementwise, t);
      std::vector<Buffer> unfused = {d[0], g[1]};
      if (!rms)
        unfused.push_back(g[2]);
      expectSameData(fusedGrad, unfused);
    }
}

TEST(CudaNormKernels, AddLayerNormMatchesCpuAndTheUnfusedKernels) {
  LLMC_REQUIRE_GPU();
  expectResidualNormMatchesCpuAndTheUnfusedKernels(/*rms=*/false, 9400);
}

TEST(CudaNormKernels, AddLayerNormWithBiasMatchesCpuAndTheUnfusedKernels) {
  // a + (b + bias), as tensor parallelism's bias after the all-reduce joins
  // the residual add: both backends, and the GPU's add, add, layernorm.
  LLMC_REQUIRE_GPU();
  uint64_t seed = 9450;
  for (DType t : kFloatTypes)
    for (const auto &shape : kNormShapes) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + shapeString(shape));
      int64_t c = shape.back();
      Buffer x = Buffer::of(randomTensor(shape, ++seed, 2.0, 0.5), t);
      Buffer h = Buffer::of(randomTensor(shape, ++seed), t);
      Buffer gamma = Buffer::of(randomTensor({c}, ++seed, 0.5, 1.0), t);
      Buffer beta = Buffer::of(randomTensor({c}, ++seed, 0.2), t);
      Buffer bias = Buffer::of(randomTensor({c}, ++seed, 3.0), t);
      Buffer sum(t, shape), y(t, shape);
      KernelAttrs a = attrs({{"epsilon", 1e-5}});
      Comparison elementwise{Metric::Elementwise, {tolerance(t)}};
      Comparison normwise{Metric::Norm, {tolerance(t)}};
      std::vector<RefTensor> fused = expectCudaMatchesCpu(
          "add_layernorm", {&x, &h, &gamma, &beta, &bias}, {&sum, &y}, a, normwise);
      std::vector<Buffer> biased = cudaOutputs("add", {&h, &bias}, {&sum}, {}, elementwise, t);
      std::vector<Buffer> s = cudaOutputs("add", {&x, &biased[0]}, {&sum}, {}, elementwise, t);
      std::vector<Buffer> n =
          cudaOutputs("layernorm", {&s[0], &gamma, &beta}, {&y}, a, normwise, t);
      expectSameData(fused, {s[0], n[0]});
    }
}

TEST(CudaNormKernels, AddRmsNormMatchesCpuAndTheUnfusedKernels) {
  LLMC_REQUIRE_GPU();
  expectResidualNormMatchesCpuAndTheUnfusedKernels(/*rms=*/true, 9500);
}

/// Rows whose C is a multiple of a 16-byte pack (4 f32, 8 bf16/f16), so
/// the kernels move them in packs: one pack per row, a few, one per thread
/// of a 256-thread block and one more, several per thread; C = 12 packs
/// for f32 only.
const std::vector<std::vector<int64_t>> kPackShapes = {{2, 8},    {3, 12},   {5, 24},
                                                       {2, 2056}, {3, 8192}, {16, 768}};

TEST(CudaStepPackedNorms, ResidualFormsMatchCpuAndTheUnfusedKernels) {
  LLMC_REQUIRE_GPU();
  expectResidualNormMatchesCpuAndTheUnfusedKernels(/*rms=*/false, 9700, kPackShapes);
  expectResidualNormMatchesCpuAndTheUnfusedKernels(/*rms=*/true, 9800, kPackShapes);
}

TEST(CudaStepPackedNorms, PackedGradientsAreDeterministic) {
  LLMC_REQUIRE_GPU();
  std::vector<int64_t> shape = {2048, 768};
  Buffer x = Buffer::of(randomTensor(shape, 9901), DType::BF16);
  Buffer gamma = Buffer::of(randomTensor({768}, 9902, 0.5, 1.0), DType::BF16);
  Buffer dy = Buffer::of(randomTensor(shape, 9903), DType::BF16);
  Buffer dx(DType::BF16, shape), dgamma(DType::BF16, {768});
  KernelAttrs a = attrs({{"epsilon", 1e-6}});
  auto first = expectCudaMatchesCpu("rmsnorm_grad", {&x, &gamma, &dy}, {&dx, &dgamma}, a,
                                    {Metric::Norm, {1e-2}});
  auto second = expectCudaMatchesCpu("rmsnorm_grad", {&x, &gamma, &dy}, {&dx, &dgamma}, a,
                                     {Metric::Norm, {1e-2}});
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(first[i].data, second[i].data) << "output " << i;
}

TEST(CudaNormKernels, ResidualBindErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  KernelAttrs a = attrs({{"epsilon", 1e-5}});
  TensorView x = typeOnly(DType::F32, {4, 8}), c = typeOnly(DType::F32, {8});
  TensorView narrow = typeOnly(DType::F32, {4, 7});
  EXPECT_EQ(cudaBindError("add_layernorm", {x, narrow, c, c}, {x, x}, a),
            bindError("add_layernorm", {x, narrow, c, c}, {x, x}, a));
  TensorView shortBias = typeOnly(DType::F32, {7});
  EXPECT_EQ(cudaBindError("add_layernorm", {x, x, c, c, shortBias}, {x, x}, a),
            bindError("add_layernorm", {x, x, c, c, shortBias}, {x, x}, a));
  EXPECT_EQ(cudaBindError("add_rmsnorm", {x, x, c}, {x}, a),
            bindError("add_rmsnorm", {x, x, c}, {x}, a));
  EXPECT_EQ(cudaBindError("layernorm_grad_add", {x, c, x, narrow}, {x, c, c}, a),
            bindError("layernorm_grad_add", {x, c, x, narrow}, {x, c, c}, a));
  EXPECT_EQ(cudaBindError("rmsnorm_grad_add", {x, c, x, x}, {x, c}),
            bindError("rmsnorm_grad_add", {x, c, x, x}, {x, c}));
}

} // namespace
} // namespace llmc::test
