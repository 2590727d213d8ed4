//===- cuda_fused_elementwise_test.cpp - the generated loop's bindings ---===//
//
// The programs against the CPU are conformance cases
// (fused_elementwise_test.cpp). Here: a bad program fails to bind with the
// CPU's message.

#include "CudaConformance.h"
#include "ElementwiseProgramBuilder.h"

namespace llmc::test {
namespace {

using ew::Opcode;

TEST(CudaFusedElementwise, BindingErrorsAreTheCpus) {
  LLMC_REQUIRE_GPU();
  TensorView x = typeOnly(DType::F32, {4, 8}), y = typeOnly(DType::F32, {4, 8});
  ProgramBuilder p;
  int64_t r = p.emit(Opcode::Load, DType::F32, 0);
  p.yields = {p.emit(Opcode::Add, DType::F32, r, 3)};
  EXPECT_EQ(cudaBindError("fused_elementwise", {x}, {y}, p.attrs()),
            bindError("fused_elementwise", {x}, {y}, p.attrs()));
  EXPECT_NE(cudaBindError("fused_elementwise", {x}, {y}, p.attrs()), "");
}

} // namespace
} // namespace llmc::test
