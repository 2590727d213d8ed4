//===- cuda_grouped_matmul_test.cpp - grouped matmuls' binding errors -----===//
//
// grouped_matmul's and grouped_matmul_weight_grad's products are
// conformance cases (grouped_matmul_test.cpp), run on the GPU by
// CudaKernelConformance. Here: their binding errors, the CPU's.

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

} // namespace
} // namespace llmc::test
