//===- GptqExpertsTest.cpp - GPTQ of stacked experts against dense GPTQ ---===//
//
// Each expert of a stack is its own GPTQ problem: given the rows a router
// sent to each expert (a grouped matmul's input and offsets, over several
// batches), expert e's slice must be exactly what dense GPTQ gives on a
// layer whose inputs are those rows alone — for every stacked scheme, in
// both slice orientations. With diagonal Hessians the stack must be
// round-to-nearest's bit for bit (the slices' groups land where the
// stacked scheme puts them, NF4's double quantization included). Experts
// without rows, or whose H stays singular, are rounded to nearest and
// named.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/GptqExperts.h"
#include "test/unit/runtime/CorrelatedInputs.h"

#include <gtest/gtest.h>

#include <random>

using namespace llmc;
using quant::Format;
using quant::Granularity;
using quant::makeScheme;
using quant::Scheme;

namespace {

constexpr int64_t kExperts = 4, kIn = 32, kOut = 24;

std::vector<float> randomStack(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(kExperts * kIn * kOut);
  for (float &v : w) v = normal(rng);
  return w;
}

/// An expert's slice: [K, F] (input axis 0) or [F, K] (input axis 1).
std::vector<int64_t> sliceShape(int64_t inputAxis) {
  return inputAxis == 0 ? std::vector<int64_t>{kIn, kOut} : std::vector<int64_t>{kOut, kIn};
}
std::vector<int64_t> stackShape(int64_t inputAxis) {
  std::vector<int64_t> s = sliceShape(inputAxis);
  s.insert(s.begin(), kExperts);
  return s;
}

/// Stacked schemes for slices whose output dimension is `outAxis`.
std::vector<Scheme> stackedSchemes(int64_t outAxis) {
  std::vector<Scheme> all = {makeScheme(Format::Int4, Granularity::Channel, outAxis + 1),
                             makeScheme(Format::Int4, Granularity::Block, 0, 8),
                             makeScheme(Format::Int8, Granularity::Tensor),
                             makeScheme(Format::Int4, Granularity::Channel, outAxis + 1, 0, false),
                             makeScheme(Format::Int3, Granularity::Channel, outAxis + 1),
                             makeScheme(Format::Nf4, Granularity::Block, 0, 8),
                             makeScheme(Format::Fp8E4M3, Granularity::Channel, outAxis + 1)};
  for (Scheme &s : all) s.stacked = true;
  return all;
}

/// One calibration batch: rows, each sent to one expert, sorted by expert
/// as moe_dispatch sorts them; `rowsPer[e]` rows for expert e.
struct Batch {
  std::vector<float> x;
  std::vector<int64_t> offsets;
};
Batch routedBatch(const std::vector<int64_t> &rowsPer, uint32_t seed) {
  Batch b;
  b.offsets = {0};
  for (int64_t n : rowsPer) b.offsets.push_back(b.offsets.back() + n);
  // Two spare rows past the last expert's, as an expert-parallel buffer
  // sized for the worst case has: no expert may read them.
  b.x = llmc::test::correlatedInputs(b.offsets.back() + 2, kIn, seed, 5);
  return b;
}

std::vector<float> slice(const std::vector<float> &stack, int64_t e) {
  const int64_t n = kIn * kOut;
  return {stack.begin() + e * n, stack.begin() + (e + 1) * n};
}

} // namespace

TEST(GptqExperts, EachExpertIsDenseGptqOnItsRoutedRows) {
  // Two batches with uneven routing.
  std::vector<Batch> batches = {routedBatch({40, 7, 60, 21}, 1), routedBatch({12, 50, 3, 35}, 2)};
  quant::ExpertHessians stackH;
  for (const Batch &b : batches)
    ASSERT_EQ(
        quant::accumulateExpertHessians(b.x.data(), b.offsets.back() + 2, kIn, b.offsets, stackH),
        "");
  // The dense layers' Hessians: each expert's rows alone, batch by batch.
  std::vector<std::vector<double>> denseH(kExperts);
  std::vector<int64_t> denseSamples(kExperts, 0);
  for (const Batch &b : batches)
    for (int64_t e = 0; e < kExperts; ++e)
      quant::accumulateHessian(b.x.data() + b.offsets[e] * kIn, b.offsets[e + 1] - b.offsets[e],
                               kIn, denseH[e], denseSamples[e]);
  EXPECT_EQ(stackH.samples, std::vector<int64_t>({52, 57, 63, 56}));
  EXPECT_EQ(stackH.samples, denseSamples);
  EXPECT_EQ(stackH.H, denseH);

  std::vector<float> w = randomStack(3);
  for (int64_t inputAxis : {0, 1})
    for (const Scheme &s : stackedSchemes(1 - inputAxis))
      for (bool actOrder : {false, true}) {
        quant::GptqOptions options;
        options.actOrder = actOrder;
        options.blockSize = 8;
        quant::QuantizedTensor stacked;
        quant::GptqExpertStats stats;
        ASSERT_EQ(quant::gptqQuantizeExperts(w.data(), stackShape(inputAxis), inputAxis, stackH, s,
                                             quant::DoubleQuant::None, options, stacked, &stats),
                  "")
            << quant::schemeString(s);
        EXPECT_EQ(quant::validate(stacked), "");
        EXPECT_TRUE(stats.fallbacks.empty());
        std::vector<float> got = quant::dequantize(stacked);
        for (int64_t e = 0; e < kExperts; ++e) {
          std::vector<float> we = slice(w, e);
          quant::QuantizedTensor dense;
          ASSERT_EQ(quant::gptqQuantize(we.data(), sliceShape(inputAxis), inputAxis, denseH[e],
                                        quant::sliceScheme(s), quant::DoubleQuant::None, options,
                                        dense),
                    "");
          EXPECT_EQ(slice(got, e), quant::dequantize(dense))
              << quant::schemeString(s) << " expert " << e << " input axis " << inputAxis
              << " act-order " << actOrder;
        }
      }
}

TEST(GptqExperts, DiagonalHessiansStoreRoundToNearest) {
  // No coupling between columns: each expert keeps its rounding, and the
  // stack is round-to-nearest's, bytes, scales and double quantization.
  quant::ExpertHessians h;
  for (int64_t e = 0; e < kExperts; ++e) {
    h.H.emplace_back(kIn * kIn, 0.0);
    for (int64_t i = 0; i < kIn; ++i) h.H[e][i * kIn + i] = 1.0 + i + e;
    h.samples.push_back(10);
  }
  std::vector<float> w = randomStack(4);
  for (int64_t inputAxis : {0, 1})
    for (const Scheme &s : stackedSchemes(1 - inputAxis))
      for (quant::DoubleQuant dq : {quant::DoubleQuant::None, quant::DoubleQuant::Int8}) {
        quant::QuantizedTensor nearest, gptq;
        ASSERT_EQ(quant::quantize(w.data(), stackShape(inputAxis), s, dq, nearest), "");
        ASSERT_EQ(quant::gptqQuantizeExperts(w.data(), stackShape(inputAxis), inputAxis, h, s, dq,
                                             {}, gptq),
                  "");
        EXPECT_EQ(nearest.codes, gptq.codes) << quant::schemeString(s);
        EXPECT_EQ(nearest.scales, gptq.scales) << quant::schemeString(s);
        EXPECT_EQ(nearest.zeroPoints, gptq.zeroPoints) << quant::schemeString(s);
        EXPECT_EQ(nearest.absmaxCodes, gptq.absmaxCodes) << quant::schemeString(s);
        EXPECT_EQ(nearest.absmaxScales, gptq.absmaxScales) << quant::schemeString(s);
      }
}

TEST(GptqExperts, ExpertWithoutRowsIsRoundedToNearest) {
  Batch b = routedBatch({50, 0, 60, 40}, 5);
  quant::ExpertHessians h;
  ASSERT_EQ(quant::accumulateExpertHessians(b.x.data(), b.offsets.back(), kIn, b.offsets, h), "");
  EXPECT_EQ(h.samples, std::vector<int64_t>({50, 0, 60, 40}));
  std::vector<float> w = randomStack(6);
  Scheme s = makeScheme(Format::Int4, Granularity::Channel, 1);
  s.stacked = true;
  quant::QuantizedTensor stacked, nearest;
  quant::GptqExpertStats stats;
  ASSERT_EQ(quant::gptqQuantizeExperts(w.data(), stackShape(1), 1, h, s, quant::DoubleQuant::None,
                                       {}, stacked, &stats),
            "");
  ASSERT_EQ(stats.fallbacks.size(), 1u);
  EXPECT_EQ(stats.fallbacks[0].expert, 1);
  EXPECT_EQ(stats.fallbacks[0].why, "received no calibration rows");
  ASSERT_EQ(quant::quantize(w.data(), stackShape(1), s, quant::DoubleQuant::None, nearest), "");
  std::vector<float> got = quant::dequantize(stacked), rtn = quant::dequantize(nearest);
  EXPECT_EQ(slice(got, 1), slice(rtn, 1)); // not zeroed as dead inputs would be
  for (int64_t e : {0, 2, 3}) EXPECT_NE(slice(got, e), slice(rtn, e)) << e;
}

TEST(GptqExperts, SingularHessianFallsBackToRoundToNearest) {
  // Without dampening, an expert of 5 rows has a rank-5 Hessian over 32
  // inputs: no Cholesky factor. It is rounded to nearest, and named.
  Batch b = routedBatch({80, 90, 5, 70}, 7);
  quant::ExpertHessians h;
  ASSERT_EQ(quant::accumulateExpertHessians(b.x.data(), b.offsets.back(), kIn, b.offsets, h), "");
  std::vector<float> w = randomStack(8);
  Scheme s = makeScheme(Format::Int4, Granularity::Block, 0, 8);
  s.stacked = true;
  quant::GptqOptions undamped;
  undamped.dampening = 0.0;
  quant::QuantizedTensor stacked, nearest;
  quant::GptqExpertStats stats;
  ASSERT_EQ(quant::gptqQuantizeExperts(w.data(), stackShape(0), 0, h, s, quant::DoubleQuant::None,
                                       undamped, stacked, &stats),
            "");
  ASSERT_EQ(stats.fallbacks.size(), 1u);
  EXPECT_EQ(stats.fallbacks[0].expert, 2);
  EXPECT_EQ(stats.fallbacks[0].why, "had a Hessian not positive definite after dampening (5 rows)");
  ASSERT_EQ(quant::quantize(w.data(), stackShape(0), s, quant::DoubleQuant::None, nearest), "");
  EXPECT_EQ(slice(quant::dequantize(stacked), 2), slice(quant::dequantize(nearest), 2));
  // With the default dampening the same expert is GPTQ's.
  ASSERT_EQ(quant::gptqQuantizeExperts(w.data(), stackShape(0), 0, h, s, quant::DoubleQuant::None,
                                       {}, stacked, &stats),
            "");
  EXPECT_TRUE(stats.fallbacks.empty());
}

TEST(GptqExperts, RejectsWhatDoesNotFit) {
  std::vector<float> x = llmc::test::correlatedInputs(10, kIn, 9, 5);
  quant::ExpertHessians h;
  EXPECT_EQ(quant::accumulateExpertHessians(x.data(), 10, kIn, {0, 4, 11}, h),
            "expert 1's rows [4, 11) do not lie in the input's 10 rows");
  EXPECT_EQ(quant::accumulateExpertHessians(x.data(), 10, kIn, {0, 6, 4}, h),
            "expert 1's rows [6, 4) do not lie in the input's 10 rows");
  EXPECT_EQ(quant::accumulateExpertHessians(x.data(), 10, kIn, {2, 6, 8}, h),
            "the first expert's rows start at 2, not 0");
  ASSERT_EQ(quant::accumulateExpertHessians(x.data(), 10, kIn, {0, 6, 8}, h), "");
  EXPECT_EQ(quant::accumulateExpertHessians(x.data(), 10, kIn, {0, 2, 6, 8}, h),
            "offsets for 3 experts, but Hessians for 2");

  std::vector<float> w = randomStack(10);
  Scheme s = makeScheme(Format::Int4, Granularity::Block, 0, 7);
  s.stacked = true;
  quant::QuantizedTensor q;
  EXPECT_EQ(
      quant::gptqQuantizeExperts(w.data(), stackShape(1), 1, h, s, quant::DoubleQuant::None, {}, q),
      "blocks of 7 do not divide the last dimension (32)");
  s.block = 8;
  EXPECT_EQ(
      quant::gptqQuantizeExperts(w.data(), stackShape(1), 1, h, s, quant::DoubleQuant::None, {}, q),
      "Hessians for 2 experts, expected 4");
  s.stacked = false;
  EXPECT_EQ(
      quant::gptqQuantizeExperts(w.data(), stackShape(1), 1, h, s, quant::DoubleQuant::None, {}, q),
      "GPTQ of experts quantizes a stack [G, A, B] with a stacked scheme");
}
