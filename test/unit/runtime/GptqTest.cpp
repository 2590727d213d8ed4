//===- GptqTest.cpp - GPTQ against round-to-nearest on a known layer ------===//
//
// A random linear layer with correlated inputs X (so H = 2·XᵀX/n is far
// from diagonal, as a transformer's is): GPTQ's output error ||XW − XQ||
// must be below round-to-nearest's for every format and granularity, in
// both weight orientations, with and without act-order. With a diagonal H
// no error can be moved, and GPTQ must store exactly round-to-nearest's
// codes — which also checks that its ranges and grid are quantize()'s.
// Dead inputs, dampening of a singular H, lazy batch sizes and the
// Hessian accumulation are checked on their own.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/Gptq.h"
#include "test/unit/runtime/CorrelatedInputs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace llmc;
using quant::Format;
using quant::Granularity;
using quant::Scheme;
using quant::makeScheme;

namespace {

constexpr int64_t kIn = 64, kOut = 48, kSamples = 512;

std::vector<double> hessianOf(const std::vector<float> &x, int64_t n, int64_t K) {
  std::vector<double> H;
  int64_t samples = 0;
  quant::accumulateHessian(x.data(), n, K, H, samples);
  return H;
}

/// The weight in [K, N] (inputAxis 0) or [N, K] (inputAxis 1) layout.
std::vector<float> randomWeight(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(kIn * kOut);
  for (float &v : w) v = normal(rng);
  return w;
}

/// Σ_samples ||x·(W − Q)||², W and Q in the layout of `inputAxis`.
double outputError(const std::vector<float> &x, int64_t n, const std::vector<float> &w,
                   const std::vector<float> &q, int64_t inputAxis) {
  double total = 0.0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < kOut; ++o) {
      double y = 0.0;
      for (int64_t k = 0; k < kIn; ++k) {
        int64_t at = inputAxis == 0 ? k * kOut + o : o * kIn + k;
        y += static_cast<double>(x[r * kIn + k]) * (w[at] - q[at]);
      }
      total += y * y;
    }
  return total;
}

std::vector<int64_t> shapeFor(int64_t inputAxis) {
  return inputAxis == 0 ? std::vector<int64_t>{kIn, kOut} : std::vector<int64_t>{kOut, kIn};
}

/// The schemes checked, for a weight whose output dimension is `outAxis`.
std::vector<Scheme> schemes(int64_t outAxis) {
  return {makeScheme(Format::Int4, Granularity::Channel, outAxis),
          makeScheme(Format::Int4, Granularity::Block, 0, 16),
          makeScheme(Format::Int4, Granularity::Tensor),
          makeScheme(Format::Int4, Granularity::Channel, outAxis, 0, false),
          makeScheme(Format::Int3, Granularity::Channel, outAxis),
          makeScheme(Format::Int3, Granularity::Block, 0, 16),
          makeScheme(Format::Int8, Granularity::Channel, outAxis),
          makeScheme(Format::Nf4, Granularity::Block, 0, 16),
          makeScheme(Format::Fp8E4M3, Granularity::Channel, outAxis)};
}

std::vector<float> rtn(const std::vector<float> &w, int64_t inputAxis, const Scheme &s) {
  quant::QuantizedTensor q;
  EXPECT_EQ(quant::quantize(w.data(), shapeFor(inputAxis), s, quant::DoubleQuant::None, q), "");
  return quant::dequantize(q);
}

std::vector<float> gptq(const std::vector<float> &w, int64_t inputAxis, const Scheme &s,
                        const std::vector<double> &H, const quant::GptqOptions &options = {},
                        quant::GptqStats *stats = nullptr) {
  quant::QuantizedTensor q;
  EXPECT_EQ(quant::gptqQuantize(w.data(), shapeFor(inputAxis), inputAxis, H, s,
                                quant::DoubleQuant::None, options, q, stats),
            "");
  EXPECT_EQ(quant::validate(q), "");
  return quant::dequantize(q);
}

} // namespace

TEST(Gptq, BeatsRoundToNearestOnLayerOutput) {
  std::vector<float> x = llmc::test::correlatedInputs(kSamples, kIn, 1, 7);
  std::vector<double> H = hessianOf(x, kSamples, kIn);
  for (int64_t inputAxis : {0, 1}) {
    std::vector<float> w = randomWeight(2);
    for (const Scheme &s : schemes(1 - inputAxis))
      for (bool actOrder : {false, true}) {
        quant::GptqOptions options;
        options.actOrder = actOrder;
        options.blockSize = 16; // several lazy batches
        double rtnError = outputError(x, kSamples, w, rtn(w, inputAxis, s), inputAxis);
        double gptqError = outputError(x, kSamples, w, gptq(w, inputAxis, s, H, options), inputAxis);
        EXPECT_LT(gptqError, 0.9 * rtnError)
            << quant::schemeString(s) << " input axis " << inputAxis << " act-order "
            << actOrder;
      }
  }
}

TEST(Gptq, DiagonalHessianStoresRoundToNearest) {
  // Nothing couples the columns: every error stays where it is made, and
  // each group's range is its original min/max.
  std::vector<double> H(kIn * kIn, 0.0);
  for (int64_t i = 0; i < kIn; ++i) H[i * kIn + i] = 1.0 + i;
  for (int64_t inputAxis : {0, 1}) {
    std::vector<float> w = randomWeight(3);
    for (const Scheme &s : schemes(1 - inputAxis))
      for (bool actOrder : {false, true}) {
        quant::GptqOptions options;
        options.actOrder = actOrder;
        quant::QuantizedTensor a, b;
        ASSERT_EQ(quant::quantize(w.data(), shapeFor(inputAxis), s, quant::DoubleQuant::None, a),
                  "");
        ASSERT_EQ(quant::gptqQuantize(w.data(), shapeFor(inputAxis), inputAxis, H, s,
                                      quant::DoubleQuant::None, options, b),
                  "");
        EXPECT_EQ(a.codes, b.codes) << quant::schemeString(s);
        EXPECT_EQ(a.scales, b.scales) << quant::schemeString(s);
        EXPECT_EQ(a.zeroPoints, b.zeroPoints) << quant::schemeString(s);
      }
  }
}

TEST(Gptq, DeadInputsAreZeroed) {
  std::vector<float> x = llmc::test::correlatedInputs(kSamples, kIn, 4, 7);
  for (int64_t r = 0; r < kSamples; ++r) x[r * kIn + 5] = x[r * kIn + 40] = 0.0f;
  std::vector<double> H = hessianOf(x, kSamples, kIn);
  std::vector<float> w = randomWeight(5);
  Scheme s = makeScheme(Format::Int4, Granularity::Channel, 0);
  quant::GptqStats stats;
  std::vector<float> q = gptq(w, 1, s, H, {}, &stats);
  EXPECT_EQ(stats.deadColumns, 2);
  for (int64_t o = 0; o < kOut; ++o) {
    EXPECT_EQ(q[o * kIn + 5], 0.0f);
    EXPECT_EQ(q[o * kIn + 40], 0.0f);
  }
  for (float v : q) EXPECT_TRUE(std::isfinite(v));
  EXPECT_LT(outputError(x, kSamples, w, q, 1), outputError(x, kSamples, w, rtn(w, 1, s), 1));
}

TEST(Gptq, DampeningMakesASingularHessianUsable) {
  // Fewer samples than inputs: XᵀX has rank 16 of 64.
  const int64_t n = 16;
  std::vector<float> x = llmc::test::correlatedInputs(n, kIn, 6, 7);
  std::vector<double> H = hessianOf(x, n, kIn);
  std::vector<float> w = randomWeight(7);
  Scheme s = makeScheme(Format::Int4, Granularity::Block, 0, 16);
  quant::QuantizedTensor q;
  quant::GptqOptions undamped;
  undamped.dampening = 0.0;
  std::string why =
      quant::gptqQuantize(w.data(), shapeFor(1), 1, H, s, quant::DoubleQuant::None, undamped, q);
  EXPECT_NE(why.find("not positive definite"), std::string::npos) << why;
  std::vector<float> damped = gptq(w, 1, s, H);
  EXPECT_LT(outputError(x, n, w, damped, 1), outputError(x, n, w, rtn(w, 1, s), 1));
}

TEST(Gptq, LazyBatchSizeDoesNotChangeTheResult) {
  // The lazy update is the same algebra in another order: the stored
  // weights agree up to rounding flips of values within an ulp of a tie.
  std::vector<float> x = llmc::test::correlatedInputs(kSamples, kIn, 8, 7);
  std::vector<double> H = hessianOf(x, kSamples, kIn);
  std::vector<float> w = randomWeight(9);
  Scheme s = makeScheme(Format::Int4, Granularity::Channel, 1);
  quant::GptqOptions whole;
  whole.blockSize = 128;
  double reference = outputError(x, kSamples, w, gptq(w, 0, s, H, whole), 0);
  for (int64_t block : {1, 7, 32}) {
    quant::GptqOptions options;
    options.blockSize = block;
    std::vector<float> q = gptq(w, 0, s, H, options);
    EXPECT_NEAR(outputError(x, kSamples, w, q, 0), reference, 1e-3 * reference) << block;
  }
}

TEST(Gptq, RejectsWhatDoesNotFit) {
  std::vector<float> w = randomWeight(10);
  std::vector<double> H(kIn * kIn, 0.0);
  for (int64_t i = 0; i < kIn; ++i) H[i * kIn + i] = 1.0;
  quant::QuantizedTensor q;
  EXPECT_EQ(quant::gptqQuantize(w.data(), shapeFor(1), 1, std::vector<double>(10),
                                makeScheme(Format::Int4), quant::DoubleQuant::None, {}, q),
            "the Hessian has 10 entries, expected 64x64");
  EXPECT_EQ(quant::gptqQuantize(w.data(), shapeFor(1), 1, H,
                                makeScheme(Format::Int4, Granularity::Block, 0, 60),
                                quant::DoubleQuant::None, {}, q),
            "blocks of 60 do not divide the last dimension (64)");
}

TEST(Gptq, HessianIsTheMeanOverBatches) {
  const int64_t K = 8;
  std::vector<float> x = llmc::test::correlatedInputs(40, K, 11, 7);
  std::vector<double> whole, pieces;
  int64_t n1 = 0, n2 = 0;
  quant::accumulateHessian(x.data(), 40, K, whole, n1);
  quant::accumulateHessian(x.data(), 15, K, pieces, n2);
  quant::accumulateHessian(x.data() + 15 * K, 25, K, pieces, n2);
  EXPECT_EQ(n1, 40);
  EXPECT_EQ(n2, 40);
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < K; ++j) {
      double direct = 0.0;
      for (int64_t r = 0; r < 40; ++r)
        direct += 2.0 * x[r * K + i] * x[r * K + j] / 40.0;
      EXPECT_NEAR(whole[i * K + j], direct, 1e-5 * (1.0 + std::abs(direct)));
      EXPECT_NEAR(pieces[i * K + j], direct, 1e-5 * (1.0 + std::abs(direct)));
    }
}
