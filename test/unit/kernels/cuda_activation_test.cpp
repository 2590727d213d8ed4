//===- cuda_activation_test.cpp - CUDA pointwise kernels against the CPU --===//
//
// gelu, silu, swiglu and dropout are conformance cases
// (activation_test.cpp). Here: dropout of a piece of a global tensor (the
// mask is shared code, so outputs must be equal exactly) and rope (norm:
// its outputs are differences of products).

#include "CudaConformance.h"

namespace llmc::test {
namespace {

TEST(CudaActivationKernels, DropoutOfAPieceUsesGlobalIndices) {
  LLMC_REQUIRE_GPU();
  // A [3, 5, 37] piece at offsets [1, 2, 20] of a [4, 9, 64] tensor.
  for (DType t : kFloatTypes) {
    Buffer x = Buffer::of(randomTensor({3, 5, 37}, 9700), t);
    Buffer out(t, {3, 5, 37});
    KernelAttrs a = attrs({{"rate", 0.45}}, {{"seed", 77}});
    a.setInts("global_shape", {4, 9, 64});
    a.setInts("offsets", {1, 2, 20});
    expectCudaMatchesCpu("dropout", {&x}, {&out}, a, {Metric::Elementwise, {0.0}}, 5);
  }
}

TEST(CudaActivationKernels, RopeMatchesCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 9800;
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 1, 1, 2}, {2, 7, 3, 10}, {1, 37, 5, 64}, {4, 1024, 12, 64}};
  for (DType t : kFloatTypes)
    for (const auto &shape : shapes)
      for (int64_t inverse : {0, 1}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " " + shapeString(shape) +
                     (inverse ? " inverse" : ""));
        Buffer x = Buffer::of(randomTensor(shape, ++seed), t);
        Buffer out(t, shape);
        KernelAttrs a = attrs({{"theta", 10000.0}}, {{"inverse", inverse}});
        expectCudaMatchesCpu("rope", {&x}, {&out}, a, {Metric::Norm, {tolerance(t)}});
        expectCudaMatchesCpu("rope", {&x}, {&x}, a, {Metric::Norm, {tolerance(t)}});
        // Packed rows: positions restarting every 5 tokens.
        RefTensor positions = RefTensor::zeros({shape[0], shape[1]});
        for (size_t i = 0; i < positions.data.size(); ++i)
          positions.data[i] = static_cast<double>(i % static_cast<size_t>(shape[1]) % 5);
        Buffer p = Buffer::of(positions, DType::I32);
        expectCudaMatchesCpu("rope", {&x, &p}, {&out}, a, {Metric::Norm, {tolerance(t)}});
      }
}

/// Llama 3 scaling (all three bands at D = 32 and 64): the same table.
TEST(CudaActivationKernels, RopeLlama3ScalingMatchesCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 9850;
  for (DType t : kFloatTypes)
    for (const std::vector<int64_t> &shape :
         {std::vector<int64_t>{2, 21, 3, 32}, std::vector<int64_t>{1, 300, 4, 64}})
      for (int64_t inverse : {0, 1}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " " + shapeString(shape) +
                     (inverse ? " inverse" : ""));
        Buffer x = Buffer::of(randomTensor(shape, ++seed), t);
        Buffer out(t, shape);
        KernelAttrs a = attrs({{"theta", 10000.0},
                               {"scaling_factor", 8.0},
                               {"low_freq_factor", 1.0},
                               {"high_freq_factor", 4.0}},
                              {{"original_max_positions", 48}, {"inverse", inverse}});
        expectCudaMatchesCpu("rope", {&x}, {&out}, a, {Metric::Norm, {tolerance(t)}});
        RefTensor positions = RefTensor::zeros({shape[0], shape[1]});
        for (size_t i = 0; i < positions.data.size(); ++i)
          positions.data[i] = static_cast<double>(i % static_cast<size_t>(shape[1]) % 17);
        Buffer p = Buffer::of(positions, DType::I64);
        expectCudaMatchesCpu("rope", {&x, &p}, {&out}, a, {Metric::Norm, {tolerance(t)}});
      }
}

TEST(CudaActivationKernels, BindErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  TensorView a = typeOnly(DType::F32, {4, 8}), b = typeOnly(DType::BF16, {4, 8});
  EXPECT_EQ(cudaBindError("swiglu", {a, b}, {a}), bindError("swiglu", {a, b}, {a}));
  EXPECT_EQ(cudaBindError("gelu_grad", {a}, {a}), bindError("gelu_grad", {a}, {a}));
  KernelAttrs noSeed = attrs({{"rate", 0.1}});
  EXPECT_EQ(cudaBindError("dropout", {a}, {a}, noSeed), "dropout: missing int attribute 'seed'");
  TensorView odd = typeOnly(DType::F32, {2, 4, 2, 7});
  KernelAttrs theta = attrs({{"theta", 1e4}});
  EXPECT_EQ(cudaBindError("rope", {odd}, {odd}, theta), bindError("rope", {odd}, {odd}, theta));
  TensorView even = typeOnly(DType::F32, {2, 4, 2, 8});
  KernelAttrs partial = attrs({{"theta", 1e4}, {"low_freq_factor", 1.0}});
  EXPECT_EQ(cudaBindError("rope", {even}, {even}, partial),
            bindError("rope", {even}, {even}, partial));
}

} // namespace
} // namespace llmc::test
