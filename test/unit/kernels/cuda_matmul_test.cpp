//===- cuda_matmul_test.cpp - cuBLASLt matmul's binding errors ------------===//
//
// matmul's products are conformance cases (matmul_test.cpp), run on the
// GPU by CudaKernelConformance. Here: its binding errors, the CPU's.

#include "CudaConformance.h"

namespace llmc::test {
namespace {

TEST(CudaMatmul, BindingErrorsMatchTheCpu) {
  LLMC_REQUIRE_GPU();
  const std::vector<std::vector<TensorView>> inputs = {
      {typeOnly(DType::F32, {4, 8}), typeOnly(DType::F32, {9, 5})},     // K differs
      {typeOnly(DType::F32, {4, 8}), typeOnly(DType::BF16, {8, 5})},    // dtype differs
      {typeOnly(DType::F32, {2, 4, 8}), typeOnly(DType::F32, {3, 8, 5})}, // leading dims differ
      {typeOnly(DType::I32, {4, 8}), typeOnly(DType::I32, {8, 5})},     // not float
  };
  for (const auto &in : inputs) {
    std::vector<TensorView> out = {typeOnly(in[0].dtype, {4, 5})};
    std::string cpu = bindError("matmul", in, out);
    EXPECT_NE(cpu, "");
    EXPECT_EQ(cudaBindError("matmul", in, out), cpu);
  }
  std::vector<TensorView> in = {typeOnly(DType::F32, {4, 8}), typeOnly(DType::F32, {8, 5})};
  std::vector<TensorView> wrongC = {typeOnly(DType::F32, {5, 4})};
  EXPECT_EQ(cudaBindError("matmul", in, wrongC), bindError("matmul", in, wrongC));
  KernelAttrs bad = attrs({}, {{"transpose_a", 2}});
  std::vector<TensorView> c = {typeOnly(DType::F32, {4, 5})};
  EXPECT_EQ(cudaBindError("matmul", in, c, bad), "matmul: attribute 'transpose_a' must be 0 or 1, got 2");
  EXPECT_EQ(cudaBindError("matmul", in, c, bad), bindError("matmul", in, c, bad));
}

} // namespace
} // namespace llmc::test
