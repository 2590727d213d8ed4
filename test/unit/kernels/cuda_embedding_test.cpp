//===- cuda_embedding_test.cpp - CUDA embedding and its backward vs CPU ---===//
//
// The forward copies rows, so it is compared exactly. The backward sums dy
// rows per id in position order on both backends: compared with the norm
// metric at the dtype's tolerance, and checked to be deterministic.

#include "CudaConformance.h"

namespace llmc::test {
namespace {

struct EmbeddingCase {
  int64_t vocab, c;
  std::vector<int64_t> ids;
};

const std::vector<EmbeddingCase> kCases = {
    {1, 1, {1}}, {7, 3, {5}}, {13, 129, {3, 37}}, {1000, 7, {2, 500}}, {50257, 768, {4, 1024}}};

TEST(CudaEmbeddingKernels, LookupAndScatterAddMatchCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 9900;
  for (DType t : kFloatTypes)
    for (DType idType : {DType::I32, DType::I64})
      for (const EmbeddingCase &c : kCases) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " ids " + dtypeName(idType) + " V " +
                     std::to_string(c.vocab) + " C " + std::to_string(c.c));
        std::vector<int64_t> outShape = c.ids;
        outShape.push_back(c.c);
        Buffer table = Buffer::of(randomTensor({c.vocab, c.c}, ++seed), t);
        // Few distinct ids for the small vocabularies: many repeats.
        Buffer ids = Buffer::of(randomIds(c.ids, ++seed, 0, c.vocab), idType);
        Buffer dy = Buffer::of(randomTensor(outShape, ++seed), t);
        Buffer out(t, outShape), dtable(t, {c.vocab, c.c});
        expectCudaMatchesCpu("embedding", {&table, &ids}, {&out}, {},
                             {Metric::Elementwise, {0.0}});
        expectCudaMatchesCpu("embedding_grad", {&ids, &dy}, {&dtable}, {},
                             {Metric::Norm, {tolerance(t)}});
      }
}

TEST(CudaEmbeddingKernels, VocabularyShard) {
  // Rows [40, 73) of a 100-word vocabulary: other shards' ids give zero rows
  // forward and nothing backward; invalid ids are skipped backward.
  LLMC_REQUIRE_GPU();
  for (DType t : kFloatTypes) {
    Buffer table = Buffer::of(randomTensor({33, 19}, 9950), t);
    RefTensor idValues = randomIds({6, 41}, 9951, 0, 100);
    Buffer ids = Buffer::of(idValues, DType::I32);
    Buffer dy = Buffer::of(randomTensor({6, 41, 19}, 9952), t);
    Buffer out(t, {6, 41, 19}), dtable(t, {33, 19});
    KernelAttrs a = attrs({}, {{"row_offset", 40}, {"vocab_size", 100}});
    expectCudaMatchesCpu("embedding", {&table, &ids}, {&out}, a, {Metric::Elementwise, {0.0}});
    expectCudaMatchesCpu("embedding_grad", {&ids, &dy}, {&dtable}, a,
                         {Metric::Norm, {tolerance(t)}});
    idValues.data[0] = -3, idValues.data[5] = 100, idValues.data[7] = 1000;
    Buffer badIds = Buffer::of(idValues, DType::I32);
    expectCudaMatchesCpu("embedding_grad", {&badIds, &dy}, {&dtable}, a,
                         {Metric::Norm, {tolerance(t)}});
  }
}

TEST(CudaEmbeddingKernels, BackwardIsDeterministic) {
  LLMC_REQUIRE_GPU();
  Buffer ids = Buffer::of(randomIds({8, 1024}, 9960, 0, 50), DType::I32); // heavy repeats
  Buffer dy = Buffer::of(randomTensor({8, 1024, 768}, 9961), DType::F32);
  Buffer dtable(DType::F32, {50, 768});
  auto first = expectCudaMatchesCpu("embedding_grad", {&ids, &dy}, {&dtable}, {},
                                    {Metric::Norm, {1e-5}});
  auto second = expectCudaMatchesCpu("embedding_grad", {&ids, &dy}, {&dtable}, {},
                                     {Metric::Norm, {1e-5}});
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0].data, second[0].data);
}

TEST(CudaEmbeddingKernels, BindErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  TensorView table = typeOnly(DType::F32, {10, 4}), ids = typeOnly(DType::I32, {3});
  TensorView out = typeOnly(DType::F32, {3, 4});
  KernelAttrs bad = attrs({}, {{"row_offset", 5}, {"vocab_size", 12}});
  EXPECT_EQ(cudaBindError("embedding", {table, ids}, {out}, bad),
            "embedding: rows [5, 15) do not fit in vocab_size 12");
  EXPECT_EQ(cudaBindError("embedding", {table, ids}, {out}, bad),
            bindError("embedding", {table, ids}, {out}, bad));
  TensorView floatIds = typeOnly(DType::F32, {3});
  EXPECT_EQ(cudaBindError("embedding_grad", {floatIds, out}, {table}),
            bindError("embedding_grad", {floatIds, out}, {table}));
}

} // namespace
} // namespace llmc::test
