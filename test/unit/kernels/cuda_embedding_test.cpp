//===- cuda_embedding_test.cpp - CUDA embedding and its backward vs CPU ---===//
//
// embedding and embedding_grad are conformance cases (embedding_test.cpp),
// compared exactly with the CPU. The backward sums dy rows per id in the
// order contracts/Embedding.h fixes for both backends (segments of the
// sorted positions, then the segments' sums); here it is checked to be
// deterministic. CudaStepEmbeddingGrad
// runs it on byte-token-like data: a few ids, one of them a fifth of all
// positions, so runs cross hundreds of segments.

#include "CudaConformance.h"

#include <random>

namespace llmc::test {
namespace {

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
