//===- cuda_moe_test.cpp - CUDA mixture-of-experts kernels vs CPU ---------===//
//
// The five kernels are conformance cases (moe_test.cpp): routing's integer
// outputs compared exactly with the CPU's, its weights and sums to 1e-5.
// Here what a case cannot say: routing a step's worth of tokens is
// deterministic run to run, bit for bit (no float atomics; the sums over
// tokens in the CPU's chunk order), and the bind errors are the CPU's.

#include "CudaConformance.h"

namespace llmc::test {
namespace {

TEST(CudaMoeKernels, RoutingIsDeterministic) {
  LLMC_REQUIRE_GPU();
  // 16 sequences of 1024 tokens, 64 experts, 6 chosen (DeepSeek-like).
  const int64_t n = 16 * 1024, e = 64, k = 6;
  for (DType t : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t));
    Buffer logits = Buffer::of(randomTensor({n, e}, 17101, 2.0), t);
    Buffer weights(DType::F32, {n, k}), experts(DType::I32, {n, k}), positions(DType::I32, {n, k}),
        offsets(DType::I32, {e + 1}), probSum(DType::F32, {e}), counts(DType::F32, {e}),
        zSum(DType::F32, {});
    const std::vector<Buffer *> outs = {&weights, &experts, &positions, &offsets,
                                        &probSum, &counts,  &zSum};
    const KernelAttrs a = attrs({}, {{"top_k", k}, {"normalize", 1}});
    const Comparison cmp{Metric::Elementwise, {1e-5, 0.0, 0.0, 0.0, 1e-5, 0.0, 1e-5}};
    std::vector<RefTensor> first = expectCudaMatchesCpu("moe_route", {&logits}, outs, a, cmp);
    std::vector<RefTensor> second = expectCudaMatchesCpu("moe_route", {&logits}, outs, a, cmp);
    ASSERT_EQ(first.size(), 7u);
    ASSERT_EQ(second.size(), 7u);
    for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i].data, second[i].data) << i;
  }
}

TEST(CudaMoeKernels, BindErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  const TensorView logits = typeOnly(DType::F32, {4, 3}), w = typeOnly(DType::F32, {4, 2}),
                   ids = typeOnly(DType::I32, {4, 2}), off = typeOnly(DType::I32, {4}),
                   perExpert = typeOnly(DType::F32, {3}), scalar = typeOnly(DType::F32, {});
  const TensorView x = typeOnly(DType::F32, {4, 5}), xs = typeOnly(DType::F32, {8, 5});
  const std::vector<TensorView> routeOut = {w, ids, ids, off, perExpert, perExpert, scalar};
  expectCudaBindErrorsMatchCpu({
      {"moe_route", {logits}, routeOut, attrs({}, {{"top_k", 4}})},
      {"moe_route",
       {logits},
       {w, ids, ids, typeOnly(DType::I32, {3}), perExpert, perExpert, scalar},
       attrs({}, {{"top_k", 2}})},
      {"moe_route_grad", {logits, ids, w, typeOnly(DType::F32, {4}), scalar}, {logits}, {}},
      {"moe_dispatch", {x, ids, typeOnly(DType::BF16, {4, 2})}, {xs}, {}},
      {"moe_combine", {typeOnly(DType::F32, {7, 5}), ids}, {x}, {}},
      {"moe_combine_weight_grad", {xs, ids, typeOnly(DType::BF16, {4, 5})}, {w}, {}},
  });
}

} // namespace
} // namespace llmc::test
