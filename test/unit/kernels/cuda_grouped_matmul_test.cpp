//===- cuda_grouped_matmul_test.cpp - grouped matmuls' binding errors -----===//
//
// grouped_matmul's and grouped_matmul_weight_grad's products, and their
// fp8 forms', are conformance cases (grouped_matmul_test.cpp,
// grouped_matmul_fp8_test.cpp), run on the GPU by CudaKernelConformance.
// Here: their binding errors, the CPU's, and LLMC_CUDA_FP8_MMA's.

#include "CudaConformance.h"

namespace llmc::test {
namespace {

TEST(CudaGroupedMatmul, BindingErrorsMatchTheCpu) {
  LLMC_REQUIRE_GPU();
  auto f32 = [](std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); };
  auto i32 = [](std::vector<int64_t> shape) { return typeOnly(DType::I32, std::move(shape)); };
  KernelAttrs tb = attrs({}, {{"transpose_b", 1}});
  expectCudaBindErrorsMatchCpu({
      {"grouped_matmul", {f32({7, 13}), i32({4}), f32({2, 13, 5})}, {f32({7, 5})}, {}},
      {"grouped_matmul", {f32({7, 13}), i32({2}), f32({1, 13, 5})}, {f32({7, 5})}, tb},
      {"grouped_matmul", {f32({7, 13}), i32({3}), f32({13, 5})}, {f32({7, 5})}, {}},
      {"grouped_matmul_weight_grad", {f32({7, 13}), f32({7, 5}), i32({1})}, {f32({0, 13, 5})}, {}},
      {"grouped_matmul_weight_grad", {f32({7, 13}), f32({7, 5}), i32({3})}, {f32({2, 13, 5})}, tb},
  });
}

TEST(CudaGroupedMatmul, Fp8BindingErrorsMatchTheCpu) {
  LLMC_REQUIRE_GPU();
  auto u8 = [](std::vector<int64_t> shape) { return typeOnly(DType::U8, std::move(shape)); };
  auto f32 = [](std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); };
  auto i32 = [](std::vector<int64_t> shape) { return typeOnly(DType::I32, std::move(shape)); };
  KernelAttrs forward = attrs({}, {{"x_format", 2}, {"w_format", 2}});
  KernelAttrs grad = attrs({}, {{"x_format", 2}, {"dy_format", 3}});
  expectCudaBindErrorsMatchCpu({
      {"qat_grouped_matmul_fp8",
       {u8({6, 4}), f32({3}), i32({3}), u8({2, 4, 3}), f32({1})},
       {f32({6, 3})},
       forward},
      {"qat_grouped_matmul_fp8",
       {u8({6, 4}), f32({1}), i32({3}), u8({3, 4, 3}), f32({1})},
       {f32({6, 3})},
       forward},
      {"qat_grouped_matmul_weight_grad_fp8",
       {u8({6, 4}), f32({1}), u8({5, 3}), f32({1}), i32({3})},
       {f32({2, 4, 3})},
       grad},
  });
}

/// LLMC_CUDA_FP8_MMA takes 1 or 0; anything else is refused when the fp8
/// products bind, naming the variable and the value (no GPU needed: the
/// value is read before the device is).
TEST(CudaGroupedMatmul, Fp8TensorCoreChoiceIsChecked) {
  const ScopedEnv bad("LLMC_CUDA_FP8_MMA", "yes");
  auto u8 = [](std::vector<int64_t> shape) { return typeOnly(DType::U8, std::move(shape)); };
  auto f32 = [](std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); };
  auto i32 = [](std::vector<int64_t> shape) { return typeOnly(DType::I32, std::move(shape)); };
  const std::string forward = cudaBindError(
      "qat_grouped_matmul_fp8", {u8({6, 4}), f32({1}), i32({3}), u8({2, 4, 3}), f32({1})},
      {f32({6, 3})}, attrs({}, {{"x_format", 2}, {"w_format", 2}}));
  const std::string grad = cudaBindError(
      "qat_grouped_matmul_weight_grad_fp8", {u8({6, 4}), f32({1}), u8({6, 3}), f32({1}), i32({3})},
      {f32({2, 4, 3})}, attrs({}, {{"x_format", 2}, {"dy_format", 3}}));
  for (const std::string &error : {forward, grad})
    EXPECT_NE(error.find("LLMC_CUDA_FP8_MMA=yes must be 1 (fp8 tensor cores) or 0"),
              std::string::npos)
        << error;
}

} // namespace
} // namespace llmc::test
