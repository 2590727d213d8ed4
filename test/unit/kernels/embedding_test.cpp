//===- embedding_test.cpp - embedding, embedding_grad, rope ---------------===//
//
// embedding, embedding_grad and rope are conformance cases (Conformance.h).
// embedding copies rows (exact); embedding_grad sums repeated rows (norm
// metric against the reference, exact between backends, and checked here
// bit for bit in the documented order of summation, which the CUDA kernel
// shares); rope rotates pairs (norm metric: each output is a difference of
// products). Here also: out-of-range ids and positions, vocabulary shards
// summing to the whole table, Llama 3 rates against transformers.

#include "Conformance.h"

#include "kernels/contracts/Embedding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace llmc::test {
namespace {

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

/// In place rewrites x with exactly the out-of-place result.
TEST(RopeKernel, InPlaceEqualsOutOfPlaceBitForBit) {
  for (DType dtype : kFloatTypes)
    for (int inverse = 0; inverse < 2; ++inverse) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (inverse ? " inverse" : ""));
      std::vector<int64_t> shape = {1, 33, 4, 64};
      Buffer xb = Buffer::of(randomTensor(shape, 421), dtype), out(dtype, shape);
      out.poison();
      KernelAttrs a = attrs({{"theta", 10000.0}}, {{"inverse", inverse}});
      ASSERT_TRUE(runKernel("rope", {&xb}, {&out}, a));
      ASSERT_TRUE(runKernel("rope", {&xb}, {&xb}, a));
      EXPECT_CLOSE(xb.toRef(), out.toRef(), Metric::Elementwise, 0.0);
    }
}

/// A position outside [0, T) gives NaN, never a read outside the table.
TEST(RopeKernel, PositionsOutOfRangeGiveNaN) {
  RefTensor x = randomTensor({2, 9, 3, 8}, 441), positions = RefTensor::zeros({2, 9});
  for (int64_t i = 0; i < 18; ++i) positions.data[i] = static_cast<double>(i % 9 % 4);
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

/// An embedding call: a [vocab, c] table (or the shard of rows [rowOffset,
/// rowOffset + vocab) of a vocabulary of vocabSize) and ids of `idShape`.
struct EmbeddingShape {
  int64_t vocab, c;
  std::vector<int64_t> idShape;
  int64_t rowOffset = 0, vocabSize = 0; // vocabSize 0: the whole table
};

/// Ids outside [0, vocabulary) the kernels treat as errors: a NaN row
/// forward, nothing added backward.
bool invalidId(double id, int64_t vocabulary) { return id < 0 || id >= vocabulary; }

/// The reference embedding with invalid ids' rows NaN.
RefTensor embeddingWithInvalid(const RefTensor &table, RefTensor ids, const EmbeddingShape &e) {
  int64_t vocabulary = e.vocabSize ? e.vocabSize : e.vocab;
  std::vector<int64_t> invalid;
  for (int64_t n = 0; n < ids.numel(); ++n)
    if (invalidId(ids.data[n], vocabulary))
      invalid.push_back(n), ids.data[n] = 0;
  RefTensor out = ref::embedding(table, ids, e.rowOffset, e.vocabSize);
  for (int64_t n : invalid)
    for (int64_t i = 0; i < e.c; ++i) out.data[n * e.c + i] = std::nan("");
  return out;
}

/// The reference embedding_grad over the valid ids only.
RefTensor embeddingGradWithInvalid(const RefTensor &ids, const RefTensor &dy,
                                   const EmbeddingShape &e) {
  int64_t vocabulary = e.vocabSize ? e.vocabSize : e.vocab;
  RefTensor validIds{{0}, {}}, validDy{{0, e.c}, {}};
  for (int64_t n = 0; n < ids.numel(); ++n) {
    if (invalidId(ids.data[n], vocabulary))
      continue;
    validIds.data.push_back(ids.data[n]);
    validDy.data.insert(validDy.data.end(), dy.data.begin() + n * e.c,
                        dy.data.begin() + (n + 1) * e.c);
  }
  const int64_t valid = static_cast<int64_t>(validIds.data.size());
  validIds.shape = {valid};
  validDy.shape = {valid, e.c};
  return ref::embeddingGrad(validIds, validDy, e.vocab, e.rowOffset, e.vocabSize);
}

/// Tables of one row and one column up to GPT-2's, ids with many repeats
/// (small vocabularies), a vocabulary shard whose ids fall mostly in other
/// shards, and (`badIds`) ids outside the vocabulary: NaN rows forward,
/// nothing added backward.
std::vector<ConformanceCase> embeddingCases() {
  const std::vector<EmbeddingShape> shapes = {{1, 1, {1}},         {7, 3, {5}},
                                              {13, 33, {3, 7}},    {13, 129, {3, 37}},
                                              {1000, 7, {2, 500}}, {33, 19, {6, 41}, 40, 100}};
  std::vector<ConformanceCase> cases;
  uint64_t seed = 9900;
  auto add = [&](DType dtype, DType idType, const EmbeddingShape &e, bool badIds) {
    std::string label = std::string(dtypeName(dtype)) + "_ids_" + dtypeName(idType) + "_V" +
                        std::to_string(e.vocab) + "_C" + std::to_string(e.c);
    if (e.vocabSize)
      label += "_rows" + std::to_string(e.rowOffset) + "of" + std::to_string(e.vocabSize);
    if (badIds)
      label += "_bad_ids";
    uint64_t caseSeed = seed += 3;
    std::vector<int64_t> outShape = e.idShape;
    outShape.push_back(e.c);
    int64_t vocabulary = e.vocabSize ? e.vocabSize : e.vocab;
    auto ids = [=] {
      RefTensor values = randomIds(e.idShape, caseSeed + 1, 0, vocabulary);
      if (badIds)
        values.data[0] = -3, values.data[values.numel() - 1] = static_cast<double>(vocabulary);
      return Buffer::of(values, idType);
    };
    KernelAttrs a;
    if (e.vocabSize)
      a = attrs({}, {{"row_offset", e.rowOffset}, {"vocab_size", e.vocabSize}});
    cases.push_back({"embedding", label, [=] {
                       KernelCall k;
                       k.input(randomTensor({e.vocab, e.c}, caseSeed), dtype);
                       k.input(ids());
                       k.output(dtype, outShape);
                       k.attrs = a;
                       k.reference = [e](const std::vector<RefTensor> &in) {
                         return std::vector<RefTensor>{embeddingWithInvalid(in[0], in[1], e)};
                       };
                       k.tolerances = k.cudaTolerances = {0.0}; // rows are copied
                       return k;
                     }});
    // The CUDA kernel sums in the CPU's documented order: equal exactly.
    cases.push_back({"embedding_grad", label, [=] {
                       KernelCall k;
                       k.input(ids());
                       k.input(randomTensor(outShape, caseSeed + 2), dtype);
                       k.output(dtype, {e.vocab, e.c});
                       k.attrs = a;
                       k.reference = [e](const std::vector<RefTensor> &in) {
                         return std::vector<RefTensor>{embeddingGradWithInvalid(in[0], in[1], e)};
                       };
                       k.metric = Metric::Norm;
                       k.cudaTolerances = {0.0};
                       return k;
                     }});
  };
  for (DType dtype : kFloatTypes) {
    for (DType idType : {DType::I32, DType::I64})
      for (const EmbeddingShape &e : shapes) add(dtype, idType, e, false);
    add(dtype, DType::I32, shapes.back(), true);
    add(dtype, DType::I64, shapes[3], true);
    add(dtype, DType::I32, {50257, 768, {4, 1024}}, false);
  }
  return cases;
}

/// rope in place and not, forward and inverse, with packed-row positions
/// (i32 and i64) and with Llama 3 scaling (all three bands at D = 32 and
/// 64). Each output is a difference of products: norm metric.
std::vector<ConformanceCase> ropeCases() {
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 1, 1, 2}, {2, 5, 1, 2}, {2, 7, 3, 10}, {2, 7, 3, 16}, {1, 37, 5, 64}, {4, 1024, 12, 64}};
  const std::vector<std::vector<int64_t>> llama3Shapes = {{2, 21, 3, 32}, {1, 300, 4, 64}};
  enum class Layout { Plain, InPlace, Positions };
  std::vector<ConformanceCase> cases;
  uint64_t seed = 9800;
  auto add = [&](DType dtype, const std::vector<int64_t> &shape, int64_t inverse, Layout layout,
                 DType index, bool llama3) {
    std::string label =
        std::string(dtypeName(dtype)) + "_" + shapeLabel(shape) + (inverse ? "_inverse" : "") +
        (llama3 ? "_llama3" : "") + (layout == Layout::InPlace ? "_in_place" : "") +
        (layout == Layout::Positions ? std::string("_positions_") + dtypeName(index) : "");
    cases.push_back({"rope", label, [=, caseSeed = ++seed] {
                       KernelCall k;
                       size_t x = k.input(randomTensor(shape, caseSeed), dtype);
                       if (layout == Layout::Positions) {
                         // Packed rows: positions restart every 5 (17) tokens.
                         RefTensor positions = RefTensor::zeros({shape[0], shape[1]});
                         for (size_t i = 0; i < positions.data.size(); ++i)
                           positions.data[i] = static_cast<double>(
                               i % static_cast<size_t>(shape[1]) % (llama3 ? 17 : 5));
                         k.input(positions, index);
                       }
                       if (layout == Layout::InPlace)
                         k.outputs.push_back(x);
                       else
                         k.output(dtype, shape);
                       RopeScaling scaling;
                       k.attrs = attrs({{"theta", 10000.0}}, {{"inverse", inverse}});
                       if (llama3) {
                         k.attrs = llama3Attrs(inverse);
                         scaling = kLlama3;
                       }
                       k.reference = [inverse, scaling](const std::vector<RefTensor> &in) {
                         const RefTensor *positions = in.size() > 1 ? &in[1] : nullptr;
                         return std::vector<RefTensor>{
                             ref::rope(in[0], positions, 10000.0, inverse != 0, scaling)};
                       };
                       k.metric = k.cudaMetric = Metric::Norm;
                       return k;
                     }});
  };
  for (DType dtype : kFloatTypes)
    for (int64_t inverse : {0, 1}) {
      for (const std::vector<int64_t> &shape : shapes) {
        add(dtype, shape, inverse, Layout::Plain, DType::I32, false);
        add(dtype, shape, inverse, Layout::InPlace, DType::I32, false);
        add(dtype, shape, inverse, Layout::Positions, inverse ? DType::I64 : DType::I32, false);
      }
      for (const std::vector<int64_t> &shape : llama3Shapes) {
        add(dtype, shape, inverse, Layout::Plain, DType::I32, true);
        add(dtype, shape, inverse, Layout::Positions, DType::I64, true);
      }
    }
  return cases;
}

LLMC_CONFORMANCE_CASES(Embedding, embeddingCases);
LLMC_CONFORMANCE_CASES(Rope, ropeCases);

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
