//===- cuda_embedding_test.cpp - CUDA embedding and its backward vs CPU ---===//
//
// The forward copies rows, so it is compared exactly. The backward sums dy
// rows per id in the order contracts/Embedding.h fixes for both backends
// (segments of the sorted positions, then the segments' sums), so it too is
// compared exactly, and checked to be deterministic. CudaStepEmbeddingGrad
// runs it on byte-token-like data: a few ids, one of them a fifth of all
// positions, so runs cross hundreds of segments.

#include "CudaConformance.h"

#include <random>

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
                             {Metric::Elementwise, {0.0}});
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
                         {Metric::Elementwise, {0.0}});
    idValues.data[0] = -3, idValues.data[5] = 100, idValues.data[7] = 1000;
    Buffer badIds = Buffer::of(idValues, DType::I32);
    expectCudaMatchesCpu("embedding_grad", {&badIds, &dy}, {&dtable}, a,
                         {Metric::Elementwise, {0.0}});
  }
}

TEST(CudaEmbeddingKernels, BackwardIsDeterministic) {
  LLMC_REQUIRE_GPU();
  Buffer ids = Buffer::of(randomIds({8, 1024}, 9960, 0, 50), DType::I32); // heavy repeats
  Buffer dy = Buffer::of(randomTensor({8, 1024, 768}, 9961), DType::F32);
  Buffer dtable(DType::F32, {50, 768});
  auto first = expectCudaMatchesCpu("embedding_grad", {&ids, &dy}, {&dtable}, {},
                                    {Metric::Elementwise, {0.0}});
  auto second = expectCudaMatchesCpu("embedding_grad", {&ids, &dy}, {&dtable}, {},
                                     {Metric::Elementwise, {0.0}});
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0].data, second[0].data);
}

/// Byte-token-like ids: the space (32) a fifth of the positions, the rest
/// spread over 47 letters and signs, as in the bundled stories.
Buffer byteIds(std::vector<int64_t> shape, uint64_t seed) {
  RefTensor ids = randomIds(shape, seed, 0, 47);
  std::mt19937_64 rng(seed + 1);
  for (double &id : ids.data) id = rng() % 5 == 0 ? 32 : 60 + id;
  return Buffer::of(ids, DType::I32);
}

TEST(CudaStepEmbeddingGrad, LongRunsMatchCpuBitForBit) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 9970;
  for (DType t : kFloatTypes)
    for (int64_t vocab : {256, 50257}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " V " + std::to_string(vocab));
      // GPT-2 124M's step: B = 16, T = 1024, C = 768.
      Buffer ids = byteIds({16, 1024}, ++seed);
      Buffer dy = Buffer::of(randomTensor({16, 1024, 768}, ++seed), t);
      Buffer dtable(t, {vocab, 768});
      auto first = expectCudaMatchesCpu("embedding_grad", {&ids, &dy}, {&dtable}, {},
                                        {Metric::Elementwise, {0.0}});
      auto second = expectCudaMatchesCpu("embedding_grad", {&ids, &dy}, {&dtable}, {},
                                         {Metric::Elementwise, {0.0}});
      ASSERT_EQ(first.size(), 1u);
      ASSERT_EQ(second.size(), 1u);
      EXPECT_EQ(first[0].data, second[0].data);
    }
}

TEST(CudaStepEmbeddingGrad, RunsOnSegmentBoundariesMatchCpuBitForBit) {
  // Every run length from 1 to 3 segments, so runs start and end on, just
  // before and just after segment boundaries; C not a multiple of a warp's
  // columns; a vocabulary shard holding the frequent id, and invalid ids.
  LLMC_REQUIRE_GPU();
  RefTensor ids{{0}, {}};
  for (int64_t run = 1, id = 0; run <= 96; ++run, id = (id + 1) % 40)
    for (int64_t k = 0; k < run; ++k) ids.data.push_back(static_cast<double>(id));
  ids.shape = {static_cast<int64_t>(ids.data.size())};
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dtypeName(t));
    Buffer idb = Buffer::of(ids, DType::I32);
    Buffer dy = Buffer::of(randomTensor({ids.shape[0], 300}, 9980), t);
    Buffer dtable(t, {40, 300}), shard(t, {16, 300});
    expectCudaMatchesCpu("embedding_grad", {&idb, &dy}, {&dtable}, {},
                         {Metric::Elementwise, {0.0}});
    RefTensor withBad = ids;
    withBad.data[3] = -1, withBad.data[500] = 99;
    Buffer badIds = Buffer::of(withBad, DType::I32);
    expectCudaMatchesCpu("embedding_grad", {&badIds, &dy}, {&shard},
                         attrs({}, {{"row_offset", 8}, {"vocab_size", 40}}),
                         {Metric::Elementwise, {0.0}});
  }
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
