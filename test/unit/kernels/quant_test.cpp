//===- quant_test.cpp - qat_observe, qat_fake_quant(_grad), qat_ema -------===//
//
// The CPU kernels against the reference of kernels/reference, which shares
// no code with them: it finds groups from multi-indices, rounds fp8 by
// searching the values the format's 256 bit patterns decode to and NF4 by
// scanning its levels. Both decide the grid (scale, zero point, x / scale)
// and the final level · scale in fp32, as common/QuantScheme.h says.
//
// Comparison: an f32 fake-quant output is the same fp32 value in both, so
// the check is |y − ref| ≤ 1e-6 · (the group's scale). That is far below
// one step of any grid (the finest, e5m2's subnormal step, is 2^−16 ≈
// 1.5e-5 scale), so an element on a different level always fails, while the
// bound leaves room for a last-bit difference in the final product (a
// backend that contracts or reorders it). With bf16 storage the kernel
// rounds its fp32 result to bf16 once, so it is compared with the reference
// rounded to bf16 the same way. Ranges (min/max) and dx (a copy of dy, or 0)
// involve no arithmetic and must match exactly.
//
// Beyond the sweep: ranges narrower than the data (as an EMA observer
// gives) clip and saturate; an outlier ruins per-tensor integer scaling but
// only its own group under per-channel/per-block; exact boundaries (amax
// itself, half a step above it, an empty range, an all-positive asymmetric
// tensor, fp8 subnormals/ties/max, NF4 levels and midpoints); outlier
// columns (present, absent, all of them, a column exactly at the threshold,
// pieces of the rows combined as under data parallelism); the EMA; and the
// factories' error messages.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"
#include "QuantGroupings.h"

#include "common/QuantScheme.h"

#include <cmath>
#include <limits>
#include <random>

namespace llmc::test {
namespace {

using quant::Format;
using quant::Granularity;
using quant::Scheme;
using quant::makeScheme;

const Format kFormats[] = {Format::Int8, Format::Int4, Format::Fp8E4M3, Format::Fp8E5M2,
                           Format::Nf4,  Format::Int3};


KernelAttrs schemeAttrs(const Scheme &s) {
  KernelAttrs a = attrs({}, {{"format", static_cast<int64_t>(s.format)},
                             {"granularity", static_cast<int64_t>(s.granularity)},
                             {"axis", s.axis},
                             {"block", s.block},
                             {"symmetric", s.symmetric ? 1 : 0}});
  if (s.outlier > 0) a.setFloat("outlier", s.outlier); // as lowering writes it
  return a;
}

std::string describe(const Scheme &s) {
  std::string out = quant::formatName(s.format);
  switch (s.granularity) {
  case Granularity::Tensor: out += " tensor"; break;
  case Granularity::Channel: out += " channel(axis " + std::to_string(s.axis) + ")"; break;
  case Granularity::Block: out += " block" + std::to_string(s.block); break;
  }
  return out + (s.symmetric ? " symmetric" : " asymmetric");
}

/// Every format, symmetric and (integer formats) asymmetric, per tensor, per
/// channel of axis 0 and of the last axis, and per block of 32 and 64.
std::vector<Scheme> sweep(const std::vector<int64_t> &shape) {
  std::vector<Scheme> schemes;
  int64_t last = static_cast<int64_t>(shape.size()) - 1;
  for (Format f : kFormats)
    for (bool symmetric : {true, false}) {
      if (!symmetric && !quant::isInteger(f)) continue;
      schemes.push_back(makeScheme(f, Granularity::Tensor, 0, 0, symmetric));
      schemes.push_back(makeScheme(f, Granularity::Channel, 0, 0, symmetric));
      schemes.push_back(makeScheme(f, Granularity::Channel, last, 0, symmetric));
      schemes.push_back(makeScheme(f, Granularity::Block, 0, 32, symmetric));
      schemes.push_back(makeScheme(f, Granularity::Block, 0, 64, symmetric));
    }
  return schemes;
}

/// Normal values whose spread changes by row (1/4 to 4), so the groups of a
/// scheme see different ranges.
RefTensor testData(const std::vector<int64_t> &shape, uint64_t seed) {
  RefTensor x = randomTensor(shape, seed);
  int64_t width = shape.back();
  for (int64_t i = 0; i < x.numel(); ++i) x.data[i] *= std::exp2((i / width) % 5 - 2);
  return x;
}

/// The scale of a group's grid (amax for NF4), for the tolerance; 0 for an
/// empty range.
double gridScale(const Scheme &s, double negMin, double max) {
  if (!s.symmetric) {
    double width = std::max(max, 0.0) - std::min(-negMin, 0.0);
    return width / (2.0 * quant::integerMax(s.format) + 1.0);
  }
  double amax = std::max(std::max(negMin, max), 0.0);
  if (quant::isInteger(s.format)) return amax / quant::integerMax(s.format);
  if (s.format == Format::Nf4) return amax;
  return amax / quant::fp8Max(s.format);
}

/// |got − expected| ≤ 1e-6 · the element's group scale (see the header).
::testing::AssertionResult onSameGrid(const RefTensor &got, const RefTensor &expected,
                                      const RefTensor &range, const Scheme &s) {
  if (got.shape != expected.shape) return ::testing::AssertionFailure() << "shapes differ";
  for (int64_t i = 0; i < got.numel(); ++i) {
    int64_t g = quant::groupOf(s, got.shape, i);
    double tol = 1e-6 * gridScale(s, range.data[2 * g], range.data[2 * g + 1]);
    if (!(std::abs(got.data[i] - expected.data[i]) <= tol))
      return ::testing::AssertionFailure()
             << "element " << i << " (group " << g << "): got " << got.data[i] << ", reference "
             << expected.data[i] << ", group scale "
             << gridScale(s, range.data[2 * g], range.data[2 * g + 1]);
  }
  return ::testing::AssertionSuccess();
}

/// Exactly equal, element by element.
::testing::AssertionResult identical(const RefTensor &got, const RefTensor &expected) {
  if (got.shape != expected.shape) return ::testing::AssertionFailure() << "shapes differ";
  for (int64_t i = 0; i < got.numel(); ++i)
    if (!(got.data[i] == expected.data[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got.data[i] << ", expected " << expected.data[i];
  return ::testing::AssertionSuccess();
}

RefTensor runObserve(const RefTensor &x, DType dtype, const Scheme &s) {
  Buffer xb = Buffer::of(x, dtype), range(DType::F32, {quant::groupCount(s, x.shape), 2});
  range.poison();
  runKernel("qat_observe", {&xb}, {&range}, schemeAttrs(s));
  return range.toRef();
}

RefTensor runFakeQuant(const RefTensor &x, const RefTensor &range, DType dtype, const Scheme &s) {
  Buffer xb = Buffer::of(x, dtype), rb = Buffer::of(range, DType::F32), y(dtype, x.shape);
  y.poison();
  runKernel("qat_fake_quant", {&xb, &rb}, {&y}, schemeAttrs(s));
  return y.toRef();
}

RefTensor runFakeQuantGrad(const RefTensor &x, const RefTensor &range, const RefTensor &dy,
                           DType dtype, const Scheme &s) {
  Buffer xb = Buffer::of(x, dtype), rb = Buffer::of(range, DType::F32), dyb = Buffer::of(dy, dtype),
         dx(dtype, x.shape);
  dx.poison();
  runKernel("qat_fake_quant_grad", {&xb, &rb, &dyb}, {&dx}, schemeAttrs(s));
  return dx.toRef();
}

//===----------------------------------------------------------------------===//
// Conformance cases: qat_observe, qat_fake_quant, qat_fake_quant_grad
//===----------------------------------------------------------------------===//

/// Odd sizes, rank 1 to 3, and a vocabulary-wide row.
const std::vector<std::vector<int64_t>> kOddShapes = {{1},        {7},       {37, 128},
                                                      {3, 5, 64}, {7, 1000}, {3, 50257}};
const std::vector<std::vector<int64_t>> kFakeQuantShapes = {{7}, {37, 128}, {3, 5, 64}, {3, 50257}};

std::string schemeLabel(const Scheme &s, DType dtype, const std::vector<int64_t> &shape) {
  return caseLabel(std::string(dtypeName(dtype)) + "_" + shapeLabel(shape) + "_" + describe(s));
}

/// qat_observe: per-group ranges are a min and a max, exact on every
/// backend whatever the order.
std::vector<ConformanceCase> observeCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 100;
  for (const std::vector<int64_t> &shape : kOddShapes)
    for (DType dtype : kFloatTypes)
      for (const Scheme &s : groupings(shape, Format::Int8, true, {1, 8, 32, 64, 29}))
        cases.push_back({"qat_observe", schemeLabel(s, dtype, shape), [=, caseSeed = ++seed] {
                           KernelCall k;
                           k.input(testData(shape, caseSeed), dtype);
                           k.output(DType::F32, {quant::groupCount(s, shape), 2});
                           k.attrs = schemeAttrs(s);
                           k.reference = [s](const std::vector<RefTensor> &in) {
                             return std::vector<RefTensor>{ref::quantObserve(in[0], s)};
                           };
                           k.tolerances = k.cudaTolerances = {0.0};
                           return k;
                         }});
  return cases;
}

/// The ranges a fake-quant case runs with: the observed ones, half of them
/// (clipping and saturation), and the observed ones with group 0 empty
/// ((0, 0): y = 0, every nonzero x clipped).
enum class RangeKind { Observed, Half, Empty };

/// qat_fake_quant and its gradient for every format, symmetric and
/// (integer formats) asymmetric. Against the reference: f32 within 1e-5
/// elementwise (the tests below bound it by 1e-6 of the group's scale),
/// 16-bit outputs within one rounding of the fp32 value. CUDA decides the
/// grid with the CPU's fp32 operations, none of them fusable: exact, as is
/// the gradient (dy or 0) everywhere.
std::vector<ConformanceCase> fakeQuantCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 300;
  int64_t schemes = 0;
  for (const std::vector<int64_t> &shape : kFakeQuantShapes)
    for (DType dtype : kFloatTypes)
      for (Format format :
           {Format::Int8, Format::Int4, Format::Fp8E4M3, Format::Fp8E5M2, Format::Nf4})
        for (bool symmetric : {true, false}) {
          if (!symmetric && !quant::isInteger(format))
            continue;
          // 16-bit storage only widens x and rounds y: one integer and one
          // fp8 grid suffice there.
          if (dtype != DType::F32 &&
              !((format == Format::Int8 && symmetric) || format == Format::Fp8E4M3))
            continue;
          for (const Scheme &s : groupings(shape, format, symmetric, {8, 64})) {
            // Narrow ranges in f32 only, half or empty in turn: the grid's
            // decisions do not depend on the storage type.
            const RangeKind narrow = schemes++ % 2 ? RangeKind::Half : RangeKind::Empty;
            for (RangeKind kind : {RangeKind::Observed, RangeKind::Half, RangeKind::Empty}) {
              if (kind != RangeKind::Observed && (dtype != DType::F32 || kind != narrow))
                continue;
              std::string label =
                  schemeLabel(s, dtype, shape) + (kind == RangeKind::Half    ? "_half_range"
                                                  : kind == RangeKind::Empty ? "_empty_group"
                                                                             : "");
              uint64_t caseSeed = seed += 2;
              auto operands = [=](KernelCall &k) {
                RefTensor x = roundTo(testData(shape, caseSeed), dtype);
                RefTensor range = ref::quantObserve(x, s);
                if (kind == RangeKind::Half)
                  for (double &value : range.data) value *= 0.5;
                if (kind == RangeKind::Empty)
                  range.data[0] = range.data[1] = 0.0;
                k.input(x, dtype);
                k.input(range, DType::F32);
                k.output(dtype, shape);
                k.attrs = schemeAttrs(s);
              };
              cases.push_back({"qat_fake_quant", label, [=] {
                                 KernelCall k;
                                 operands(k);
                                 k.reference = [s, dtype](const std::vector<RefTensor> &in) {
                                   return std::vector<RefTensor>{
                                       roundTo(ref::fakeQuant(in[0], in[1], s), dtype)};
                                 };
                                 k.cudaTolerances = {0.0};
                                 return k;
                               }});
              cases.push_back({"qat_fake_quant_grad", label, [=] {
                                 KernelCall k;
                                 operands(k);
                                 // dy goes between range and the output.
                                 size_t dx = k.outputs.back();
                                 k.outputs.pop_back();
                                 k.input(randomTensor(shape, caseSeed + 1), dtype);
                                 k.outputs.push_back(dx);
                                 k.reference = [s](const std::vector<RefTensor> &in) {
                                   return std::vector<RefTensor>{
                                       ref::fakeQuantGrad(in[0], in[1], in[2], s)};
                                 };
                                 k.tolerances = k.cudaTolerances = {0.0};
                                 return k;
                               }});
            }
          }
        }
  return cases;
}

LLMC_CONFORMANCE_CASES(QatObserve, observeCases);
LLMC_CONFORMANCE_CASES(QatFakeQuant, fakeQuantCases);

// The second shape is large enough for the kernels' parallel paths.
const std::vector<std::vector<int64_t>> kShapes = {{6, 5, 128}, {24, 1536}};

//===----------------------------------------------------------------------===//
// The sweep
//===----------------------------------------------------------------------===//

TEST(QuantKernels, ObserveMatchesReference) {
  for (const auto &shape : kShapes)
    for (DType dtype : kFloatTypes)
      for (const Scheme &s : sweep(shape)) {
        if (s.format != Format::Int8 || !s.symmetric) continue; // observe ignores both
        SCOPED_TRACE(describe(s) + " " + dtypeName(dtype) + " " + std::to_string(shape.size()) +
                     "-d");
        RefTensor x = roundTo(testData(shape, 41), dtype);
        EXPECT_TRUE(identical(runObserve(x, dtype, s), ref::quantObserve(x, s)));
        // The extremes in the last chunk, which the last thread reduces.
        x.data[x.numel() - 1] = 100.0, x.data[x.numel() - 3] = -100.0;
        EXPECT_TRUE(identical(runObserve(x, dtype, s), ref::quantObserve(x, s)));
      }
}

TEST(QuantKernels, FakeQuantAndGradMatchReference) {
  for (const auto &shape : kShapes)
    for (DType dtype : kFloatTypes)
      for (const Scheme &s : sweep(shape)) {
        SCOPED_TRACE(describe(s) + " " + dtypeName(dtype) + " " + std::to_string(shape.size()) +
                     "-d");
        RefTensor x = roundTo(testData(shape, 42), dtype);
        RefTensor dy = roundTo(randomTensor(shape, 43), dtype);
        RefTensor range = ref::quantObserve(x, s);
        RefTensor expected = roundTo(ref::fakeQuant(x, range, s), dtype);
        EXPECT_TRUE(onSameGrid(runFakeQuant(x, range, dtype, s), expected, range, s));
        EXPECT_TRUE(identical(runFakeQuantGrad(x, range, dy, dtype, s),
                              ref::fakeQuantGrad(x, range, dy, s)));
      }
}

/// 1: x is certainly clipped, 0: certainly not, −1: too close to the edge of
/// the range to say without the contract's rounding.
int obviousClip(double x, double negMin, double max, const Scheme &s) {
  double lo, hi, margin;
  if (s.symmetric) {
    double amax = std::max(negMin, max);
    lo = -amax, hi = amax;
    // An integer format clips from (qmax + 0.5) / qmax · amax: int4 from
    // 1.07 amax, int3 from 1.17 amax.
    double qmax = quant::isInteger(s.format) ? static_cast<double>(quant::integerMax(s.format)) : 0;
    margin = (qmax > 0 ? std::max(0.1, 0.6 / qmax) : 0.1) * amax;
  } else {
    lo = std::min(-negMin, 0.0), hi = std::max(max, 0.0);
    margin = 2.0 * gridScale(s, negMin, max); // two roundings of at most half a step
  }
  if (x < lo - margin || x > hi + margin) return 1;
  double inside = 0.01 * (hi - lo);
  if (x >= lo + inside && x <= hi - inside) return 0;
  return -1;
}

TEST(QuantKernels, NarrowRangesClipAndSaturate) {
  const std::vector<int64_t> shape = {6, 5, 128};
  for (DType dtype : kFloatTypes)
    for (const Scheme &s : sweep(shape)) {
      SCOPED_TRACE(describe(s) + " " + dtypeName(dtype));
      RefTensor x = roundTo(testData(shape, 44), dtype);
      RefTensor dy = roundTo(randomTensor(shape, 45), dtype);
      // What an EMA observer lags behind to: half the current range.
      RefTensor range = ref::quantObserve(x, s);
      for (double &r : range.data) r *= 0.5;
      RefTensor y = runFakeQuant(x, range, dtype, s), dx = runFakeQuantGrad(x, range, dy, dtype, s);
      EXPECT_TRUE(onSameGrid(y, roundTo(ref::fakeQuant(x, range, s), dtype), range, s));
      EXPECT_TRUE(identical(dx, ref::fakeQuantGrad(x, range, dy, s)));

      int64_t groups = quant::groupCount(s, shape), clipped = 0;
      std::vector<double> top(groups, -1e300), bottom(groups, 1e300);
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t g = quant::groupOf(s, shape, i);
        top[g] = std::max(top[g], y.data[i]), bottom[g] = std::min(bottom[g], y.data[i]);
      }
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t g = quant::groupOf(s, shape, i);
        int obvious = obviousClip(x.data[i], range.data[2 * g], range.data[2 * g + 1], s);
        if (obvious == 1) {
          ASSERT_EQ(dx.data[i], 0.0) << "element " << i << " x " << x.data[i];
        } else if (obvious == 0) {
          ASSERT_EQ(dx.data[i], dy.data[i]) << "element " << i;
        }
        if (dx.data[i] == 0.0 && dy.data[i] != 0.0) { // clipped: saturated
          ++clipped;
          ASSERT_EQ(y.data[i], x.data[i] > 0 ? top[g] : bottom[g]) << "element " << i;
        }
      }
      EXPECT_GT(clipped, x.numel() / 100);
    }
}

//===----------------------------------------------------------------------===//
// Outliers
//===----------------------------------------------------------------------===//

TEST(QuantKernels, OutlierRuinsPerTensorScalingOnlyWithinItsGroup) {
  // Values of spread 0.01 and one of 10, at row 5: per tensor, the integer
  // and NF4 grids become so coarse that nearly every small value rounds to
  // 0; per channel (rows) or per block only the outlier's row or block is
  // coarse. fp8's exponent keeps small values' relative precision, so it
  // barely suffers (until values reach its subnormals).
  const std::vector<int64_t> shape = {16, 256};
  const int64_t outlierRow = 5, outlier = outlierRow * 256 + 17;
  RefTensor x = randomTensor(shape, 46, 0.01);
  x.data[outlier] = 10.0;
  struct Case {
    Format format;
    bool symmetric;
    double minRatio; ///< per-tensor error / per-block error at least
  };
  const Case cases[] = {{Format::Int8, true, 50.0},   {Format::Int8, false, 50.0},
                        {Format::Int4, true, 4.0},    {Format::Nf4, true, 4.0},
                        {Format::Fp8E4M3, true, 0.0}, {Format::Fp8E5M2, true, 0.0}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(quant::formatName(c.format)) + (c.symmetric ? " sym" : " asym"));
    const Scheme schemes[] = {makeScheme(c.format, Granularity::Tensor, 0, 0, c.symmetric),
                              makeScheme(c.format, Granularity::Channel, 0, 0, c.symmetric),
                              makeScheme(c.format, Granularity::Block, 0, 64, c.symmetric)};
    double rms[3], zeros[3];
    for (int k = 0; k < 3; ++k) {
      const Scheme &s = schemes[k];
      RefTensor range = runObserve(x, DType::F32, s);
      RefTensor y = runFakeQuant(x, range, DType::F32, s);
      EXPECT_TRUE(onSameGrid(y, ref::fakeQuant(x, range, s), range, s)) << describe(s);
      // The outlier itself is its group's amax: represented (almost) exactly.
      EXPECT_NEAR(y.data[outlier], 10.0, 0.025) << describe(s); // asymmetric: half a step
      double sq = 0.0;
      int64_t n = 0, zero = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        if (i / 256 == outlierRow) continue; // outside every group of the outlier
        sq += (y.data[i] - x.data[i]) * (y.data[i] - x.data[i]);
        zero += y.data[i] == 0.0;
        ++n;
      }
      rms[k] = std::sqrt(sq / n), zeros[k] = static_cast<double>(zero) / n;
    }
    if (c.minRatio > 0.0) {
      EXPECT_GT(zeros[0], 0.9) << "per tensor, most small values should round to 0";
      EXPECT_GT(rms[0], c.minRatio * rms[2]) << "per tensor vs per block";
      EXPECT_GT(rms[0], c.minRatio * rms[1]) << "per tensor vs per channel";
      EXPECT_LT(zeros[2], 0.25) << "per block, the other blocks keep most values";
    } else {
      EXPECT_LT(zeros[0], 0.01) << "fp8 keeps the small values";
      EXPECT_LT(rms[0], 2.0 * rms[2]);
    }
  }
}

//===----------------------------------------------------------------------===//
// Boundaries
//===----------------------------------------------------------------------===//

/// y and dx of a 1-D f32 x under one range (tensor granularity), each
/// checked against the reference; dy is all ones.
struct Probe {
  RefTensor y, dx;
};

Probe probe(const std::vector<double> &values, double negMin, double max, const Scheme &s) {
  RefTensor x{{static_cast<int64_t>(values.size())}, values};
  RefTensor range{{1, 2}, {negMin, max}};
  RefTensor dy{x.shape, std::vector<double>(values.size(), 1.0)};
  Probe p{runFakeQuant(x, range, DType::F32, s), runFakeQuantGrad(x, range, dy, DType::F32, s)};
  EXPECT_TRUE(onSameGrid(p.y, ref::fakeQuant(x, range, s), range, s)) << describe(s);
  EXPECT_TRUE(identical(p.dx, ref::fakeQuantGrad(x, range, dy, s))) << describe(s);
  return p;
}

double up(double v) { return std::nextafter(static_cast<float>(v), INFINITY); }
double down(double v) { return std::nextafter(static_cast<float>(v), -INFINITY); }
double toward0(double v) { return std::nextafter(static_cast<float>(v), 0.0f); }

TEST(QuantKernels, AmaxItselfIsNotClipped) {
  // Integer formats: amax / (amax / qmax) is qmax within an ulp, which
  // rounds to qmax; NF4: amax / amax is exactly 1. Any amax will do.
  for (Format f : {Format::Int8, Format::Int4, Format::Nf4})
    for (double amax : {0.37, 1.0, 3.3e-3, 123.456, 0.1, 7.0 / 3.0}) {
      amax = static_cast<float>(amax);
      SCOPED_TRACE(std::string(quant::formatName(f)) + " amax " + std::to_string(amax));
      Scheme s = makeScheme(f);
      Probe p = probe({amax, -amax, 0.5 * amax, 0.0}, amax, amax, s);
      EXPECT_TRUE(identical(p.dx, RefTensor{{4}, {1, 1, 1, 1}}));
      float top = f == Format::Nf4
                      ? static_cast<float>(amax)
                      : static_cast<float>(quant::integerMax(f)) *
                            (static_cast<float>(amax) / static_cast<float>(quant::integerMax(f)));
      EXPECT_EQ(p.y.data[0], top);
      EXPECT_EQ(p.y.data[1], -top);
      EXPECT_NEAR(p.y.data[0], amax, 1e-6 * amax);
    }
  // fp8: clipped = |x| > amax, so amax itself never clips even where the
  // scale amax / fmax is inexact (amax / scale can land an ulp above fmax);
  // y saturates at fmax · scale; the next float above amax clips.
  for (Format f : {Format::Fp8E4M3, Format::Fp8E5M2})
    for (double amax : {quant::fp8Max(f), quant::fp8Max(f) * 0x1p-7, 0.37, 123.456, 7.0 / 3.0}) {
      amax = static_cast<float>(amax);
      SCOPED_TRACE(std::string(quant::formatName(f)) + " amax " + std::to_string(amax));
      Probe p = probe({amax, -amax, up(amax)}, amax, amax, makeScheme(f));
      EXPECT_TRUE(identical(p.dx, RefTensor{{3}, {1, 1, 0}})) << "just above amax clips";
      EXPECT_NEAR(p.y.data[0], amax, 1e-6 * amax);
      EXPECT_EQ(p.y.data[1], -p.y.data[0]);
    }
}

TEST(QuantKernels, IntegerClippingStartsWhereQExceedsQmax) {
  // clipped = |round(x / scale)| > qmax: a value just above amax still
  // rounds to qmax; clipping starts at (qmax + 1/2)·scale, where the tie
  // rounds to the even qmax + 1. With amax = qmax·2^−k the scale is exact.
  for (Format f : {Format::Int8, Format::Int4}) {
    SCOPED_TRACE(quant::formatName(f));
    double qmax = static_cast<double>(quant::integerMax(f)), scale = 0.0625, amax = qmax * scale;
    double half = (qmax + 0.5) * scale;
    Probe p = probe({up(amax), toward0(half), half, -half, toward0(-half), -up(amax)}, amax, amax,
                    makeScheme(f));
    EXPECT_TRUE(identical(p.y, RefTensor{{6}, {amax, amax, amax, -amax, -amax, -amax}}));
    EXPECT_TRUE(identical(p.dx, RefTensor{{6}, {1, 1, 0, 0, 1, 1}}));
    // An inexact scale: just above amax is still not clipped.
    for (double a : {0.37, 123.456, 3.3e-3}) {
      a = static_cast<float>(a);
      Probe q = probe({up(a), down(-a)}, a, a, makeScheme(f));
      EXPECT_TRUE(identical(q.dx, RefTensor{{2}, {1, 1}})) << "amax " << a;
    }
  }
  // NF4: v = x / amax > 1 for any x above amax.
  for (double a : {0.37, 1.0, 123.456}) {
    a = static_cast<float>(a);
    Probe p = probe({up(a), down(-a)}, a, a, makeScheme(Format::Nf4));
    EXPECT_TRUE(identical(p.dx, RefTensor{{2}, {0, 0}})) << "amax " << a;
    EXPECT_TRUE(identical(p.y, RefTensor{{2}, {a, -a}}));
  }
}

TEST(QuantKernels, EmptyRangeGivesZeroAndClipsNonzeros) {
  // amax = 0 (an all-zero tensor's range): y = 0; zeros pass the gradient,
  // anything else counts as clipped.
  for (Format f : kFormats)
    for (bool symmetric : {true, false}) {
      if (!symmetric && !quant::isInteger(f)) continue;
      Scheme s = makeScheme(f, Granularity::Tensor, 0, 0, symmetric);
      SCOPED_TRACE(describe(s));
      RefTensor zeros = RefTensor::zeros({4, 32});
      EXPECT_TRUE(identical(runObserve(zeros, DType::F32, s), RefTensor{{1, 2}, {0.0, 0.0}}));
      Probe p = probe({0.0, 0.0, 1.5, -2.0}, 0.0, 0.0, s);
      EXPECT_TRUE(identical(p.y, RefTensor{{4}, {0, 0, 0, 0}}));
      EXPECT_TRUE(identical(p.dx, RefTensor{{4}, {1, 1, 0, 0}}));
    }
  // Empty ranges among live ones, per channel of either axis: column 3 is
  // all zero, column 5 (and row 2) gets an explicit (0, 0) range.
  RefTensor x = randomTensor({8, 16}, 50);
  for (int64_t r = 0; r < 8; ++r) x.data[r * 16 + 3] = 0.0;
  x = roundTo(x, DType::F32);
  RefTensor dy = roundTo(randomTensor({8, 16}, 51), DType::F32);
  for (Format f : kFormats)
    for (int64_t axis : {0, 1}) {
      Scheme s = makeScheme(f, Granularity::Channel, axis);
      SCOPED_TRACE(describe(s));
      RefTensor range = ref::quantObserve(x, s);
      int64_t empty = axis == 1 ? 5 : 2;
      range.data[2 * empty] = range.data[2 * empty + 1] = 0.0;
      RefTensor y = runFakeQuant(x, range, DType::F32, s);
      RefTensor dx = runFakeQuantGrad(x, range, dy, DType::F32, s);
      EXPECT_TRUE(onSameGrid(y, ref::fakeQuant(x, range, s), range, s));
      EXPECT_TRUE(identical(dx, ref::fakeQuantGrad(x, range, dy, s)));
      for (int64_t r = 0; r < 8; ++r)
        for (int64_t c = 0; c < 16; ++c) {
          int64_t i = r * 16 + c;
          if ((axis == 1 ? c : r) != empty) continue;
          EXPECT_EQ(y.data[i], 0.0) << "element " << i;
          EXPECT_EQ(dx.data[i], x.data[i] == 0.0 ? dy.data[i] : 0.0) << "element " << i;
        }
    }
}

TEST(QuantKernels, AsymmetricAllPositiveTensorPutsTheZeroPointAtQmin) {
  // min > 0, so lo = min(min, 0) = 0 and zp = round(qmin − 0) = qmin: the
  // grid is 0, scale, …, (qmax − qmin)·scale = max, every level on x's side
  // of 0 (twice the levels a symmetric grid would spend there).
  RefTensor x = RefTensor::zeros({4, 64});
  std::mt19937_64 rng(47);
  std::uniform_real_distribution<double> uniform(0.5, 3.0);
  for (double &v : x.data) v = static_cast<float>(uniform(rng));
  for (Format f : {Format::Int8, Format::Int4}) {
    SCOPED_TRACE(quant::formatName(f));
    Scheme asym = makeScheme(f, Granularity::Tensor, 0, 0, false), sym = makeScheme(f);
    RefTensor range = runObserve(x, DType::F32, asym);
    ASSERT_LT(range.data[0], 0.0); // −min
    double hi = range.data[1], levels = 2.0 * quant::integerMax(f) + 1.0;
    float scale = static_cast<float>(hi) / static_cast<float>(levels);
    RefTensor y = runFakeQuant(x, range, DType::F32, asym);
    EXPECT_TRUE(onSameGrid(y, ref::fakeQuant(x, range, asym), range, asym));
    double asymError = 0.0, symError = 0.0;
    RefTensor ySym = runFakeQuant(x, range, DType::F32, sym);
    for (int64_t i = 0; i < x.numel(); ++i) {
      ASSERT_LE(std::abs(y.data[i] - x.data[i]), 0.5 * scale * (1 + 1e-6)) << "element " << i;
      asymError += std::abs(y.data[i] - x.data[i]);
      symError += std::abs(ySym.data[i] - x.data[i]);
    }
    EXPECT_LT(asymError, 0.7 * symError);
    // The grid itself: 0 is level 0, one step is `scale`, max is the top.
    Probe p = probe({0.0, 0.4 * scale, 0.6 * scale, hi}, range.data[0], hi, asym);
    EXPECT_TRUE(
        identical(p.y, RefTensor{{4}, {0.0, 0.0, scale, static_cast<float>(levels) * scale}}));
    EXPECT_TRUE(identical(p.dx, RefTensor{{4}, {1, 1, 1, 1}}));
  }
}

TEST(QuantKernels, Fp8RoundsSubnormalsTiesAndMax) {
  // amax = fmax makes the scale 1, so y is fp8(x) itself. Ties go to the
  // even mantissa code, across the subnormal/normal and binade boundaries.
  struct Row {
    double x, y;
    bool clipped;
  };
  const double s4 = 0x1p-9; // e4m3 subnormal step (min normal 2^−6)
  const std::vector<Row> e4m3 = {
      {s4, s4, false},             // smallest subnormal
      {0.5 * s4, 0.0, false},      // tie 0 (m=0) / s4 (m=1)
      {up(0.5 * s4), s4, false},   // just past the tie
      {1.5 * s4, 2 * s4, false},   // tie m=1 / m=2
      {2.5 * s4, 2 * s4, false},   // tie m=2 / m=3
      {7 * s4, 7 * s4, false},     // largest subnormal
      {7.5 * s4, 0x1p-6, false},   // tie: largest subnormal (m=7) / min normal (m=0)
      {0x1p-6, 0x1p-6, false},     // min normal
      {0x1.1p-6, 0x1p-6, false},   // tie 1.0 (m=0) / 1.125 (m=1)
      {0x1.3p-6, 0x1.4p-6, false}, // tie 1.125 (m=1) / 1.25 (m=2)
      {248.0, 256.0, false},       // tie 240 (m=7) / 256 (next binade, m=0)
      {432.0, 448.0, false},       // tie 416 (m=5) / 448 (m=6)
      {448.0, 448.0, false},       // max
      {up(448.0), 448.0, true},    // above max: clipped
      {464.0, 448.0, true},        // would round to 448 but is beyond fmax
      {-1.5 * s4, -2 * s4, false}, // negative mirror
      {-448.0, -448.0, false},
      {-500.0, -448.0, true}};
  const double s5 = 0x1p-16; // e5m2 subnormal step (min normal 2^−14)
  const std::vector<Row> e5m2 = {{s5, s5, false},
                                 {0.5 * s5, 0.0, false},
                                 {1.5 * s5, 2 * s5, false},
                                 {3 * s5, 3 * s5, false},
                                 {3.5 * s5, 0x1p-14, false},
                                 {0x1.2p-14, 0x1p-14, false},
                                 {0x1.6p-14, 0x1.8p-14, false},
                                 {53248.0, 49152.0, false},
                                 {57344.0, 57344.0, false},
                                 {up(57344.0), 57344.0, true},
                                 {-60000.0, -57344.0, true}};
  for (Format f : {Format::Fp8E4M3, Format::Fp8E5M2}) {
    SCOPED_TRACE(quant::formatName(f));
    const std::vector<Row> &rows = f == Format::Fp8E4M3 ? e4m3 : e5m2;
    std::vector<double> xs;
    for (const Row &r : rows) xs.push_back(r.x);
    double fmax = quant::fp8Max(f);
    Probe p = probe(xs, fmax, fmax, makeScheme(f));
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(p.y.data[i], rows[i].y) << "x = " << rows[i].x;
      EXPECT_EQ(p.dx.data[i], rows[i].clipped ? 0.0 : 1.0) << "x = " << rows[i].x;
    }
  }
}

TEST(QuantKernels, Nf4LevelsMapToThemselvesAndMidpointTiesGoDown) {
  for (double amax : {1.0, 4.0, 0.375}) {
    SCOPED_TRACE("amax " + std::to_string(amax));
    Scheme s = makeScheme(Format::Nf4);
    std::vector<double> levels, expected;
    for (float level : quant::kNf4Levels) {
      levels.push_back(static_cast<float>(level * amax));
      expected.push_back(static_cast<float>(level * amax));
    }
    Probe p = probe(levels, amax, amax, s);
    EXPECT_TRUE(identical(p.y, RefTensor{{16}, expected}));
    EXPECT_TRUE(identical(p.dx, RefTensor{{16}, std::vector<double>(16, 1.0)}));
  }
  // With amax = 1: the float at or just below each exact midpoint (a tie
  // when the midpoint is a float) takes the lower level, the float just
  // above it the upper.
  std::vector<double> xs, expected;
  for (int i = 0; i < 15; ++i) {
    double mid = (static_cast<double>(quant::kNf4Levels[i]) + quant::kNf4Levels[i + 1]) / 2.0;
    float below = static_cast<float>(mid);
    if (below > mid) below = std::nextafter(below, -INFINITY);
    xs.push_back(below);
    expected.push_back(quant::kNf4Levels[i]);
    xs.push_back(std::nextafter(below, INFINITY));
    expected.push_back(quant::kNf4Levels[i + 1]);
  }
  Probe p = probe(xs, 1.0, 1.0, makeScheme(Format::Nf4));
  EXPECT_TRUE(identical(p.y, RefTensor{{30}, expected}));
}

//===----------------------------------------------------------------------===//
// qat_ema
//===----------------------------------------------------------------------===//

/// qat_ema over odd and vocabulary-sized group counts, every third group's
/// state empty (its first observation is copied), momenta at both ends and
/// between, in place and not. States and observations are positive, as
/// ranges are. 1e-6 elementwise: a compiler may fuse momentum·state +
/// (1 − momentum)·observed into an FMA on one backend and not the other.
std::vector<ConformanceCase> emaCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 600;
  for (int64_t groups : {1, 7, 1000, 50257})
    for (double momentum : {0.0, 0.37, 0.9, 1.0})
      for (bool inPlace : {false, true}) {
        std::string label = std::to_string(groups) + "_groups_momentum" +
                            std::to_string(static_cast<int>(momentum * 100)) +
                            (inPlace ? "_in_place" : "");
        cases.push_back({"qat_ema", label, [=, caseSeed = seed += 2] {
                           KernelCall k;
                           RefTensor state = randomTensor({groups, 2}, caseSeed);
                           RefTensor observed = randomTensor({groups, 2}, caseSeed + 1);
                           for (double &v : state.data) v = std::abs(v) + 0.1;
                           for (double &v : observed.data) v = std::abs(v) + 0.1;
                           for (int64_t g = 0; g < groups; g += 3)
                             state.data[2 * g] = state.data[2 * g + 1] = 0.0;
                           size_t stateIndex = k.input(state, DType::F32);
                           k.input(observed, DType::F32);
                           k.outputMaybeInPlace(inPlace, stateIndex, DType::F32, {groups, 2});
                           k.attrs = attrs({{"momentum", momentum}});
                           k.reference = [momentum](const std::vector<RefTensor> &in) {
                             return std::vector<RefTensor>{ref::quantEma(in[0], in[1], momentum)};
                           };
                           k.tolerances = k.cudaTolerances = {1e-6};
                           return k;
                         }});
      }
  return cases;
}

LLMC_CONFORMANCE_CASES(QatEma, emaCases);

RefTensor runEma(const RefTensor &state, const RefTensor &observed, double momentum) {
  Buffer sb = Buffer::of(state, DType::F32), ob = Buffer::of(observed, DType::F32),
         out(DType::F32, state.shape);
  out.poison();
  runKernel("qat_ema", {&sb, &ob}, {&out}, attrs({{"momentum", momentum}}));
  return out.toRef();
}

TEST(QuantKernels, EmaCopiesTheFirstObservationThenBlends) {
  // Group 0 was never observed (0, 0); the others were. (0, x) is an
  // observed range (an all-zero-or-positive group), not a fresh one.
  RefTensor state{{4, 2}, {0.0, 0.0, 1.0, 2.0, -0.5, 4.0, 0.0, 3.0}};
  RefTensor observed{{4, 2}, {0.75, 1.25, 3.0, 1.0, 0.5, 2.0, 1.0, 1.0}};
  RefTensor blended = runEma(state, observed, 0.75);
  EXPECT_CLOSE(blended, ref::quantEma(state, observed, 0.75), Metric::Elementwise, 1e-6);
  EXPECT_TRUE(
      identical(blended, RefTensor{{4, 2}, {0.75, 1.25, 1.5, 1.75, -0.25, 3.5, 0.25, 2.5}}));
  // momentum 0: the observation; momentum 1: the state (first one still copies).
  EXPECT_TRUE(identical(runEma(state, observed, 0.0), observed));
  EXPECT_TRUE(identical(runEma(state, observed, 1.0),
                        RefTensor{{4, 2}, {0.75, 1.25, 1.0, 2.0, -0.5, 4.0, 0.0, 3.0}}));
  EXPECT_TRUE(identical(ref::quantEma(state, observed, 1.0), runEma(state, observed, 1.0)));
  // A longer run against the reference, in place as the runtime runs it.
  RefTensor many = RefTensor::zeros({300, 2});
  Buffer stateBuf = Buffer::of(many, DType::F32);
  for (int step = 0; step < 5; ++step) {
    RefTensor obs = randomTensor({300, 2}, 48 + step, 1.0, 3.0);
    obs = roundTo(obs, DType::F32);
    Buffer ob = Buffer::of(obs, DType::F32);
    ASSERT_TRUE(runKernel("qat_ema", {&stateBuf, &ob}, {&stateBuf}, attrs({{"momentum", 0.9}})));
    many = ref::quantEma(many, obs, 0.9);
    EXPECT_CLOSE(stateBuf.toRef(), many, Metric::Elementwise, 1e-5);
    many = stateBuf.toRef();
  }
}

//===----------------------------------------------------------------------===//
// Outlier columns
//===----------------------------------------------------------------------===//

/// The per-column ranges of x (a per-channel observe of its last axis), as
/// the pass computes them for the columns input.
RefTensor columnRanges(const RefTensor &x) {
  Scheme perColumn = makeScheme(Format::Int8, Granularity::Channel,
                                static_cast<int64_t>(x.shape.size()) - 1);
  return ref::quantObserve(x, perColumn);
}

RefTensor runObserveColumns(const RefTensor &x, const RefTensor &columns, DType dtype,
                            const Scheme &s) {
  Buffer xb = Buffer::of(x, dtype), cb = Buffer::of(columns, DType::F32),
         range(DType::F32, {quant::groupCount(s, x.shape), 2});
  range.poison();
  runKernel("qat_observe", {&xb, &cb}, {&range}, schemeAttrs(s));
  return range.toRef();
}

RefTensor runFakeQuantColumns(const RefTensor &x, const RefTensor &range, const RefTensor &columns,
                              DType dtype, const Scheme &s) {
  Buffer xb = Buffer::of(x, dtype), rb = Buffer::of(range, DType::F32),
         cb = Buffer::of(columns, DType::F32), y(dtype, x.shape);
  y.poison();
  runKernel("qat_fake_quant", {&xb, &rb, &cb}, {&y}, schemeAttrs(s));
  return y.toRef();
}

RefTensor runFakeQuantGradColumns(const RefTensor &x, const RefTensor &range,
                                  const RefTensor &dy, const RefTensor &columns, DType dtype,
                                  const Scheme &s) {
  Buffer xb = Buffer::of(x, dtype), rb = Buffer::of(range, DType::F32), dyb = Buffer::of(dy, dtype),
         cb = Buffer::of(columns, DType::F32), dx(dtype, x.shape);
  dx.poison();
  runKernel("qat_fake_quant_grad", {&xb, &rb, &dyb, &cb}, {&dx}, schemeAttrs(s));
  return dx.toRef();
}

/// Integer formats, symmetric and not, per tensor and per channel of the
/// first and the last axis, with threshold `t`.
std::vector<Scheme> outlierSweep(const std::vector<int64_t> &shape, double t) {
  using Groups = std::pair<Granularity, int64_t>;
  std::vector<Scheme> schemes;
  int64_t last = static_cast<int64_t>(shape.size()) - 1;
  for (Format f : {Format::Int8, Format::Int4})
    for (bool symmetric : {true, false})
      for (auto [granularity, axis] : {Groups{Granularity::Tensor, 0},
                                       Groups{Granularity::Channel, 0},
                                       Groups{Granularity::Channel, last}}) {
        Scheme s = makeScheme(f, granularity, axis, 0, symmetric);
        s.outlier = t;
        schemes.push_back(s);
      }
  return schemes;
}

/// Whether column c of x's last dimension is an outlier column (from the
/// data, independently of the kernels: some |x| > t).
std::vector<bool> outlierColumnsOf(const RefTensor &x, double t) {
  int64_t width = x.shape.back();
  std::vector<bool> outlier(width, false);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (std::abs(x.data[i]) > t) outlier[i % width] = true;
  return outlier;
}

/// testData with `count` columns given one outlier each (alternating in
/// sign, 2–5× the threshold `t`) in rows spread over the tensor, and one
/// column whose largest |x| is exactly t.
RefTensor dataWithOutliers(const std::vector<int64_t> &shape, double t, int count, uint64_t seed) {
  RefTensor x = testData(shape, seed);
  int64_t width = shape.back(), rows = x.numel() / width;
  // Bring every value under the threshold first, so only the planted
  // columns are outliers.
  double amax = 0.0;
  for (double v : x.data) amax = std::max(amax, std::abs(v));
  for (double &v : x.data) v *= 0.9 * t / amax;
  for (int k = 0; k < count; ++k) {
    int64_t column = (k * 37 + 5) % width, row = (k * 7919 + 3) % rows;
    x.data[row * width + column] = (k % 2 ? -1.0 : 1.0) * t * (2.0 + k % 4);
  }
  x.data[(rows - 1) * width + (width - 2)] = -t; // exactly at the threshold: kept
  return x;
}

TEST(QuantKernels, OutlierColumnsMatchReference) {
  const double t = 6.0;
  for (const auto &shape : kShapes)
    for (DType dtype : kFloatTypes)
      for (int count : {0, 3, 9})
        for (const Scheme &s : outlierSweep(shape, t)) {
          SCOPED_TRACE(describe(s) + " " + dtypeName(dtype) + " " + std::to_string(shape.size()) +
                       "-d, " + std::to_string(count) + " outlier columns");
          RefTensor x = roundTo(dataWithOutliers(shape, t, count, 50), dtype);
          RefTensor dy = roundTo(randomTensor(shape, 51), dtype);
          RefTensor columns = columnRanges(x);
          RefTensor range = ref::quantObserve(x, s, &columns);
          EXPECT_TRUE(identical(runObserveColumns(x, columns, dtype, s), range));
          RefTensor y = runFakeQuantColumns(x, range, columns, dtype, s);
          RefTensor dx = runFakeQuantGradColumns(x, range, dy, columns, dtype, s);
          EXPECT_TRUE(onSameGrid(y, roundTo(ref::fakeQuant(x, range, s, &columns), dtype), range,
                                 s));
          EXPECT_TRUE(identical(dx, ref::fakeQuantGrad(x, range, dy, s, &columns)));

          // Outlier columns pass x and dy through exactly; the rest is the
          // ordinary fake quantization with the range of the kept columns.
          std::vector<bool> outlier = outlierColumnsOf(x, t);
          EXPECT_EQ(std::count(outlier.begin(), outlier.end(), true), count);
          Scheme plain = s;
          plain.outlier = 0.0;
          RefTensor yPlain = runFakeQuant(x, range, dtype, plain);
          RefTensor dxPlain = runFakeQuantGrad(x, range, dy, dtype, plain);
          int64_t width = shape.back(), clippedKept = 0;
          for (int64_t i = 0; i < x.numel(); ++i) {
            bool out = outlier[i % width];
            ASSERT_EQ(y.data[i], out ? x.data[i] : yPlain.data[i]) << "element " << i;
            ASSERT_EQ(dx.data[i], out ? dy.data[i] : dxPlain.data[i]) << "element " << i;
            clippedKept += !out && dx.data[i] == 0.0 && dy.data[i] != 0.0;
          }
          // The kept columns' own symmetric range clips none of them.
          if (s.symmetric) {
            EXPECT_EQ(clippedKept, 0);
          }
        }
}

TEST(QuantKernels, OutlierModeChannelsBeforeTrailingOnes) {
  // Channels of an axis followed only by size-1 dims: every element of a
  // row (the last dim, of size 1) is one channel, and consecutive rows are
  // consecutive channels — not columns of the last axis.
  const double t = 6.0;
  for (const std::vector<int64_t> &shape :
       {std::vector<int64_t>{4, 8, 1}, std::vector<int64_t>{3, 5, 1, 1}})
    for (DType dtype : kFloatTypes) {
      Scheme s = makeScheme(Format::Int8, Granularity::Channel, 1, 0, true);
      s.outlier = t;
      SCOPED_TRACE(describe(s) + " " + dtypeName(dtype) + " " + shapeString(shape));
      RefTensor x = roundTo(dataWithOutliers(shape, t, 0, 52), dtype);
      RefTensor dy = roundTo(randomTensor(shape, 53), dtype);
      RefTensor columns = columnRanges(x);
      RefTensor range = ref::quantObserve(x, s, &columns);
      EXPECT_TRUE(identical(runObserveColumns(x, columns, dtype, s), range));
      RefTensor y = runFakeQuantColumns(x, range, columns, dtype, s);
      EXPECT_TRUE(
          onSameGrid(y, roundTo(ref::fakeQuant(x, range, s, &columns), dtype), range, s));
      EXPECT_TRUE(identical(runFakeQuantGradColumns(x, range, dy, columns, dtype, s),
                            ref::fakeQuantGrad(x, range, dy, s, &columns)));
    }
}

TEST(QuantKernels, OutlierThresholdIsExclusiveAndCountsEitherSign) {
  // Columns: max |x| exactly 6 (kept), just above 6 (outlier), −7 (outlier
  // by its minimum), small (kept).
  RefTensor x = RefTensor::zeros({2, 4});
  x.data = {6.0, std::nextafter(6.0f, 7.0f), 1.0, 0.25, -2.0, 1.0, -7.0, -0.5};
  RefTensor dy = RefTensor::zeros({2, 4});
  dy.data = {1, 2, 3, 4, 5, 6, 7, 8};
  Scheme s = makeScheme(Format::Int8);
  s.outlier = 6.0;
  RefTensor columns = columnRanges(x);
  RefTensor range = runObserveColumns(x, columns, DType::F32, s);
  // Over columns 0 and 3 only: min −2, max 6.
  EXPECT_EQ(range.data, (std::vector<double>{2.0, 6.0}));
  EXPECT_TRUE(identical(range, ref::quantObserve(x, s, &columns)));
  RefTensor y = runFakeQuantColumns(x, range, columns, DType::F32, s);
  EXPECT_EQ(y.data[1], x.data[1]); // passed through
  EXPECT_EQ(y.data[2], 1.0);       // passed through
  EXPECT_EQ(y.data[6], -7.0);      // passed through, beyond the range
  EXPECT_NE(y.data[3], 0.25);      // quantized (0.25 is no multiple of 6/127)
  EXPECT_TRUE(identical(y, ref::fakeQuant(x, range, s, &columns)));
  // A narrower range (as from another rank's piece) clips in kept columns
  // only: column 0's 6 is clipped, the outliers' −7 is not.
  RefTensor narrow = RefTensor::zeros({1, 2});
  narrow.data = {2.0, 3.0};
  RefTensor dx = runFakeQuantGradColumns(x, narrow, dy, columns, DType::F32, s);
  EXPECT_EQ(dx.data, (std::vector<double>{0, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(identical(dx, ref::fakeQuantGrad(x, narrow, dy, s, &columns)));
}

TEST(QuantKernels, AllOutlierColumnsPassEverythingThrough) {
  for (const auto &shape : kShapes)
    for (DType dtype : kFloatTypes)
      for (const Scheme &s : outlierSweep(shape, 1e-3)) {
        SCOPED_TRACE(describe(s) + " " + dtypeName(dtype));
        RefTensor x = roundTo(testData(shape, 52), dtype);
        RefTensor dy = roundTo(randomTensor(shape, 53), dtype);
        RefTensor columns = columnRanges(x);
        // No kept element: every group's range is empty.
        RefTensor range = runObserveColumns(x, columns, dtype, s);
        for (double r : range.data) ASSERT_EQ(r, -std::numeric_limits<double>::infinity());
        EXPECT_TRUE(identical(range, ref::quantObserve(x, s, &columns)));
        EXPECT_TRUE(identical(runFakeQuantColumns(x, range, columns, dtype, s), x));
        EXPECT_TRUE(identical(runFakeQuantGradColumns(x, range, dy, columns, dtype, s), dy));
      }
}

TEST(QuantKernels, UnderTheThresholdOutlierModeIsPlainFakeQuant) {
  for (const auto &shape : kShapes)
    for (DType dtype : kFloatTypes)
      for (const Scheme &s : outlierSweep(shape, 1e6)) {
        SCOPED_TRACE(describe(s) + " " + dtypeName(dtype));
        RefTensor x = roundTo(testData(shape, 54), dtype);
        RefTensor dy = roundTo(randomTensor(shape, 55), dtype);
        RefTensor columns = columnRanges(x);
        Scheme plain = s;
        plain.outlier = 0.0;
        RefTensor range = runObserve(x, dtype, plain);
        EXPECT_TRUE(identical(runObserveColumns(x, columns, dtype, s), range));
        EXPECT_TRUE(identical(runFakeQuantColumns(x, range, columns, dtype, s),
                              runFakeQuant(x, range, dtype, plain)));
        EXPECT_TRUE(identical(runFakeQuantGradColumns(x, range, dy, columns, dtype, s),
                              runFakeQuantGrad(x, range, dy, dtype, plain)));
      }
}

// What the pass does under data parallelism, on two halves of the rows: the
// per-column ranges and then the kept columns' ranges are max-combined, and
// each half quantizes exactly as the whole tensor does — including a column
// whose outlier lies in the other half only.
TEST(QuantKernels, OutlierColumnsCombinedOverRowPiecesMatchTheWholeTensor) {
  const double t = 6.0;
  const std::vector<int64_t> shape = {8, 16, 64}, half = {4, 16, 64};
  RefTensor x = dataWithOutliers(shape, t, 5, 56);
  RefTensor dy = randomTensor(shape, 57);
  auto piece = [&](const RefTensor &whole, int p) {
    RefTensor out = RefTensor::zeros(half);
    std::copy(whole.data.begin() + p * out.numel(), whole.data.begin() + (p + 1) * out.numel(),
              out.data.begin());
    return out;
  };
  auto combine = [](RefTensor a, const RefTensor &b) {
    for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = std::max(a.data[i], b.data[i]);
    return a;
  };
  for (const Scheme &s : outlierSweep(shape, t)) {
    if (s.granularity == Granularity::Channel && s.axis == 0) continue; // rows: not combined
    SCOPED_TRACE(describe(s));
    RefTensor columns = columnRanges(x);
    RefTensor range = runObserveColumns(x, columns, DType::F32, s);
    RefTensor y = runFakeQuantColumns(x, range, columns, DType::F32, s);
    RefTensor dx = runFakeQuantGradColumns(x, range, dy, columns, DType::F32, s);
    RefTensor x0 = piece(x, 0), x1 = piece(x, 1);
    RefTensor pieceColumns = combine(columnRanges(x0), columnRanges(x1));
    EXPECT_TRUE(identical(pieceColumns, columns));
    RefTensor pieceRange = combine(runObserveColumns(x0, pieceColumns, DType::F32, s),
                                   runObserveColumns(x1, pieceColumns, DType::F32, s));
    EXPECT_TRUE(identical(pieceRange, range));
    for (int p = 0; p < 2; ++p) {
      RefTensor xp = piece(x, p), dyp = piece(dy, p);
      EXPECT_TRUE(identical(runFakeQuantColumns(xp, pieceRange, pieceColumns, DType::F32, s),
                            piece(y, p)));
      EXPECT_TRUE(identical(
          runFakeQuantGradColumns(xp, pieceRange, dyp, pieceColumns, DType::F32, s),
          piece(dx, p)));
    }
  }
  // The planted outliers sit in rows of both halves, so each half alone
  // would keep columns the whole tensor passes through.
  std::vector<bool> all = outlierColumnsOf(x, t), first = outlierColumnsOf(piece(x, 0), t),
                    second = outlierColumnsOf(piece(x, 1), t);
  EXPECT_NE(first, all);
  EXPECT_NE(second, all);
}

//===----------------------------------------------------------------------===//
// Defaults and factory errors
//===----------------------------------------------------------------------===//

TEST(QuantKernels, MissingAttributesDefaultToPerTensorSymmetric) {
  RefTensor x = roundTo(testData({4, 64}, 49), DType::F32);
  Scheme s = makeScheme(Format::Int4);
  RefTensor range = ref::quantObserve(x, s);
  Buffer xb = Buffer::of(x, DType::F32), rb = Buffer::of(range, DType::F32), y(DType::F32, {4, 64}),
         observed(DType::F32, {1, 2});
  ASSERT_TRUE(runKernel("qat_observe", {&xb}, {&observed}));
  EXPECT_TRUE(identical(observed.toRef(), range));
  ASSERT_TRUE(runKernel("qat_fake_quant", {&xb, &rb}, {&y}, attrs({}, {{"format", 1}})));
  EXPECT_TRUE(onSameGrid(y.toRef(), ref::fakeQuant(x, range, s), range, s));
}

TensorView f32(std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); }
TensorView bf16(std::vector<int64_t> shape) { return typeOnly(DType::BF16, std::move(shape)); }

TEST(QuantKernels, FactoriesNameTheBadAttributeOrOperand) {
  struct ErrorCase {
    std::string kernel;
    std::vector<TensorView> inputs, outputs;
    KernelAttrs attrs;
    std::string expected; // the whole message
  };
  auto fq = [](std::initializer_list<std::pair<const char *, int64_t>> ints) {
    return attrs({}, ints);
  };
  const std::vector<ErrorCase> cases = {
      {"qat_fake_quant",
       {f32({4, 64}), f32({1, 2})},
       {f32({4, 64})},
       fq({{"granularity", 0}}),
       "qat_fake_quant: missing int attribute 'format'"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({1, 2})},
       {f32({4, 64})},
       fq({{"format", 6}}),
       "qat_fake_quant: attribute 'format' = 6 is not a format (0 int8, 1 int4, 2 fp8_e4m3, "
       "3 fp8_e5m2, 4 nf4, 5 int3)"},
      {"qat_fake_quant_grad",
       {f32({4, 64}), f32({1, 2}), f32({4, 64})},
       {f32({4, 64})},
       fq({{"format", -1}}),
       "qat_fake_quant_grad: attribute 'format' = -1 is not a format (0 int8, 1 int4, "
       "2 fp8_e4m3, 3 fp8_e5m2, 4 nf4, 5 int3)"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({1, 2})},
       {f32({4, 64})},
       fq({{"format", 2}, {"symmetric", 0}}),
       "qat_fake_quant: attribute 'symmetric' = 0 (asymmetric) is for integer formats only, "
       "got format fp8_e4m3"},
      {"qat_fake_quant_grad",
       {f32({4, 64}), f32({1, 2}), f32({4, 64})},
       {f32({4, 64})},
       fq({{"format", 4}, {"symmetric", 0}}),
       "qat_fake_quant_grad: attribute 'symmetric' = 0 (asymmetric) is for integer formats "
       "only, got format nf4"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({1, 2})},
       {f32({4, 64})},
       fq({{"format", 0}, {"symmetric", 2}}),
       "qat_fake_quant: attribute 'symmetric' must be 0 or 1, got 2"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({1, 2})},
       {f32({4, 64})},
       fq({{"format", 0}, {"granularity", 3}}),
       "qat_fake_quant: attribute 'granularity' = 3 is not a granularity (0 tensor, 1 channel, "
       "2 block)"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({4, 2})},
       {f32({4, 64})},
       fq({{"format", 0}, {"granularity", 1}, {"axis", 2}}),
       "qat_fake_quant: attribute 'axis' = 2 is out of range for x f32[4x64]"},
      {"qat_observe",
       {f32({4, 64})},
       {f32({4, 2})},
       fq({{"granularity", 1}, {"axis", -1}}),
       "qat_observe: attribute 'axis' = -1 is out of range for x f32[4x64]"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({8, 2})},
       {f32({4, 64})},
       fq({{"format", 1}, {"granularity", 2}, {"block", 0}}),
       "qat_fake_quant: attribute 'block' must be positive, got 0"},
      {"qat_observe",
       {f32({4, 64})},
       {f32({8, 2})},
       fq({{"granularity", 2}}),
       "qat_observe: attribute 'block' must be positive, got 0"},
      {"qat_fake_quant_grad",
       {f32({4, 64}), f32({8, 2}), f32({4, 64})},
       {f32({4, 64})},
       fq({{"format", 1}, {"granularity", 2}, {"block", 48}}),
       "qat_fake_quant_grad: attribute 'block' = 48 does not divide the last dim of x "
       "f32[4x64]"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({8, 2})},
       {f32({4, 64})},
       fq({{"format", 0}, {"granularity", 2}, {"block", 16}}),
       "qat_fake_quant: range must be f32[16x2], got f32[8x2]"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({64, 2})},
       {f32({4, 64})},
       fq({{"format", 0}, {"granularity", 1}, {"axis", 0}}),
       "qat_fake_quant: range must be f32[4x2], got f32[64x2]"},
      {"qat_fake_quant",
       {f32({4, 64}), bf16({1, 2})},
       {f32({4, 64})},
       fq({{"format", 0}}),
       "qat_fake_quant: range must be f32[1x2], got bf16[1x2]"},
      {"qat_observe",
       {bf16({4, 64})},
       {bf16({1, 2})},
       {},
       "qat_observe: range must be f32[1x2], got bf16[1x2]"},
      {"qat_observe",
       {typeOnly(DType::I32, {4, 64})},
       {f32({1, 2})},
       {},
       "qat_observe: x must be f32, bf16 or f16, got i32[4x64]"},
      {"qat_observe",
       {f32({})},
       {f32({1, 2})},
       {},
       "qat_observe: x must have rank 1 or more, got f32[]"},
      {"qat_fake_quant",
       {bf16({4, 64}), f32({1, 2})},
       {f32({4, 64})},
       fq({{"format", 0}}),
       "qat_fake_quant: y must be bf16[4x64], got f32[4x64]"},
      {"qat_fake_quant_grad",
       {f32({4, 64}), f32({1, 2}), bf16({4, 64})},
       {f32({4, 64})},
       fq({{"format", 0}}),
       "qat_fake_quant_grad: dy must be f32[4x64], got bf16[4x64]"},
      {"qat_fake_quant_grad",
       {f32({4, 64}), f32({1, 2}), f32({4, 64})},
       {f32({4, 63})},
       fq({{"format", 0}}),
       "qat_fake_quant_grad: dx must be f32[4x64], got f32[4x63]"},
      {"qat_fake_quant_grad",
       {f32({4, 64}), f32({1, 2})},
       {f32({4, 64})},
       fq({{"format", 0}}),
       "qat_fake_quant_grad: expected 3 to 4 inputs, got 2"},
      {"qat_observe",
       {f32({4, 64})},
       {f32({1, 2})},
       attrs({{"outlier", 6.0}}),
       "qat_observe: attribute 'outlier' needs the columns input (per-column ranges [C, 2])"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({1, 2}), f32({64, 2})},
       {f32({4, 64})},
       fq({{"format", 0}}),
       "qat_fake_quant: a columns input needs attribute 'outlier' > 0"},
      {"qat_fake_quant_grad",
       {f32({4, 64}), f32({1, 2}), f32({4, 64}), f32({4, 2})},
       {f32({4, 64})},
       attrs({{"outlier", 6.0}}, {{"format", 0}}),
       "qat_fake_quant_grad: columns must be f32[64x2], got f32[4x2]"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({1, 2}), f32({64, 2})},
       {f32({4, 64})},
       attrs({{"outlier", 6.0}}, {{"format", 2}}),
       "qat_fake_quant: attribute 'outlier' (outlier columns) is for integer formats only, got "
       "format fp8_e4m3"},
      {"qat_observe",
       {f32({4, 64}), f32({64, 2})},
       {f32({16, 2})},
       attrs({{"outlier", 6.0}}, {{"granularity", 2}, {"block", 16}}),
       "qat_observe: attribute 'outlier' (outlier columns) needs tensor or channel granularity"},
      {"qat_fake_quant",
       {f32({4, 64}), f32({1, 2}), f32({64, 2})},
       {f32({4, 64})},
       attrs({{"outlier", -1.0}}, {{"format", 0}}),
       "qat_fake_quant: attribute 'outlier' must be finite and >= 0 (0: none), got -1.000000"},
      {"qat_ema",
       {f32({4, 2}), f32({4, 2})},
       {f32({4, 2})},
       attrs({{"momentum", 1.5}}),
       "qat_ema: attribute 'momentum' must be in [0, 1], got 1.500000"},
      {"qat_ema",
       {f32({4, 2}), f32({4, 2})},
       {f32({4, 2})},
       {},
       "qat_ema: missing float attribute 'momentum'"},
      {"qat_ema",
       {f32({4, 3}), f32({4, 3})},
       {f32({4, 3})},
       attrs({{"momentum", 0.9}}),
       "qat_ema: state must be f32[Gx2], got f32[4x3]"},
      {"qat_ema",
       {f32({4, 2}), f32({5, 2})},
       {f32({4, 2})},
       attrs({{"momentum", 0.9}}),
       "qat_ema: observed must be f32[4x2], got f32[5x2]"},
      {"qat_ema",
       {f32({4, 2}), f32({4, 2})},
       {bf16({4, 2})},
       attrs({{"momentum", 0.9}}),
       "qat_ema: new_state must be f32[4x2], got bf16[4x2]"},
  };
  for (const ErrorCase &c : cases) {
    std::string error = bindError(c.kernel, c.inputs, c.outputs, c.attrs);
    EXPECT_EQ(error, c.expected);
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
  // The attributes that do not apply to a granularity are not checked.
  EXPECT_EQ(bindError("qat_fake_quant", {f32({4, 64}), f32({1, 2})}, {f32({4, 64})},
                      fq({{"format", 0}, {"axis", 9}, {"block", 48}})),
            "");
}

} // namespace
} // namespace llmc::test
