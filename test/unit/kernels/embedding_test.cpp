//===- embedding_test.cpp - embedding, embedding_grad, rope ---------------===//
//
// embedding copies rows (exact); embedding_grad sums repeated rows (norm
// metric); rope rotates pairs (elementwise metric: each output is a 2-term
// combination that can cancel, so norm metric as well).

#include "KernelTest.h"

#include <cmath>

namespace llmc::test {
namespace {

TEST(EmbeddingKernels, LookupAndScatterAddMatchReference) {
  const int64_t vocab = 13, c = 33;
  for (DType dtype : kFloatTypes)
    for (DType idType : {DType::I32, DType::I64}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " ids " + dtypeName(idType));
      RefTensor table = roundTo(randomTensor({vocab, c}, 401), dtype);
      RefTensor ids = randomIds({3, 7}, 402, 0, vocab - 3); // repeats, and unused rows
      RefTensor dy = roundTo(randomTensor({3, 7, c}, 403), dtype);
      Buffer tb = Buffer::of(table, dtype), ib = Buffer::of(ids, idType),
             dyb = Buffer::of(dy, dtype);
      Buffer out(dtype, {3, 7, c}), dtable(dtype, {vocab, c});
      out.poison(), dtable.poison();
      ASSERT_TRUE(runKernel("embedding", {&tb, &ib}, {&out}));
      EXPECT_CLOSE(out.toRef(), ref::embedding(table, ids), Metric::Elementwise, 0.0);
      ASSERT_TRUE(runKernel("embedding_grad", {&ib, &dyb}, {&dtable}));
      EXPECT_CLOSE(dtable.toRef(), ref::embeddingGrad(ids, dy, vocab), Metric::Norm,
                   tolerance(dtype));
    }
}

TEST(EmbeddingKernels, OutOfRangeIdsNeverReadOutOfBounds) {
  RefTensor table = randomTensor({4, 8}, 411);
  RefTensor ids{{3}, {1.0, 7.0, -1.0}};
  Buffer tb = Buffer::of(table, DType::F32), ib = Buffer::of(ids, DType::I32),
         out(DType::F32, {3, 8});
  ASSERT_TRUE(runKernel("embedding", {&tb, &ib}, {&out}));
  RefTensor got = out.toRef();
  for (int i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(got.data[i], table.data[8 + i]);
    EXPECT_TRUE(std::isnan(got.data[8 + i]) && std::isnan(got.data[16 + i]));
  }
  RefTensor dy = randomTensor({3, 8}, 412);
  Buffer dyb = Buffer::of(dy, DType::F32), dtable(DType::F32, {4, 8});
  dtable.poison();
  ASSERT_TRUE(runKernel("embedding_grad", {&ib, &dyb}, {&dtable}));
  RefTensor grad = dtable.toRef();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(grad.data[i], 0.0);
    EXPECT_FLOAT_EQ(grad.data[8 + i], dy.data[i]);
  }
}

TEST(EmbeddingKernels, VocabularyShardsSumToTheWholeTable) {
  const int64_t vocab = 12, c = 9, shards = 3, rows = vocab / shards;
  RefTensor table = roundTo(randomTensor({vocab, c}, 421), DType::F32);
  RefTensor ids = randomIds({2, 11}, 422, 0, vocab);
  RefTensor dy = randomTensor({2, 11, c}, 423);
  RefTensor whole = ref::embedding(table, ids), wholeGrad = ref::embeddingGrad(ids, dy, vocab);
  RefTensor sum = RefTensor::zeros(whole.shape);
  Buffer ib = Buffer::of(ids, DType::I32), dyb = Buffer::of(dy, DType::F32);
  for (int64_t s = 0; s < shards; ++s) {
    SCOPED_TRACE("shard " + std::to_string(s));
    RefTensor piece = ref::slice(table, {s * rows, 0}, {rows, c});
    Buffer tb = Buffer::of(piece, DType::F32), out(DType::F32, whole.shape),
           dtable(DType::F32, {rows, c});
    out.poison(), dtable.poison();
    KernelAttrs a = attrs({}, {{"row_offset", s * rows}, {"vocab_size", vocab}});
    ASSERT_TRUE(runKernel("embedding", {&tb, &ib}, {&out}, a));
    RefTensor got = out.toRef();
    EXPECT_CLOSE(got, ref::embedding(piece, ids, s * rows, vocab), Metric::Elementwise, 0.0);
    for (int64_t i = 0; i < got.numel(); ++i) sum.data[i] += got.data[i];
    ASSERT_TRUE(runKernel("embedding_grad", {&ib, &dyb}, {&dtable}, a));
    EXPECT_CLOSE(dtable.toRef(), ref::slice(wholeGrad, {s * rows, 0}, {rows, c}), Metric::Norm,
                 1e-6);
  }
  EXPECT_CLOSE(sum, whole, Metric::Elementwise, 0.0);
  // An id outside the whole vocabulary is still an error (NaN) in a shard.
  RefTensor bad{{1}, {static_cast<double>(vocab)}};
  Buffer badIds = Buffer::of(bad, DType::I32), tb = Buffer::of(table, DType::F32),
         out(DType::F32, {1, c});
  RefTensor first = ref::slice(table, {0, 0}, {rows, c});
  Buffer shard0 = Buffer::of(first, DType::F32);
  ASSERT_TRUE(runKernel("embedding", {&shard0, &badIds}, {&out},
                        attrs({}, {{"row_offset", 0}, {"vocab_size", vocab}})));
  for (double v : out.toRef().data) EXPECT_TRUE(std::isnan(v));
  EXPECT_NE(bindError("embedding", {tb.view(), badIds.view()}, {out.view()},
                      attrs({}, {{"row_offset", 4}, {"vocab_size", vocab}}))
                .find("do not fit in vocab_size 12"),
            std::string::npos);
}

TEST(RopeKernel, ForwardAndInverseMatchReference) {
  const std::vector<std::vector<int64_t>> shapes = {{2, 7, 3, 16}, {1, 33, 4, 64}, {2, 5, 1, 2}};
  for (DType dtype : kFloatTypes)
    for (const auto &shape : shapes)
      for (int inverse = 0; inverse < 2; ++inverse) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " D " + std::to_string(shape[3]) +
                     (inverse ? " inverse" : ""));
        RefTensor x = roundTo(randomTensor(shape, 421), dtype);
        Buffer xb = Buffer::of(x, dtype), out(dtype, shape);
        out.poison();
        KernelAttrs a = attrs({{"theta", 10000.0}}, {{"inverse", inverse}});
        ASSERT_TRUE(runKernel("rope", {&xb}, {&out}, a));
        EXPECT_CLOSE(out.toRef(), ref::rope(x, nullptr, 10000.0, inverse), Metric::Norm,
                     tolerance(dtype));
        // In place gives the same result.
        ASSERT_TRUE(runKernel("rope", {&xb}, {&xb}, a));
        EXPECT_CLOSE(xb.toRef(), out.toRef(), Metric::Elementwise, 0.0);
      }
}

/// Packed rows: positions restart per document; i32 and i64 alike, and a
/// position outside [0, T) gives NaN, never a read outside the table.
TEST(RopeKernel, GivenPositionsMatchReference) {
  RefTensor x = randomTensor({2, 9, 3, 8}, 441), positions = RefTensor::zeros({2, 9});
  for (int64_t i = 0; i < 18; ++i) positions.data[i] = static_cast<double>(i % 9 % 4);
  for (DType dtype : kFloatTypes)
    for (DType index : {DType::I32, DType::I64})
      for (int inverse = 0; inverse < 2; ++inverse) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + dtypeName(index) +
                     (inverse ? " inverse" : ""));
        RefTensor xr = roundTo(x, dtype);
        Buffer xb = Buffer::of(xr, dtype), pb = Buffer::of(positions, index), out(dtype, x.shape);
        out.poison();
        KernelAttrs a = attrs({{"theta", 10000.0}}, {{"inverse", inverse}});
        ASSERT_TRUE(runKernel("rope", {&xb, &pb}, {&out}, a));
        EXPECT_CLOSE(out.toRef(), ref::rope(xr, &positions, 10000.0, inverse), Metric::Norm,
                     tolerance(dtype));
      }
  RefTensor bad = positions;
  bad.data[3] = 9;
  Buffer xb = Buffer::of(x, DType::F32), pb = Buffer::of(bad, DType::I32), out(DType::F32, x.shape);
  ASSERT_TRUE(runKernel("rope", {&xb, &pb}, {&out}, attrs({{"theta", 10000.0}})));
  RefTensor got = out.toRef();
  EXPECT_TRUE(std::isnan(got.data[3 * 24]) && std::isnan(got.data[4 * 24 - 1]));
  EXPECT_FALSE(std::isnan(got.data[4 * 24]));
  TensorView x4 = typeOnly(DType::F32, {2, 9, 3, 8});
  EXPECT_EQ(bindError("rope", {x4, typeOnly(DType::I32, {2, 8})}, {x4}, attrs({{"theta", 1e4}})),
            "rope: positions must be i32[2x9], got i32[2x8]");
}

TEST(RopeKernel, InverseUndoesForward) {
  RefTensor x = randomTensor({2, 17, 2, 32}, 431);
  Buffer xb = Buffer::of(x, DType::F32), y(DType::F32, x.shape), back(DType::F32, x.shape);
  ASSERT_TRUE(runKernel("rope", {&xb}, {&y}, attrs({{"theta", 500.0}})));
  ASSERT_TRUE(runKernel("rope", {&y}, {&back}, attrs({{"theta", 500.0}}, {{"inverse", 1}})));
  EXPECT_CLOSE(back.toRef(), x, Metric::Norm, 1e-6);
}

} // namespace
} // namespace llmc::test
