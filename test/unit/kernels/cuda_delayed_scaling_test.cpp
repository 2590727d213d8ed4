//===- cuda_delayed_scaling_test.cpp - delayed-scaling bindings on CUDA ---===//
//
// The CUDA factories of qat_delayed_range, qat_amax_history and
// qat_commit_state reject what the CPU's reject, with the CPU's messages
// (their conformance cases, delayed_scaling_test.cpp, run CUDA against the
// CPU).
//
//===----------------------------------------------------------------------===//

#include "CudaConformance.h"

namespace llmc::test {
namespace {

TensorView f32(std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); }

TEST(CudaDelayedScaling, BindingErrorsMatchTheCpu) {
  const std::vector<CudaBindErrorCase> cases = {
      {"qat_delayed_range", {f32({17}), f32({1, 2})}, {f32({1, 2})}, attrs({}, {{"format", 0}})},
      {"qat_delayed_range", {f32({1}), f32({1, 2})}, {f32({1, 2})}, attrs({}, {{"format", 2}})},
      {"qat_amax_history", {f32({17}), f32({2, 2})}, {f32({17})}, {}},
      {"qat_amax_history", {f32({3, 17}), f32({1, 2})}, {f32({3, 17})}, {}},
      {"qat_delayed_range", {f32({4, 17}), f32({4, 2})}, {f32({1, 2})}, attrs({}, {{"format", 2}})},
      {"qat_amax_history", {f32({17}), f32({1, 2})}, {f32({17})}, attrs({}, {{"margin", -1}})},
      {"qat_commit_state", {f32({17}), f32({16}), f32({})}, {f32({17})}, {}},
      {"qat_commit_state", {f32({17}), f32({17}), f32({2})}, {f32({17})}, {}},
  };
  expectCudaBindErrorsMatchCpu(cases);
}

} // namespace
} // namespace llmc::test
