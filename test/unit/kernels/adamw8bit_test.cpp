//===- adamw8bit_test.cpp - the 8-bit AdamW state format and kernel -------===//
//
// The contract is common/Adam8bit.h. Tables and encoding are checked on
// their own first (the fast Encoder must give encode()'s code for every
// float). The kernel is then compared two ways:
//  - as conformance cases (Conformance.h), against the double reference,
//    which decides codes on the exact ratio m'/absmax'. The kernel
//    decides on its fp32 ratio, so next to a
//    midpoint between two entries it may take the other one. That is not
//    rare: the entries are midpoints of regular grids, so ratios of values
//    with few mantissa bits (bf16 gradients on a fresh state) often fall
//    exactly between two of them. A differing code must therefore still be
//    nearest up to a rounding-sized slack (1e-6 of the terms m' was summed
//    from, relative to absmax), far below half of any table step, so a
//    genuinely wrong code fails;
//  - bit for bit against the fp32 adamw kernel run on the decoded state,
//    followed by encode() applied as the contract says: the update's
//    arithmetic is shared, so p', absmax' and every code must agree
//    exactly.
// Then: every output byte is written, an all-zero state stays zero under a
// zero gradient, 8-bit AdamW tracks fp32 AdamW over many steps of a noisy
// quadratic, and the factory names a bad operand.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include "common/Adam8bit.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace llmc::test {
namespace {

using adam8bit::kBlock;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

KernelAttrs adamAttrs(double maxGradNorm, double weightDecay = 0.1) {
  return attrs({{"beta1", 0.9},
                {"beta2", 0.95},
                {"epsilon", 1e-8},
                {"weight_decay", weightDecay},
                {"max_grad_norm", maxGradNorm}});
}

uint8_t *bytesOf(Buffer &b) { return b.view().as<uint8_t>(); }

/// A u8 tensor's values (KernelTest's Buffer helpers cover float and int
/// dtypes only).
std::vector<uint8_t> codesOf(const Buffer &b) {
  const uint8_t *data = b.view().as<uint8_t>();
  return std::vector<uint8_t>(data, data + b.view().numel());
}

Buffer scalar(double value) { return Buffer::of(RefTensor{{}, {value}}, DType::F32); }

/// One moment's 8-bit state: codes shaped like the parameter, and one
/// absmax per block.
struct State {
  Buffer codes, absmax;

  explicit State(const std::vector<int64_t> &shape)
      : codes(DType::U8, shape), absmax(DType::F32, {adam8bit::blockCount(product(shape))}) {}

  static int64_t product(const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }

  /// Uniform random codes and absmax of about `scale`.
  static State random(const std::vector<int64_t> &shape, uint64_t seed, double scale) {
    State s(shape);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> code(0, 255);
    std::uniform_real_distribution<double> factor(0.1, 1.0);
    uint8_t *codes = bytesOf(s.codes);
    for (int64_t i = 0; i < s.codes.view().numel(); ++i) codes[i] = static_cast<uint8_t>(code(rng));
    RefTensor absmax = RefTensor::zeros(s.absmax.shape);
    for (double &a : absmax.data) a = scale * factor(rng);
    s.absmax = Buffer::of(absmax, DType::F32);
    return s;
  }

  /// table[code] · absmax in fp32, as the contract decodes.
  RefTensor decode(const std::array<float, 256> &table) const {
    RefTensor x = RefTensor::zeros(codes.shape);
    std::vector<uint8_t> c = codesOf(codes);
    const float *scale = absmax.view().as<float>();
    for (size_t i = 0; i < c.size(); ++i) x.data[i] = table[c[i]] * scale[i / kBlock];
    return x;
  }
};

/// Codes from the kernel against the reference's ideal ones (see the file
/// comment). `exact` is the reference's unquantized m' (or v'), `absmax`
/// its block maxima, `magnitude` a bound on the terms it was summed from.
::testing::AssertionResult codesNearest(const std::array<float, 256> &table,
                                        const std::vector<uint8_t> &got, const RefTensor &want,
                                        const RefTensor &exact, const RefTensor &absmax,
                                        const RefTensor &magnitude) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want.data[i]) continue;
    double scale = absmax.data[i / kBlock];
    if (scale == 0.0)
      return ::testing::AssertionFailure()
             << "element " << i << ": absmax is 0 so the code must be 0, got " << int(got[i]);
    double ratio = exact.data[i] / scale;
    double slack = 1e-6 * magnitude.data[i] / scale;
    double gotDistance = std::abs(table[got[i]] - ratio);
    double bestDistance = std::abs(table[static_cast<size_t>(want.data[i])] - ratio);
    if (gotDistance > bestDistance + slack)
      return ::testing::AssertionFailure()
             << "element " << i << ": ratio " << ratio << " encoded as " << int(got[i]) << " ("
             << table[got[i]] << "), nearest is " << want.data[i] << " ("
             << table[static_cast<size_t>(want.data[i])] << ")";
  }
  return ::testing::AssertionSuccess();
}

//===----------------------------------------------------------------------===//
// Tables and encoding
//===----------------------------------------------------------------------===//

TEST(Adam8bitTables, AscendingWithZeroOneAndSevenDecades) {
  for (bool isSigned : {true, false}) {
    SCOPED_TRACE(isSigned ? "signed" : "unsigned");
    const std::array<float, 256> &t =
        isSigned ? adam8bit::signedTable() : adam8bit::unsignedTable();
    for (size_t k = 1; k < t.size(); ++k) EXPECT_LT(t[k - 1], t[k]) << "at " << k;
    EXPECT_EQ(t.back(), 1.0f);
    EXPECT_NE(std::find(t.begin(), t.end(), 0.0f), t.end());
    float smallest = std::numeric_limits<float>::infinity();
    for (float x : t)
      if (x != 0.0f) smallest = std::min(smallest, std::abs(x));
    // The lowest decade's entries are 1e-6 · (midpoints in [0.1, 1]).
    EXPECT_GT(smallest, 1e-7f);
    EXPECT_LT(smallest, 1e-6f);
    if (isSigned) {
      // Symmetric apart from +1; the most negative entry is just above −1.
      for (float x : t) {
        if (x != 1.0f) {
          EXPECT_NE(std::find(t.begin(), t.end(), -x), t.end()) << x;
        }
      }
      EXPECT_GT(t.front(), -1.0f);
      EXPECT_LT(t.front(), -0.99f);
    } else {
      EXPECT_EQ(t.front(), 0.0f);
    }
  }
}

TEST(Adam8bitEncode, PicksTheNearestEntryWithTiesToTheLower) {
  std::mt19937_64 rng(8001);
  std::uniform_real_distribution<double> exponent(-8.0, 0.0);
  for (bool isSigned : {true, false}) {
    SCOPED_TRACE(isSigned ? "signed" : "unsigned");
    const std::array<float, 256> &t =
        isSigned ? adam8bit::signedTable() : adam8bit::unsignedTable();
    for (size_t k = 0; k < t.size(); ++k) EXPECT_EQ(adam8bit::encode(t, t[k]), k);
    // Log-uniform magnitudes over the table's decades: every one is hit.
    for (int trial = 0; trial < 100000; ++trial) {
      float x = static_cast<float>(std::pow(10.0, exponent(rng)));
      if (isSigned && trial % 2) x = -x;
      int code = adam8bit::encode(t, x);
      double distance = std::abs(static_cast<double>(t[code]) - x);
      for (size_t k = 0; k < t.size(); ++k)
        ASSERT_LE(distance, std::abs(static_cast<double>(t[k]) - x) * (1 + 1e-6))
            << x << " encoded as " << t[code] << " but " << t[k] << " is nearer";
    }
    // Exact midpoints (where the fp32 distances are exact too) go down.
    int ties = 0;
    for (size_t k = 0; k + 1 < t.size(); ++k) {
      double mid = 0.5 * (static_cast<double>(t[k]) + t[k + 1]);
      float midF = static_cast<float>(mid);
      if (midF != mid || float(midF - t[k]) != mid - t[k] || float(t[k + 1] - midF) != t[k + 1] - mid)
        continue;
      ++ties;
      EXPECT_EQ(adam8bit::encode(t, midF), k) << "tie between " << t[k] << " and " << t[k + 1];
    }
    EXPECT_GT(ties, 10);
  }
}

TEST(Adam8bitEncode, EncoderGivesEncodesCodeForEveryFloat) {
  // Exhaustive agreement over all 2^32 floats was checked when the Encoder
  // was written; this keeps the cases where it could break: entries,
  // midpoints and their neighbourhoods, specials, and a spread of patterns.
  auto bitsOf = [](uint32_t bits) {
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    return x;
  };
  for (bool isSigned : {true, false}) {
    SCOPED_TRACE(isSigned ? "signed" : "unsigned");
    const std::array<float, 256> &t =
        isSigned ? adam8bit::signedTable() : adam8bit::unsignedTable();
    const adam8bit::Encoder &encoder =
        isSigned ? adam8bit::signedEncoder() : adam8bit::unsignedEncoder();
    EXPECT_TRUE(encoder.fits());
    std::vector<float> xs = {0.0f,
                             -0.0f,
                             1.0f,
                             -1.0f,
                             2.0f,
                             -2.0f,
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(),
                             -std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::max(),
                             std::numeric_limits<float>::lowest(),
                             std::numeric_limits<float>::denorm_min(),
                             -std::numeric_limits<float>::denorm_min(),
                             std::numeric_limits<float>::min()};
    for (size_t k = 0; k < t.size(); ++k) {
      float around[2] = {t[k], k + 1 < t.size() ? t[k] + (t[k + 1] - t[k]) * 0.5f : t[k]};
      for (float centre : around) {
        float up = centre, down = centre;
        for (int ulp = 0; ulp < 8; ++ulp) {
          xs.push_back(up), xs.push_back(down);
          up = std::nextafter(up, 2.0f), down = std::nextafter(down, -2.0f);
        }
      }
    }
    for (float x : xs)
      EXPECT_EQ(encoder(x), adam8bit::encode(t, x)) << "x = " << x;
    for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 997) {
      float x = bitsOf(static_cast<uint32_t>(bits));
      ASSERT_EQ(encoder(x), adam8bit::encode(t, x)) << "bits " << bits;
    }
  }
}

//===----------------------------------------------------------------------===//
// The kernel
//===----------------------------------------------------------------------===//

/// One adamw8bit call: the parameter's shape, the step's scalars, whether
/// a norm is given (`norm` < 0: the gradient's own), whether p and the
/// state are updated in place, and whether the state is fresh (all zero).
struct Adam8bitSetting {
  std::vector<int64_t> shape;
  double lr, step, beta2, maxGradNorm;
  bool withNorm;
  double norm;
  bool inPlace, fresh;
  /// How absmax' is compared with the reference (see adamw8bitCase).
  Metric absmaxMetric = Metric::Elementwise;
};

/// `codes` (integral doubles) decoded as the contract says: table · absmax
/// in fp32.
RefTensor decodeState(const std::array<float, 256> &table, const RefTensor &codes,
                      const RefTensor &absmax) {
  RefTensor x = RefTensor::zeros(codes.shape);
  for (int64_t i = 0; i < codes.numel(); ++i)
    x.data[i] =
        table[static_cast<size_t>(codes.data[i])] * static_cast<float>(absmax.data[i / kBlock]);
  return x;
}

/// The codes of an adamw8bit call against the reference's ideal ones, as
/// the file comment says: given the stored inputs, the kernel's outputs and
/// the reference's.
::testing::AssertionResult codesAreNearest(const Adam8bitSetting &s,
                                           const std::vector<RefTensor> &in,
                                           const std::vector<RefTensor> &got,
                                           const std::vector<RefTensor> &want) {
  const std::array<float, 256> &mTable = adam8bit::signedTable();
  const std::array<float, 256> &vTable = adam8bit::unsignedTable();
  RefTensor mOld = decodeState(mTable, in[2], in[3]), vOld = decodeState(vTable, in[4], in[5]);
  double norm = s.withNorm ? in[8].data[0] : 0.0;
  // The unquantized m', v' for judging codes that differ.
  std::vector<RefTensor> exact =
      ref::adamw(in[0], in[1], mOld, vOld, in[6].data[0], in[7].data[0],
                 s.withNorm ? &norm : nullptr, 0.9, s.beta2, 1e-8, 0.1, s.maxGradNorm);
  const RefTensor &g = in[1];
  RefTensor mMagnitude = RefTensor::zeros(s.shape), vMagnitude = RefTensor::zeros(s.shape);
  for (int64_t i = 0; i < g.numel(); ++i) {
    mMagnitude.data[i] = std::abs(mOld.data[i]) + std::abs(g.data[i]) + std::abs(exact[1].data[i]);
    vMagnitude.data[i] = vOld.data[i] + g.data[i] * g.data[i] + exact[2].data[i];
  }
  auto bytes = [](const RefTensor &codes) {
    return std::vector<uint8_t>(codes.data.begin(), codes.data.end());
  };
  ::testing::AssertionResult m =
      codesNearest(mTable, bytes(got[1]), want[1], exact[1], want[2], mMagnitude);
  if (!m)
    return m << " (m codes)";
  ::testing::AssertionResult v =
      codesNearest(vTable, bytes(got[3]), want[3], exact[2], want[4], vMagnitude);
  if (!v)
    return v << " (v codes)";
  return ::testing::AssertionSuccess();
}

/// Against the reference: p' at the dtype's tolerance (elementwise); the
/// moments' absmax' are fp32 whatever the parameter dtype (1e-6; by norm
/// where the setting says so: a block of one element, the last of 2049,
/// holds a single m', which β1·m + (1−β1)·g can cancel to far below the
/// terms whose rounding it carries); the codes by codesAreNearest. CUDA against the CPU: the same,
/// the codes exactly (integers): both backends run the same float operations per element, so a code
/// could only differ if m'/absmax' landed within an ulp of a decision threshold *and* the two
/// backends' constants differed in their last bit.
ConformanceCase adamw8bitCase(DType dtype, const Adam8bitSetting &s, uint64_t seed) {
  std::string label = std::string(dtypeName(dtype)) + "_" + shapeLabel(s.shape) + "_step" +
                      std::to_string(static_cast<int>(s.step)) + "_clip" +
                      std::to_string(static_cast<int>(s.maxGradNorm)) +
                      (s.withNorm ? "_norm" : "") + (s.inPlace ? "_in_place" : "") +
                      (s.fresh ? "_fresh" : "") + "_b" +
                      std::to_string(static_cast<int>(s.beta2 * 1000));
  return {"adamw8bit", label, [=] {
            KernelCall k;
            RefTensor g = roundTo(randomTensor(s.shape, seed + 2, 0.3), dtype);
            State m = s.fresh ? State(s.shape) : State::random(s.shape, seed + 3, 0.05);
            State v = s.fresh ? State(s.shape) : State::random(s.shape, seed + 4, 0.01);
            std::vector<size_t> updated = {k.input(randomTensor(s.shape, seed + 1), dtype)};
            k.input(g, dtype);
            for (State *state : {&m, &v}) {
              updated.push_back(k.input(std::move(state->codes)));
              updated.push_back(k.input(std::move(state->absmax)));
            }
            k.input(RefTensor{{}, {s.lr}}, DType::F32);
            k.input(RefTensor{{}, {s.step}}, DType::F32);
            if (s.withNorm) // the kernel sees an f32 scalar
              k.input(RefTensor{{}, {s.norm < 0 ? ref::globalNorm({g}).data[0] : s.norm}},
                      DType::F32);
            if (s.inPlace) {
              k.outputs = updated;
            } else {
              k.output(dtype, s.shape);
              for (int moment = 0; moment < 2; ++moment) {
                k.output(DType::U8, s.shape);
                k.output(DType::F32, {adam8bit::blockCount(State::product(s.shape))});
              }
            }
            k.attrs = attrs({{"beta1", 0.9},
                             {"beta2", s.beta2},
                             {"epsilon", 1e-8},
                             {"weight_decay", 0.1},
                             {"max_grad_norm", s.maxGradNorm}});
            k.reference = [s](const std::vector<RefTensor> &in) {
              double norm = s.withNorm ? in[8].data[0] : 0.0;
              return ref::adamw8bit(in[0], in[1], in[2], in[3], in[4], in[5], in[6].data[0],
                                    in[7].data[0], s.withNorm ? &norm : nullptr, 0.9, s.beta2, 1e-8,
                                    0.1, s.maxGradNorm);
            };
            const double codes = std::numeric_limits<double>::infinity();
            k.tolerances = {tolerance(dtype), codes, 1e-6, codes, 1e-6};
            k.metrics = {Metric::Elementwise, Metric::Elementwise, s.absmaxMetric,
                         Metric::Elementwise, s.absmaxMetric};
            k.check = [s](const std::vector<RefTensor> &in, const std::vector<RefTensor> &got,
                          const std::vector<RefTensor> &want) {
              return codesAreNearest(s, in, got, want);
            };
            k.cudaTolerances = {tolerance(dtype), 0.0, 1e-6, 0.0, 1e-6};
            return k;
          }};
}

/// Sizes below, at and across a block (2048), one of several blocks;
/// clipping on, off and not binding, with and without a norm input, in
/// place, fresh and random state. Then GPT-2-like settings (β2 = 0.999)
/// on sizes up to an MLP weight, absmax' by norm (a one-element block's m'
/// cancels at one of these seeds: 1.2e-6 of itself, elementwise).
std::vector<ConformanceCase> adamw8bitCases() {
  std::vector<ConformanceCase> cases;
  const std::vector<std::vector<int64_t>> shapes = {{1}, {2047}, {2048}, {2049}, {50, 100}};
  uint64_t seed = 8100;
  for (DType dtype : kFloatTypes)
    for (const auto &shape : shapes)
      for (const Adam8bitSetting &s :
           {Adam8bitSetting{shape, 3e-3, 1, 0.95, 1.0, true, -1, false, true},
            Adam8bitSetting{shape, 3e-3, 10, 0.95, 1.0, true, -1, true, false},
            Adam8bitSetting{shape, 3e-3, 3, 0.95, 0.0, true, -1, false, false},
            Adam8bitSetting{shape, 3e-3, 7, 0.95, 1.0, false, -1, true, false},
            Adam8bitSetting{shape, 3e-3, 2, 0.95, 100.0, true, -1, false, true}})
        cases.push_back(adamw8bitCase(dtype, s, seed += 8));
  const std::vector<std::vector<int64_t>> wide = {{1},    {7},        {3, 129},   {2047},
                                                  {2049}, {37, 1000}, {768, 3072}};
  seed = 10400;
  for (DType dtype : kFloatTypes)
    for (const auto &shape : wide) {
      Adam8bitSetting plain = {shape, 1e-3, 25, 0.999, 0.0, false, 0, false, false, Metric::Norm};
      Adam8bitSetting clipped = plain, inPlace = plain, fresh = plain;
      clipped.maxGradNorm = 1.0, clipped.withNorm = true, clipped.norm = 7.0;
      inPlace.inPlace = true;
      fresh.fresh = true, fresh.step = 1;
      for (const Adam8bitSetting &s : {plain, clipped, inPlace, fresh})
        cases.push_back(adamw8bitCase(dtype, s, seed += 8));
    }
  return cases;
}

LLMC_CONFORMANCE_CASES(AdamW8bit, adamw8bitCases);

TEST(AdamW8bitKernel, MatchesFp32AdamWBitForBit) {
  // Large enough for the parallel path; the last block is partial. Random
  // state, unclipped and clipped; then a fresh state with bf16 gradients,
  // whose ratios often fall within an ulp of a midpoint (see the file
  // comment), so that encoding anything but the exact fp32 quotient (say,
  // a product with the reciprocal of absmax) moves codes.
  const std::vector<int64_t> shape = {70001};
  const int64_t n = shape[0];
  const std::array<float, 256> &mTable = adam8bit::signedTable();
  const std::array<float, 256> &vTable = adam8bit::unsignedTable();
  for (int variant = 0; variant < 3; ++variant) {
    const bool withNorm = variant == 1, fresh = variant == 2;
    SCOPED_TRACE(fresh ? "fresh, bf16 gradients" : withNorm ? "clipped" : "unclipped");
    RefTensor p = roundTo(randomTensor(shape, 8201), DType::F32);
    RefTensor g = roundTo(randomTensor(shape, 8202, 0.3), fresh ? DType::BF16 : DType::F32);
    State m = fresh ? State(shape) : State::random(shape, 8203, 0.05);
    State v = fresh ? State(shape) : State::random(shape, 8204, 0.01);
    Buffer lrb = scalar(1e-3), stepb = scalar(5), normb = scalar(ref::globalNorm({g}).data[0]);

    // fp32 AdamW on the decoded state, then the contract's encoding.
    Buffer p32 = Buffer::of(p, DType::F32), g32 = Buffer::of(g, DType::F32);
    Buffer m32 = Buffer::of(m.decode(mTable), DType::F32);
    Buffer v32 = Buffer::of(v.decode(vTable), DType::F32);
    std::vector<Buffer *> inputs32 = {&p32, &g32, &m32, &v32, &lrb, &stepb};
    if (withNorm) inputs32.push_back(&normb);
    ASSERT_TRUE(runKernel("adamw", inputs32, {&p32, &m32, &v32}, adamAttrs(1.0)));

    Buffer p8 = Buffer::of(p, DType::F32), g8 = Buffer::of(g, DType::F32);
    std::vector<Buffer *> inputs8 = {&p8,     &g8,        &m.codes, &m.absmax,
                                     &v.codes, &v.absmax, &lrb,     &stepb};
    if (withNorm) inputs8.push_back(&normb);
    ASSERT_TRUE(runKernel("adamw8bit", inputs8, {&p8, &m.codes, &m.absmax, &v.codes, &v.absmax},
                          adamAttrs(1.0)));

    EXPECT_EQ(std::memcmp(p8.storage.data(), p32.storage.data(), n * sizeof(float)), 0);
    const float *mExact = m32.view().as<float>(), *vExact = v32.view().as<float>();
    const float *mAbsmax = m.absmax.view().as<float>(), *vAbsmax = v.absmax.view().as<float>();
    std::vector<uint8_t> mCodes = codesOf(m.codes), vCodes = codesOf(v.codes);
    int64_t mismatches = 0;
    for (int64_t b = 0; b < adam8bit::blockCount(n); ++b) {
      int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
      float mMax = 0.0f, vMax = 0.0f;
      for (int64_t i = begin; i < end; ++i) {
        mMax = std::max(mMax, std::abs(mExact[i]));
        vMax = std::max(vMax, std::abs(vExact[i]));
      }
      mismatches += mAbsmax[b] != mMax;
      mismatches += vAbsmax[b] != vMax;
      for (int64_t i = begin; i < end; ++i) {
        mismatches += mCodes[i] != adam8bit::encode(mTable, mExact[i] / mMax);
        mismatches += vCodes[i] != adam8bit::encode(vTable, vExact[i] / vMax);
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(AdamW8bitKernel, WritesEveryOutputElement) {
  // Run twice into outputs filled with different garbage (NaN / 0x00, then
  // −1e30 / 0xFF): a byte the kernel skipped would differ between the runs.
  const std::vector<int64_t> shape = {5000};
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    Buffer p = Buffer::of(randomTensor(shape, 8301), dtype);
    Buffer g = Buffer::of(randomTensor(shape, 8302, 0.3), dtype);
    State m = State::random(shape, 8303, 0.05), v = State::random(shape, 8304, 0.01);
    Buffer lrb = scalar(1e-3), stepb = scalar(4);
    std::vector<std::vector<uint64_t>> results[2];
    for (int run = 0; run < 2; ++run) {
      Buffer p1(dtype, shape);
      State m1(shape), v1(shape);
      if (run == 0) {
        p1.poison(), m1.absmax.poison(), v1.absmax.poison();
      } else {
        p1 = Buffer::of(RefTensor{shape, std::vector<double>(5000, -1e30)}, dtype);
        m1.absmax = Buffer::of(RefTensor{{3}, {-1e30, -1e30, -1e30}}, DType::F32);
        v1.absmax = m1.absmax;
      }
      std::memset(bytesOf(m1.codes), run ? 0xFF : 0x00, 5000);
      std::memset(bytesOf(v1.codes), run ? 0xFF : 0x00, 5000);
      ASSERT_TRUE(runKernel("adamw8bit",
                            {&p, &g, &m.codes, &m.absmax, &v.codes, &v.absmax, &lrb, &stepb},
                            {&p1, &m1.codes, &m1.absmax, &v1.codes, &v1.absmax}, adamAttrs(1.0)));
      for (Buffer *b : {&p1, &m1.codes, &m1.absmax, &v1.codes, &v1.absmax})
        results[run].push_back(b->storage);
    }
    for (size_t k = 0; k < results[0].size(); ++k)
      EXPECT_EQ(results[0][k], results[1][k]) << "output " << k;
  }
}

TEST(AdamW8bitKernel, NonFiniteNormKeepsEveryValueBitForBit) {
  // A skipped step: p, the codes and the absmax stay exactly as they were
  // (in place, and copied into separate outputs).
  const std::vector<int64_t> shape = {5000};
  for (DType dtype : kFloatTypes)
    for (double norm : {std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity()})
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " norm " + std::to_string(norm) +
                     (inPlace ? " in place" : ""));
        Buffer p = Buffer::of(randomTensor(shape, 8351), dtype);
        Buffer g = Buffer::of(randomTensor(shape, 8352, 0.3), dtype);
        State m = State::random(shape, 8353, 0.05), v = State::random(shape, 8354, 0.01);
        std::vector<Buffer *> inputs = {&p, &m.codes, &m.absmax, &v.codes, &v.absmax};
        std::vector<std::vector<uint64_t>> before;
        for (Buffer *b : inputs) before.push_back(b->storage);
        Buffer lrb = scalar(1e-3), stepb = scalar(4), normb = scalar(norm);
        Buffer p1(dtype, shape);
        State m1(shape), v1(shape);
        p1.poison(), m1.absmax.poison(), v1.absmax.poison();
        std::vector<Buffer *> outputs =
            inPlace ? inputs
                    : std::vector<Buffer *>{&p1, &m1.codes, &m1.absmax, &v1.codes, &v1.absmax};
        ASSERT_TRUE(runKernel("adamw8bit",
                              {&p, &g, &m.codes, &m.absmax, &v.codes, &v.absmax, &lrb, &stepb,
                               &normb},
                              outputs, adamAttrs(1.0)));
        for (size_t k = 0; k < outputs.size(); ++k)
          EXPECT_EQ(outputs[k]->storage, before[k]) << "output " << k;
      }
}

TEST(AdamW8bitKernel, ZeroGradientKeepsAFreshStateZero) {
  const std::vector<int64_t> shape = {3000};
  RefTensor p = randomTensor(shape, 8401);
  Buffer pb = Buffer::of(p, DType::F32), gb = Buffer::of(RefTensor::zeros(shape), DType::F32);
  State m(shape), v(shape);
  Buffer lrb = scalar(1e-2), stepb = scalar(1);
  ASSERT_TRUE(runKernel("adamw8bit", {&pb, &gb, &m.codes, &m.absmax, &v.codes, &v.absmax, &lrb,
                                      &stepb},
                        {&pb, &m.codes, &m.absmax, &v.codes, &v.absmax}, adamAttrs(1.0)));
  for (const Buffer *codes : {&m.codes, &v.codes})
    for (uint8_t c : codesOf(*codes)) ASSERT_EQ(c, 0);
  for (const Buffer *absmax : {&m.absmax, &v.absmax})
    for (double a : absmax->toRef().data) ASSERT_EQ(a, 0.0);
  // Only weight decay moves p.
  EXPECT_CLOSE(pb.toRef(), ref::scale(p, 1.0 - 1e-2 * 0.1), Metric::Elementwise, 1e-6);
}

TEST(AdamW8bitKernel, TracksFp32AdamWOnANoisyQuadratic) {
  // L(p) = ½ Σ a_i (p_i − c_i)², curvatures a over two decades, gradients
  // with noise (the same draws for both optimizers), a cosine schedule. The
  // 8-bit optimizer must reach the same loss and nearly the same point.
  const int64_t n = 5000;
  const std::vector<int64_t> shape = {n};
  const int steps = 300;
  RefTensor centre = randomTensor(shape, 8501);
  RefTensor curvature = randomTensor(shape, 8502);
  for (double &a : curvature.data) a = std::pow(10.0, std::tanh(a)); // in (0.1, 10)
  auto loss = [&](const RefTensor &p) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      double d = p.data[i] - centre.data[i];
      sum += 0.5 * curvature.data[i] * d * d;
    }
    return sum;
  };
  auto gradient = [&](const RefTensor &p, int step) {
    RefTensor g = randomTensor(shape, 9000 + step, 0.3);
    for (int64_t i = 0; i < n; ++i) g.data[i] += curvature.data[i] * (p.data[i] - centre.data[i]);
    return g;
  };

  Buffer p32 = Buffer::of(RefTensor::zeros(shape), DType::F32);
  Buffer m32 = p32, v32 = p32, p8 = p32;
  State m8(shape), v8(shape);
  const double initialLoss = loss(p32.toRef());
  const KernelAttrs config = adamAttrs(0.0, 0.0);
  for (int step = 1; step <= steps; ++step) {
    double lr = 0.05 * 0.5 * (1.0 + std::cos(M_PI * (step - 1) / steps));
    Buffer lrb = scalar(lr), stepb = scalar(step);
    Buffer g32 = Buffer::of(gradient(p32.toRef(), step), DType::F32);
    Buffer g8 = Buffer::of(gradient(p8.toRef(), step), DType::F32);
    ASSERT_TRUE(runKernel("adamw", {&p32, &g32, &m32, &v32, &lrb, &stepb}, {&p32, &m32, &v32},
                          config));
    ASSERT_TRUE(runKernel("adamw8bit",
                          {&p8, &g8, &m8.codes, &m8.absmax, &v8.codes, &v8.absmax, &lrb, &stepb},
                          {&p8, &m8.codes, &m8.absmax, &v8.codes, &v8.absmax}, config));
  }
  RefTensor final32 = p32.toRef(), final8 = p8.toRef();
  double loss32 = loss(final32), loss8 = loss(final8);
  double distance = 0.0, travelled = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    distance += std::pow(final8.data[i] - final32.data[i], 2);
    travelled += std::pow(final32.data[i], 2);
  }
  double relative = std::sqrt(distance / travelled);
  EXPECT_LT(loss32, 1e-3 * initialLoss);
  EXPECT_LT(loss8, 1e-3 * initialLoss);
  EXPECT_LT(std::abs(loss8 - loss32), 0.05 * loss32) << "fp32 " << loss32 << ", 8-bit " << loss8;
  EXPECT_LT(relative, 1e-2);
  RecordProperty("relative_distance", std::to_string(relative));
}

TEST(AdamW8bitKernel, FactoryNamesTheBadOperand) {
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto u8 = [](std::vector<int64_t> s) { return typeOnly(DType::U8, std::move(s)); };
  const KernelAttrs config = adamAttrs(1.0);
  // 5000 elements: 3 blocks of 2048.
  const TensorView p = f32({50, 100}), codes = u8({50, 100}), absmax = f32({3});
  const std::vector<TensorView> outputs = {p, codes, absmax, codes, absmax};
  EXPECT_EQ(bindError("adamw8bit", {p, p, codes, absmax, codes, absmax, f32({}), f32({})}, outputs,
                      config),
            "");
  EXPECT_EQ(bindError("adamw8bit",
                      {p, p, f32({50, 100}), absmax, codes, absmax, f32({}), f32({})}, outputs,
                      config),
            "adamw8bit: m_codes must be u8[50x100], got f32[50x100]");
  EXPECT_EQ(bindError("adamw8bit", {p, p, codes, absmax, codes, f32({2}), f32({}), f32({})},
                      outputs, config),
            "adamw8bit: v_absmax must be f32[3], got f32[2]");
  EXPECT_EQ(bindError("adamw8bit", {p, p, codes, absmax, codes, absmax, f32({}), f32({})},
                      {p, codes, f32({5000}), codes, absmax}, config),
            "adamw8bit: m_absmax' must be f32[3], got f32[5000]");
  EXPECT_EQ(bindError("adamw8bit",
                      {p, p, codes, absmax, codes, absmax, f32({}), f32({}), f32({2})}, outputs,
                      config),
            "adamw8bit: norm must be an f32 scalar, got f32[2]");
  EXPECT_EQ(bindError("adamw8bit", {p, p, codes, absmax, codes, absmax, f32({})}, outputs, config),
            "adamw8bit: expected 8 to 10 inputs, got 7");
  EXPECT_EQ(bindError("adamw8bit", {p, p, codes, absmax, codes, absmax, f32({}), f32({})}, outputs,
                      attrs({{"beta1", 0.9}})),
            "adamw8bit: missing float attribute 'beta2'");
}

} // namespace
} // namespace llmc::test
