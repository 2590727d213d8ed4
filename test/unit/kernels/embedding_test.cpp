//===- embedding_test.cpp - embedding, embedding_grad, rope ---------------===//
//
// embedding copies rows (exact); embedding_grad sums repeated rows (norm
// metric against the reference, and bit for bit the documented order of
// summation, which the CUDA kernel shares); rope rotates pairs (elementwise metric: each output is a 2-term
// combination that can cancel, so norm metric as well).

#include "KernelTest.h"

#include "kernels/contracts/Embedding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

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

/// embedding_grad's documented order (contracts/Embedding.h), written out
/// in fp32: positions sorted by (row, position), cut into segments of
/// kEmbeddingGradSegment; per row, each segment's dy rows summed from 0 in
/// position order, then the segment sums from 0 in segment order.
std::vector<float> segmentOrderSums(const std::vector<int64_t> &ids, const std::vector<float> &dy,
                                    int64_t vocab, int64_t c) {
  const int64_t segment = contracts::kEmbeddingGradSegment;
  std::vector<int64_t> sorted; // positions by (row, position)
  for (int64_t v = 0; v < vocab; ++v)
    for (size_t n = 0; n < ids.size(); ++n)
      if (ids[n] == v) sorted.push_back(static_cast<int64_t>(n));
  std::vector<float> out(static_cast<size_t>(vocab * c), 0.0f);
  for (int64_t i = 0; i < c; ++i)
    for (size_t k0 = 0; k0 < sorted.size();) {
      const int64_t v = ids[static_cast<size_t>(sorted[k0])];
      size_t k1 = k0;
      while (k1 < sorted.size() && ids[static_cast<size_t>(sorted[k1])] == v) ++k1;
      float total = 0.0f;
      for (size_t s = k0; s < k1;) {
        const size_t end = std::min<size_t>(k1, (s / segment + 1) * segment);
        float piece = 0.0f;
        for (; s < end; ++s) piece += dy[static_cast<size_t>(sorted[s] * c + i)];
        total += piece;
      }
      out[static_cast<size_t>(v * c + i)] = total;
      k0 = k1;
    }
  return out;
}

TEST(EmbeddingKernels, GradSumsInTheSegmentOrderBitForBit) {
  // Byte-token data: few ids, one of them a third of all positions, so runs
  // cross many segments, some start or end on a segment's boundary, and
  // most rows stay zero.
  const int64_t vocab = 256, c = 37, n = 2000;
  std::vector<int64_t> ids(n);
  std::mt19937_64 rng(431);
  for (int64_t k = 0; k < n; ++k)
    ids[k] = rng() % 3 == 0 ? 32 : static_cast<int64_t>(97 + rng() % 26);
  ids[0] = 200; // a row of one position
  RefTensor idTensor{{n}, {}};
  for (int64_t id : ids) idTensor.data.push_back(static_cast<double>(id));
  RefTensor dy = roundTo(randomTensor({n, c}, 432), DType::F32);
  std::vector<float> dyF(dy.data.begin(), dy.data.end());
  const std::vector<float> expected = segmentOrderSums(ids, dyF, vocab, c);
  Buffer ib = Buffer::of(idTensor, DType::I32), dyb = Buffer::of(dy, DType::F32);
  Buffer dtable(DType::F32, {vocab, c});
  dtable.poison();
  ASSERT_TRUE(runKernel("embedding_grad", {&ib, &dyb}, {&dtable}));
  const float *got = dtable.view().as<float>();
  for (int64_t e = 0; e < vocab * c; ++e)
    ASSERT_EQ(std::memcmp(&got[e], &expected[static_cast<size_t>(e)], sizeof(float)), 0)
        << "row " << e / c << " column " << e % c << ": " << got[e] << " vs "
        << expected[static_cast<size_t>(e)];
  EXPECT_CLOSE(dtable.toRef(), ref::embeddingGrad(idTensor, dy, vocab), Metric::Norm, 1e-6);
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

/// Llama 3 scaling at D = 32, θ = 10⁴, factor 8, low 1, high 4, original
/// context 48: pairs 0-1 keep their rate, 2-3 blend, 4-15 are stretched.
KernelAttrs llama3Attrs(int64_t inverse = 0) {
  return attrs({{"theta", 10000.0},
                {"scaling_factor", 8.0},
                {"low_freq_factor", 1.0},
                {"high_freq_factor", 4.0}},
               {{"original_max_positions", 48}, {"inverse", inverse}});
}
const RopeScaling kLlama3{8.0, 1.0, 4.0, 48};

/// transformers 4.44.2's `_compute_llama3_parameters` for that config (its
/// fp32 inv_freq, printed to 9 digits).
TEST(RopeKernel, Llama3RatesAreTransformers) {
  const double hf[16] = {1,           0.562341332, 0.170112297,    0.0408229083,
                         0.0125000002, 0.0070292661, 0.00395284733, 0.00222284929,
                         0.00124999997, 0.000702926656, 0.000395284733, 0.000222284929,
                         0.000125000006, 7.02926627e-05, 3.95284733e-05, 2.22284925e-05};
  for (int64_t i = 0; i < 16; ++i) {
    SCOPED_TRACE("pair " + std::to_string(i));
    EXPECT_NEAR(ropeInverseFrequency(10000.0, i, 32, kLlama3), hf[i], 2e-7 * hf[i]);
  }
  // Unscaled: θ^(−2i/D) as before.
  EXPECT_EQ(ropeInverseFrequency(10000.0, 3, 32), std::pow(10000.0, -6.0 / 32));
}

TEST(RopeKernel, Llama3ScalingMatchesReference) {
  RefTensor positions = RefTensor::zeros({2, 21});
  for (int64_t i = 0; i < 42; ++i) positions.data[i] = static_cast<double>(i % 21 % 13);
  for (DType dtype : kFloatTypes)
    for (int inverse = 0; inverse < 2; ++inverse) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (inverse ? " inverse" : ""));
      RefTensor x = roundTo(randomTensor({2, 21, 3, 32}, 451), dtype);
      Buffer xb = Buffer::of(x, dtype), out(dtype, x.shape);
      out.poison();
      ASSERT_TRUE(runKernel("rope", {&xb}, {&out}, llama3Attrs(inverse)));
      RefTensor want = ref::rope(x, nullptr, 10000.0, inverse, kLlama3);
      EXPECT_CLOSE(out.toRef(), want, Metric::Norm, tolerance(dtype));
      // The scaling is no rounding: unscaled differs by far more.
      RefTensor unscaled = ref::rope(x, nullptr, 10000.0, inverse);
      double far = 0;
      for (size_t i = 0; i < want.data.size(); ++i)
        far = std::max(far, std::fabs(want.data[i] - unscaled.data[i]));
      EXPECT_GT(far, 0.1);
      Buffer pb = Buffer::of(positions, DType::I64);
      ASSERT_TRUE(runKernel("rope", {&xb, &pb}, {&out}, llama3Attrs(inverse)));
      EXPECT_CLOSE(out.toRef(), ref::rope(x, &positions, 10000.0, inverse, kLlama3),
                   Metric::Norm, tolerance(dtype));
      ASSERT_TRUE(runKernel("rope", {&xb}, {&xb}, llama3Attrs(inverse)));
      EXPECT_CLOSE(xb.toRef(), want, Metric::Norm, tolerance(dtype));
    }
  // position_limit rows past T rotate by the same scaled rates.
  RefTensor x = randomTensor({1, 4, 2, 32}, 452), late = RefTensor::zeros({1, 4});
  for (int64_t i = 0; i < 4; ++i) late.data[i] = static_cast<double>(30 + i);
  Buffer xb = Buffer::of(x, DType::F32), pb = Buffer::of(late, DType::I32),
         out(DType::F32, x.shape);
  KernelAttrs a = llama3Attrs();
  a.setInt("position_limit", 40);
  ASSERT_TRUE(runKernel("rope", {&xb, &pb}, {&out}, a));
  RefTensor wide = RefTensor::zeros({1, 34, 2, 32});
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t e = 0; e < 64; ++e) wide.data[(30 + t) * 64 + e] = x.data[t * 64 + e];
  RefTensor whole = ref::rope(wide, nullptr, 10000.0, false, kLlama3);
  EXPECT_CLOSE(out.toRef(), ref::slice(whole, {0, 30, 0, 0}, {1, 4, 2, 32}), Metric::Norm,
               tolerance(DType::F32));
}

TEST(RopeKernel, Llama3ScalingBindErrors) {
  TensorView x = typeOnly(DType::F32, {1, 4, 2, 8});
  EXPECT_EQ(bindError("rope", {x}, {x}, attrs({{"theta", 1e4}, {"scaling_factor", 8.0}})),
            "rope: attributes 'scaling_factor', 'low_freq_factor', 'high_freq_factor' and "
            "'original_max_positions' go together (Llama 3 scaling)");
  auto with = [](double factor, double low, double high, int64_t original) {
    return attrs({{"theta", 1e4},
                  {"scaling_factor", factor},
                  {"low_freq_factor", low},
                  {"high_freq_factor", high}},
                 {{"original_max_positions", original}});
  };
  EXPECT_EQ(bindError("rope", {x}, {x}, with(0, 1, 4, 8)),
            "rope: attribute 'scaling_factor' must be positive");
  EXPECT_EQ(bindError("rope", {x}, {x}, with(8, 4, 4, 8)),
            "rope: attributes 'low_freq_factor' (4.000000) and 'high_freq_factor' (4.000000) "
            "must satisfy 0 < low < high");
  EXPECT_EQ(bindError("rope", {x}, {x}, with(8, 1, 4, 0)),
            "rope: attribute 'original_max_positions' must be at least 1");
}

} // namespace
} // namespace llmc::test
