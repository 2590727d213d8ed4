//===- cuda_activation_test.cpp - CUDA pointwise kernels against the CPU --===//
//
// gelu, silu, sigmoid, swiglu and dropout (activation_test.cpp) and rope
// (embedding_test.cpp) are conformance cases. Here: dropout of a piece of a
// global tensor (the mask is shared code, so outputs must be equal exactly)
// and binding errors.

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
