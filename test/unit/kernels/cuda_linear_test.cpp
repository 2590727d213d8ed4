//===- cuda_linear_test.cpp - the fused linear GEMMs against the CPU ------===//
//
// linear, linear_weight_grad, matmul_gelu_grad and matmul_swiglu_grad are
// conformance cases (linear_test.cpp): cuBLASLt's epilogues and their
// fallbacks run on the GPU by CudaKernelConformance. Here: their binding
// errors, the CPU's.

#include "CudaConformance.h"

namespace llmc::test {
namespace {

TEST(CudaLinear, BindingErrorsMatchTheCpu) {
  LLMC_REQUIRE_GPU();
  TensorView x = typeOnly(DType::F32, {4, 8, 16}), w = typeOnly(DType::F32, {16, 32}),
             bias = typeOnly(DType::F32, {32}), y = typeOnly(DType::F32, {4, 8, 32});
  EXPECT_EQ(cudaBindError("linear", {x, w, typeOnly(DType::F32, {16})}, {y}),
            bindError("linear", {x, w, typeOnly(DType::F32, {16})}, {y}));
  KernelAttrs keepPre = attrs({}, {{"keep_pre", 1}});
  EXPECT_EQ(cudaBindError("linear", {x, w, bias}, {y, y}, keepPre),
            bindError("linear", {x, w, bias}, {y, y}, keepPre));
  TensorView rows = typeOnly(DType::F32, {32, 32});
  EXPECT_EQ(cudaBindError("linear", {x, w, bias, rows}, {y}),
            bindError("linear", {x, w, bias, rows}, {y}));
  TensorView dy = typeOnly(DType::F32, {31, 32}), dw = typeOnly(DType::F32, {16, 32});
  EXPECT_EQ(cudaBindError("linear_weight_grad", {x, dy}, {dw, bias}),
            bindError("linear_weight_grad", {x, dy}, {dw, bias}));
  EXPECT_EQ(cudaBindError("matmul_gelu_grad", {x, w, bias}, {y}),
            bindError("matmul_gelu_grad", {x, w, bias}, {y}));
  EXPECT_EQ(cudaBindError("matmul_swiglu_grad", {x, w, y, bias}, {y, y}),
            bindError("matmul_swiglu_grad", {x, w, y, bias}, {y, y}));
}

} // namespace
} // namespace llmc::test
