//===- cuda_matmul_int_test.cpp - matmul_int on the GPU against the CPU ---===//
//
// matmul_int's products are conformance cases (matmul_int_test.cpp), run
// on the GPU by CudaKernelConformance. Here: its binding errors, the CPU's.
//
//===----------------------------------------------------------------------===//

#include "CudaConformance.h"

namespace llmc::test {
namespace {

TEST(CudaMatmulInt, BindingErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto u8 = [](std::vector<int64_t> s) { return typeOnly(DType::U8, std::move(s)); };
  KernelAttrs a = attrs({}, {{"bits", 4}, {"block", 48}});
  a.setInts("weight_shape", {64, 128});
  std::vector<TensorView> in = {f32({2, 64}), u8({4096}), f32({128})};
  std::string expected = bindError("matmul_int", in, {f32({2, 128})}, a);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(cudaBindError("matmul_int", in, {f32({2, 128})}, a), expected);
}

} // namespace
} // namespace llmc::test
