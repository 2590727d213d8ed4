//===- cuda_matmul_test.cpp - cuBLASLt matmul against the CPU -------------===//
//
// Norm metric, as for the CPU matmul: each element is a K-term dot product
// that can cancel to near zero. f32 runs without TF32 (the default), so
// 1e-5 holds; bf16 is rounded once on store on both backends.

#include "CudaConformance.h"

namespace llmc::test {
namespace {

struct Case {
  std::vector<int64_t> lead; // a's leading dims
  int64_t m, k, n;
  bool batchedB; // b has a's leading dims (else a shared 2-D b)
};

std::vector<int64_t> shapeOf(const std::vector<int64_t> &lead, int64_t rows, int64_t cols) {
  std::vector<int64_t> shape = lead;
  shape.push_back(rows);
  shape.push_back(cols);
  return shape;
}

std::string describe(DType dtype, const Case &c, int ta, int tb) {
  std::string lead;
  for (int64_t d : c.lead) lead += std::to_string(d) + "x";
  return std::string(dtypeName(dtype)) + " lead " + lead + " m" + std::to_string(c.m) + " k" +
         std::to_string(c.k) + " n" + std::to_string(c.n) + (c.batchedB ? " batched b" : " shared b") +
         " ta " + std::to_string(ta) + " tb " + std::to_string(tb);
}

/// Runs c = op(a)·op(b) (+ c0 when accumulating) on both backends.
void check(DType dtype, const Case &c, int ta, int tb, bool accumulate, uint64_t seed) {
  SCOPED_TRACE(describe(dtype, c, ta, tb) + (accumulate ? " accumulate" : ""));
  Buffer a = Buffer::of(randomTensor(shapeOf(c.lead, ta ? c.k : c.m, ta ? c.m : c.k), seed), dtype);
  std::vector<int64_t> bLead = c.batchedB ? c.lead : std::vector<int64_t>{};
  Buffer b =
      Buffer::of(randomTensor(shapeOf(bLead, tb ? c.n : c.k, tb ? c.k : c.n), seed + 1), dtype);
  Buffer out = Buffer::of(randomTensor(shapeOf(c.lead, c.m, c.n), seed + 2), dtype);
  expectCudaMatchesCpu("matmul", {&a, &b}, {&out},
                       attrs({}, {{"transpose_a", ta},
                                  {"transpose_b", tb},
                                  {"accumulate", accumulate ? 1 : 0}}),
                       {Metric::Norm, {tolerance(dtype)}}, 1, /*keepOutputs=*/accumulate);
}

// Unit and odd sizes in every position, batched and shared b, folded
// (shared b, untransposed a) and strided-batched products.
const std::vector<Case> kSmallCases = {
    {{}, 1, 1, 1, false},       {{}, 1, 7, 1, false},      {{}, 7, 1, 13, false},
    {{}, 1, 129, 37, false},    {{}, 37, 129, 1, false},   {{}, 3, 1000, 7, false},
    {{}, 37, 13, 129, false},   {{2, 3}, 7, 13, 5, false}, {{3}, 7, 13, 9, true},
    {{2, 2}, 33, 17, 13, true}, {{4}, 65, 128, 70, false}, {{5}, 1, 37, 1, false},
    {{1}, 1, 1, 1, true},       {{3}, 1, 7, 129, true},    {{37}, 3, 7, 1, true},
};

TEST(CudaMatmul, MatchesCpuForEveryTransposeAndBatching) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kSmallCases)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) check(dtype, c, ta, tb, false, seed += 3);
}

TEST(CudaMatmul, AccumulateAddsIntoC) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 2000;
  const std::vector<Case> cases = {{{}, 7, 13, 33, false},
                                   {{3}, 7, 13, 33, false},
                                   {{3}, 7, 13, 33, true},
                                   {{2, 2}, 1, 129, 37, true}};
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) check(dtype, c, ta, tb, true, seed += 3);
}

TEST(CudaMatmul, ModelSizedProducts) {
  LLMC_REQUIRE_GPU();
  // GPT-2 small's MLP at B·T = 2·64: forward x·Wᵀ (a Linear's [out, in]
  // weight), x·W, the input gradient dy·W and the weight gradient dyᵀ·x
  // (transposed a, folded leading dims not allowed), and attention's
  // batched q·kᵀ over [B·H] heads.
  uint64_t seed = 3000;
  struct Model {
    Case c;
    int ta, tb;
    bool accumulate;
  };
  const std::vector<Model> cases = {
      {{{2}, 64, 768, 3072, false}, 0, 1, false}, // fc: x [2,64,768] · W[3072,768]ᵀ
      {{{2}, 64, 768, 3072, false}, 0, 0, false}, // x · W[768,3072]
      {{{2}, 64, 3072, 768, false}, 0, 0, false}, // dx = dy · W[3072,768]
      {{{}, 768, 128, 3072, false}, 1, 0, true},  // dW += xᵀ[128,768] · dy[128,3072]
      {{{24}, 64, 64, 64, true}, 0, 1, false},    // scores = q · kᵀ per head
  };
  for (DType dtype : kFloatTypes)
    for (const Model &m : cases) check(dtype, m.c, m.ta, m.tb, m.accumulate, seed += 3);
}

TEST(CudaMatmul, EmptyContractionZeroesOrKeepsC) {
  LLMC_REQUIRE_GPU();
  for (DType dtype : kFloatTypes)
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (accumulate ? " accumulate" : ""));
      Buffer a(dtype, {3, 0}), b(dtype, {0, 5});
      Buffer out = Buffer::of(randomTensor({3, 5}, 4000), dtype);
      expectCudaMatchesCpu("matmul", {&a, &b}, {&out}, attrs({}, {{"accumulate", accumulate}}),
                           {Metric::Elementwise, {0.0}}, 1, /*keepOutputs=*/accumulate);
    }
}

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
