//===- cuda_matmul_fp8_test.cpp - fp8 GEMM bindings on CUDA ---------------===//
//
// The CUDA factories of qat_quantize_fp8 and qat_matmul_fp8 reject what the
// CPU's reject, with the CPU's messages (their conformance cases,
// matmul_fp8_test.cpp, run CUDA against the CPU with the planned
// workspace), and the CUDA GEMM asks for that workspace when an operand
// is not K-major.
//
//===----------------------------------------------------------------------===//

#include "CudaConformance.h"

namespace llmc::test {
namespace {

constexpr int64_t kE4M3 = 2, kE5M2 = 3;

TensorView f32(std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); }
TensorView u8(std::vector<int64_t> shape) { return typeOnly(DType::U8, std::move(shape)); }

KernelAttrs formats(int64_t a, int64_t b) { return attrs({}, {{"a_format", a}, {"b_format", b}}); }

TEST(CudaMatmulFp8, BindingErrorsMatchTheCpu) {
  const std::vector<CudaBindErrorCase> cases = {
      {"qat_matmul_fp8",
       {u8({4, 16}), f32({1}), u8({16, 8}), f32({1})},
       {f32({4, 8})},
       formats(kE5M2, kE5M2)},
      {"qat_matmul_fp8",
       {u8({4, 16}), f32({1}), u8({8, 8}), f32({1})},
       {f32({4, 8})},
       formats(kE4M3, kE4M3)},
      {"qat_matmul_fp8",
       {u8({4, 16}), f32({2}), u8({16, 8}), f32({1})},
       {f32({4, 8})},
       formats(kE4M3, kE4M3)},
      {"qat_quantize_fp8",
       {f32({4, 16}), f32({1, 2})},
       {u8({4, 8}), f32({1})},
       attrs({}, {{"format", kE4M3}})},
      {"qat_quantize_fp8",
       {f32({4, 16}), f32({1, 2})},
       {u8({4, 16}), f32({1})},
       attrs({}, {{"format", 1}})},
  };
  expectCudaBindErrorsMatchCpu(cases);
}

TEST(CudaMatmulFp8, AsksForTheWorkspaceOfItsKMajorCopies) {
  LLMC_REQUIRE_GPU();
  // b [K, N] is not K-major: the kernel transposes it into its workspace.
  std::string error =
      cudaBindError("qat_matmul_fp8", {u8({32, 64}), f32({1}), u8({64, 48}), f32({1})},
                    {typeOnly(DType::BF16, {32, 48})}, formats(kE4M3, kE4M3));
  EXPECT_NE(error.find("needs a workspace of 3072 bytes"), std::string::npos) << error;
}

} // namespace
} // namespace llmc::test
