//===- QuantizedTensorTest.cpp - stored quantization against fake quant ---===//
//
// The property that makes an exported model evaluate like a fake-quantized
// one: for every format × granularity × symmetry, dequantize(quantize(x))
// is bit for bit the reference fake_quant(x, quantObserve(x)) of
// kernels/reference (written from the contract, sharing no code with the
// storage). With NF4 double quantization it is fake_quant with the
// reconstructed absmax as each block's range, and that absmax is within
// half an 8-bit step of the true one. Also: the fp8 codec over every bit
// pattern, 4-bit packing of odd sizes, empty groups, bits per parameter,
// scheme strings, and the safetensors layout read back and rejected when
// broken.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "common/Half.h"
#include "kernels/reference/Reference.h"
#include "runtime/quant/QuantizedFile.h"
#include "runtime/quant/QuantizedTensor.h"
#include "runtime/support/Error.h"

#include <cmath>
#include <cstring>
#include <random>

using namespace llmc;
using quant::Format;
using quant::Granularity;
using quant::Scheme;
using quant::makeScheme;

namespace {

const Format kFormats[] = {Format::Int8, Format::Int4, Format::Fp8E4M3, Format::Fp8E5M2,
                           Format::Nf4,  Format::Int3};


int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

/// Normal values with a few outliers, exact zeros and one all-zero row (an
/// empty range under per-row groups).
std::vector<float> sample(const std::vector<int64_t> &shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> x(numelOf(shape));
  for (float &v : x) v = normal(rng);
  for (size_t i = 0; i < x.size(); i += 37) x[i] = 0.0f;
  for (size_t i = 11; i < x.size(); i += 97) x[i] *= 40.0f;
  for (int64_t i = 0; i < shape.back(); ++i) x[i] = 0.0f;
  return x;
}

ref::RefTensor toRef(const std::vector<float> &x, const std::vector<int64_t> &shape) {
  ref::RefTensor t;
  t.shape = shape;
  t.data.assign(x.begin(), x.end());
  return t;
}

/// The reference's fake quantization of x with its own ranges.
std::vector<float> fakeQuant(const std::vector<float> &x, const std::vector<int64_t> &shape,
                             const Scheme &s) {
  ref::RefTensor rx = toRef(x, shape);
  ref::RefTensor y = ref::fakeQuant(rx, ref::quantObserve(rx, s), s);
  return std::vector<float>(y.data.begin(), y.data.end());
}

/// Element-by-element equality (0 and −0 are the same value).
void expectSame(const std::vector<float> &got, const std::vector<float> &want,
                const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]) && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", fake_quant gives "
                    << want[i];
  EXPECT_EQ(bad, 0) << what;
}

/// Reading `name` from `file` fails with an error containing `message`.
void expectReadError(const SafetensorsFile &file, const std::string &name,
                     const std::string &message) {
  FloatTensor t;
  try {
    readFloatTensor(file, name, t);
    ADD_FAILURE() << "no error reading " << name;
  } catch (const RuntimeError &e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

std::vector<Scheme> schemesFor(const std::vector<int64_t> &shape) {
  std::vector<Scheme> schemes;
  for (Format f : kFormats)
    for (bool symmetric : {true, false}) {
      if (!symmetric && !quant::isInteger(f))
        continue;
      schemes.push_back(makeScheme(f, Granularity::Tensor, 0, 0, symmetric));
      for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis)
        schemes.push_back(makeScheme(f, Granularity::Channel, axis, 0, symmetric));
      for (int64_t block : {8, 32})
        if (shape.back() % block == 0)
          schemes.push_back(makeScheme(f, Granularity::Block, 0, block, symmetric));
    }
  return schemes;
}

} // namespace

TEST(QuantizedTensor, DequantizeIsFakeQuantEverywhere) {
  for (const std::vector<int64_t> &shape :
       {std::vector<int64_t>{6, 64}, std::vector<int64_t>{2, 3, 32}, std::vector<int64_t>{5, 8},
        std::vector<int64_t>{7, 3}}) {
    std::vector<float> x = sample(shape, static_cast<uint32_t>(numelOf(shape)));
    for (const Scheme &s : schemesFor(shape)) {
      std::string what = quant::schemeString(s) + " on " + std::to_string(shape.size()) +
                         "-d tensor of " + std::to_string(numelOf(shape));
      quant::QuantizedTensor q;
      ASSERT_EQ(quant::quantize(x.data(), shape, s, quant::DoubleQuant::None, q), "") << what;
      EXPECT_EQ(quant::validate(q), "") << what;
      EXPECT_EQ(static_cast<int64_t>(q.codes.size()),
                (quant::codeBits(s.format) * numelOf(shape) + 7) / 8)
          << what;
      expectSame(quant::dequantize(q), fakeQuant(x, shape, s), what);
    }
  }
}

TEST(QuantizedTensor, RoundingTiesMatchTheContract) {
  // amax = 127 makes the int8 scale exactly 1, so every k + 0.5 is a tie
  // (to even); the asymmetric grid over [−127, 127] has ties of its own.
  std::vector<int64_t> shape = {2, 256};
  std::vector<float> x(512);
  for (int64_t i = 0; i < 512; ++i) x[i] = -127.0f + static_cast<float>(i % 254) + 0.5f;
  x[0] = 127.0f;
  x[1] = -127.0f;
  for (bool symmetric : {true, false})
    for (Format f : {Format::Int8, Format::Int4}) {
      Scheme s = makeScheme(f, Granularity::Tensor, 0, 0, symmetric);
      quant::QuantizedTensor q;
      ASSERT_EQ(quant::quantize(x.data(), shape, s, quant::DoubleQuant::None, q), "");
      expectSame(quant::dequantize(q), fakeQuant(x, shape, s), quant::schemeString(s));
    }
}

TEST(QuantizedTensor, EmptyGroupsStoreZero) {
  std::vector<int64_t> shape = {4, 16};
  std::vector<float> x(64, 0.0f);
  for (int64_t i = 32; i < 64; ++i) x[i] = 0.01f * static_cast<float>(i - 40);
  for (Format f : kFormats) {
    Scheme s = makeScheme(f, Granularity::Channel, 0, 0, true);
    quant::QuantizedTensor q;
    ASSERT_EQ(quant::quantize(x.data(), shape, s, quant::DoubleQuant::None, q), "");
    EXPECT_EQ(q.scales[0], 0.0f);
    std::vector<float> y = quant::dequantize(q);
    for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.0f) << quant::formatName(f);
    expectSame(y, fakeQuant(x, shape, s), quant::formatName(f));
  }
}

TEST(QuantizedTensor, Nf4DoubleQuantization) {
  // 40 × 448 in blocks of 64: 280 absmax values, two double-quantization
  // blocks (256 + a partial 24).
  std::vector<int64_t> shape = {40, 448};
  std::vector<float> x = sample(shape, 7);
  Scheme s = makeScheme(Format::Nf4, Granularity::Block, 0, 64, true);
  quant::QuantizedTensor q;
  ASSERT_EQ(quant::quantize(x.data(), shape, s, quant::DoubleQuant::Int8, q), "");
  ASSERT_EQ(q.doubleQuant, quant::DoubleQuant::Int8);
  EXPECT_EQ(quant::validate(q), "");
  EXPECT_TRUE(q.scales.empty());
  ASSERT_EQ(q.absmaxCodes.size(), 280u);
  ASSERT_EQ(q.absmaxScales.size(), 2u);

  // The reconstructed absmax is within half a step of the block's 8-bit grid.
  ref::RefTensor rx = toRef(x, shape);
  ref::RefTensor observed = ref::quantObserve(rx, s);
  std::vector<float> absmax = quant::nf4Absmax(q);
  for (int64_t g = 0; g < 280; ++g) {
    double truth = std::max(observed.data[2 * g], observed.data[2 * g + 1]);
    double step = q.absmaxScales[g / quant::kNf4DoubleQuantBlock];
    EXPECT_LE(std::abs(absmax[g] - truth), 0.5 * step * (1 + 1e-6) + 1e-6 * std::abs(truth))
        << "group " << g;
  }

  // The codes are fake_quant's with that absmax as each block's range.
  ref::RefTensor range = ref::RefTensor::zeros({280, 2});
  for (int64_t g = 0; g < 280; ++g) range.data[2 * g] = range.data[2 * g + 1] = absmax[g];
  ref::RefTensor want = ref::fakeQuant(rx, range, s);
  expectSame(quant::dequantize(q), std::vector<float>(want.data.begin(), want.data.end()),
             "nf4 double quantization");

  // Without double quantization the fp32 absmax is stored.
  quant::QuantizedTensor plain;
  ASSERT_EQ(quant::quantize(x.data(), shape, s, quant::DoubleQuant::None, plain), "");
  EXPECT_FALSE(plain.doubleQuantized());
  EXPECT_EQ(plain.scales.size(), 280u);
  expectSame(quant::dequantize(plain), fakeQuant(x, shape, s), "nf4 without double quant");
}

/// fp16 scales: every symmetric format's groups are fake_quant on the grid
/// of the fp32 scale rounded to fp16 (the reference given the range
/// fp16(scale) · qmax, whose quotient by qmax is exactly that scale), the
/// file keeps them as F16 and reads back the same tensor.
TEST(QuantizedTensor, HalfScalesAreTheRoundedGrid) {
  test::TempDir dir;
  const std::vector<int64_t> shape = {6, 64};
  const std::vector<float> x = sample(shape, 21);
  const quant::StorageFormat half16(quant::DoubleQuant::None, quant::ScaleFormat::F16);
  for (Format f : kFormats)
    for (Granularity g : {Granularity::Channel, Granularity::Block}) {
      const Scheme s = makeScheme(f, g, 0, g == Granularity::Block ? 32 : 0, true);
      const std::string what = quant::schemeString(s);
      quant::QuantizedTensor wide, q;
      ASSERT_EQ(quant::quantize(x.data(), shape, s, quant::DoubleQuant::None, wide), "");
      ASSERT_EQ(quant::quantize(x.data(), shape, s, half16, q), "") << what;
      EXPECT_EQ(quant::validate(q), "") << what;
      ASSERT_EQ(q.scales.size(), wide.scales.size());
      const double full = quant::isInteger(f) ? static_cast<double>(quant::integerMax(f))
                          : f == Format::Nf4  ? 1.0
                                              : quant::fp8Max(f);
      ref::RefTensor range = ref::RefTensor::zeros({static_cast<int64_t>(q.scales.size()), 2});
      for (size_t i = 0; i < q.scales.size(); ++i) {
        EXPECT_EQ(q.scales[i], half::toFloat(half::fromFloat(wide.scales[i]))) << what;
        EXPECT_EQ(q.halfScales[i], half::fromFloat(q.scales[i])) << what;
        range.data[2 * i] = range.data[2 * i + 1] = static_cast<float>(q.scales[i] * full);
      }
      ref::RefTensor want = ref::fakeQuant(toRef(x, shape), range, s);
      expectSame(quant::dequantize(q), std::vector<float>(want.data.begin(), want.data.end()),
                 what + " with fp16 scales");

      std::vector<SafeTensor> tensors;
      std::map<std::string, std::string> metadata;
      appendQuantized("w", q, tensors, metadata);
      const std::string path = dir.file(std::string(quant::formatName(f)) + ".safetensors");
      writeSafetensors(path, tensors, metadata);
      SafetensorsFile file(path);
      EXPECT_EQ(file.find("w.scale")->dtype, DType::F16) << what;
      FloatTensor back;
      ASSERT_TRUE(readFloatTensor(file, "w", back));
      expectSame(back.data, quant::dequantize(q), what + " read back");
    }
  // Scales of another dtype are refused by name.
  quant::QuantizedTensor q;
  ASSERT_EQ(quant::quantize(x.data(), shape, makeScheme(Format::Int4, Granularity::Block, 0, 32),
                            half16, q),
            "");
  std::vector<SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
  appendQuantized("w", q, tensors, metadata);
  tensors[1].dtype = DType::BF16;
  writeSafetensors(dir.file("bf16.safetensors"), tensors, metadata);
  expectReadError(SafetensorsFile(dir.file("bf16.safetensors")), "w",
                  "tensor 'w.scale' is BF16, expected F32 or F16");
}

/// Asymmetric groups keep their zero point on the rounded scale; scales
/// beyond fp16 are refused, below its smallest subnormal they empty the
/// group, and NF4's double quantization stores no scales to narrow.
TEST(QuantizedTensor, HalfScalesAtTheirLimits) {
  const quant::StorageFormat half16(quant::DoubleQuant::None, quant::ScaleFormat::F16);
  const std::vector<int64_t> shape = {3, 32};
  std::vector<float> x = sample(shape, 9);
  for (int64_t i = 0; i < 32; ++i) x[i] = 0.5f + 0.01f * static_cast<float>(i); // all above 0
  quant::QuantizedTensor q;
  const Scheme asym = makeScheme(Format::Int4, Granularity::Channel, 0, 0, false);
  ASSERT_EQ(quant::quantize(x.data(), shape, asym, half16, q), "");
  std::vector<float> y = quant::dequantize(q);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t i = 0; i < 32; ++i) // within half a step of the range's grid
      EXPECT_LE(std::abs(y[r * 32 + i] - x[r * 32 + i]), 0.5f * q.scales[r] * 1.0001f)
          << "row " << r << " element " << i;

  std::vector<float> huge(32, 1.0e6f), tiny(32, 1.0e-9f);
  const Scheme int4 = makeScheme(Format::Int4, Granularity::Block, 0, 32, true);
  EXPECT_NE(quant::quantize(huge.data(), {1, 32}, int4, half16, q).find("beyond fp16"),
            std::string::npos);
  ASSERT_EQ(quant::quantize(tiny.data(), {1, 32}, int4, half16, q), "");
  EXPECT_EQ(q.scales[0], 0.0f);
  EXPECT_EQ(quant::dequantize(q), std::vector<float>(32, 0.0f));
  const Scheme nf4 = makeScheme(Format::Nf4, Granularity::Block, 0, 32, true);
  EXPECT_NE(quant::quantize(x.data(), shape, nf4,
                            quant::StorageFormat(quant::DoubleQuant::Int8, quant::ScaleFormat::F16),
                            q)
                .find("exclude each other"),
            std::string::npos);
}

TEST(QuantizedTensor, BitsPerParameter) {
  std::vector<int64_t> shape = {128, 384};
  std::vector<float> x = sample(shape, 3);
  auto bitsOf = [&](Scheme s, const quant::StorageFormat &storage) {
    quant::QuantizedTensor q;
    EXPECT_EQ(quant::quantize(x.data(), shape, s, storage, q), "");
    return q.bitsPerParameter();
  };
  using quant::DoubleQuant;
  const double n = 128.0 * 384.0;
  // NF4 blocks of 64 + double quantization: 4 + 8/64 + 32/(64·256) bits,
  // plus one fp32 mean per tensor, whichever 8-bit levels hold the absmax.
  const Scheme nf4 = makeScheme(Format::Nf4, Granularity::Block, 0, 64, true);
  EXPECT_DOUBLE_EQ(bitsOf(nf4, DoubleQuant::Int8), 4.0 + 8.0 / 64 + 32.0 / (64 * 256) + 32.0 / n);
  EXPECT_DOUBLE_EQ(bitsOf(nf4, DoubleQuant::Fp8E4M3),
                   4.0 + 8.0 / 64 + 32.0 / (64 * 256) + 32.0 / n);
  EXPECT_DOUBLE_EQ(bitsOf(nf4, DoubleQuant::None), 4.0 + 32.0 / 64);
  EXPECT_DOUBLE_EQ(
      bitsOf(makeScheme(Format::Int4, Granularity::Block, 0, 64, true), DoubleQuant::None), 4.5);
  EXPECT_DOUBLE_EQ(bitsOf(makeScheme(Format::Int4, Granularity::Block, 0, 32, true),
                          quant::StorageFormat(DoubleQuant::None, quant::ScaleFormat::F16)),
                   4.5);
  EXPECT_DOUBLE_EQ(
      bitsOf(makeScheme(Format::Int8, Granularity::Channel, 1, 0, true), DoubleQuant::None),
      8.0 + 32.0 * 384 / n);
  EXPECT_DOUBLE_EQ(
      bitsOf(makeScheme(Format::Int8, Granularity::Channel, 1, 0, false), DoubleQuant::None),
      8.0 + 64.0 * 384 / n);
  EXPECT_DOUBLE_EQ(
      bitsOf(makeScheme(Format::Fp8E4M3, Granularity::Tensor, 0, 0, true), DoubleQuant::None),
      8.0 + 32.0 / n);
}

TEST(QuantizedTensor, Fp8CodecCoversEveryPattern) {
  for (Format f : {Format::Fp8E4M3, Format::Fp8E5M2}) {
    for (int code = 0; code < 256; ++code) {
      bool e4m3 = f == Format::Fp8E4M3;
      int exponentField = e4m3 ? (code >> 3) & 15 : (code >> 2) & 31;
      bool special = e4m3 ? (code & 0x7f) == 0x7f : exponentField == 31;
      if (special)
        continue;
      float v = quant::decodeFp8(static_cast<uint8_t>(code), f);
      EXPECT_EQ(quant::encodeFp8(v, f), code) << quant::formatName(f) << " code " << code;
    }
  }
  EXPECT_EQ(quant::decodeFp8(0x7e, Format::Fp8E4M3), 448.0f);
  EXPECT_EQ(quant::decodeFp8(0x7b, Format::Fp8E5M2), 57344.0f);
  EXPECT_EQ(quant::decodeFp8(0x01, Format::Fp8E4M3), std::ldexp(1.0f, -9));
  EXPECT_EQ(quant::decodeFp8(0x01, Format::Fp8E5M2), std::ldexp(1.0f, -16));
  EXPECT_EQ(quant::decodeFp8(0xc0, Format::Fp8E5M2), -2.0f);
}

TEST(QuantizedTensor, FourBitCodesPackLowNibbleFirst) {
  std::vector<int64_t> shape = {3};
  std::vector<float> x = {7.0f, -7.0f, 1.0f};
  quant::QuantizedTensor q;
  ASSERT_EQ(quant::quantize(x.data(), shape,
                            makeScheme(Format::Int4, Granularity::Tensor, 0, 0, true),
                            quant::DoubleQuant::None, q),
            "");
  ASSERT_EQ(q.codes.size(), 2u);
  EXPECT_EQ(q.codes[0], 0x97); // 7 low, −7 (0b1001) high
  EXPECT_EQ(q.codes[1], 0x01); // 1, then the padding 0
  EXPECT_EQ(q.scales[0], 1.0f);
  // int8 is the two's complement byte.
  ASSERT_EQ(quant::quantize(x.data(), shape,
                            makeScheme(Format::Int8, Granularity::Tensor, 0, 0, true),
                            quant::DoubleQuant::None, q),
            "");
  EXPECT_EQ(q.codes[1], static_cast<uint8_t>(-127));
}

TEST(QuantizedTensor, ThreeBitCodesPackAsABitStream) {
  // Levels 3, −3, 1, −1, 0, 2, −2, 3, 1 (scale 1): the 3-bit two's
  // complements 011 101 001 111 000 010 110 011 001, element i at bits
  // 3i .. 3i+2, little-endian.
  std::vector<float> x = {3.0f, -3.0f, 1.0f, -1.0f, 0.0f, 2.0f, -2.0f, 3.0f, 1.0f};
  std::vector<int64_t> shape = {9};
  quant::QuantizedTensor q;
  ASSERT_EQ(quant::quantize(x.data(), shape, makeScheme(Format::Int3), quant::DoubleQuant::None, q),
            "");
  ASSERT_EQ(q.codes.size(), 4u); // 27 bits
  uint64_t stream = 0;
  const int levels[] = {3, -3, 1, -1, 0, 2, -2, 3, 1};
  for (int i = 0; i < 9; ++i) stream |= static_cast<uint64_t>(levels[i] & 7) << (3 * i);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(q.codes[b], (stream >> (8 * b)) & 0xff) << "byte " << b;
  EXPECT_EQ(quant::dequantize(q), x);
  EXPECT_EQ(quant::codeBytes(Format::Int3, 8), 3);
  // Asymmetric int3 uses all eight levels, −4 included.
  std::vector<float> y = {-4.0f, 3.0f, 0.0f, -1.0f};
  ASSERT_EQ(quant::quantize(y.data(), {4},
                            makeScheme(Format::Int3, Granularity::Tensor, 0, 0, false),
                            quant::DoubleQuant::None, q),
            "");
  EXPECT_EQ(q.zeroPoints[0], 0);
  EXPECT_EQ(quant::dequantize(q), y);
}

TEST(QuantizedTensor, SchemesThatDoNotFitAreRejected) {
  std::vector<float> x(6 * 100, 1.0f);
  quant::QuantizedTensor q;
  EXPECT_EQ(quant::quantize(x.data(), {6, 100},
                            makeScheme(Format::Int4, Granularity::Block, 0, 64, true),
                            quant::DoubleQuant::None, q),
            "blocks of 64 do not divide the last dimension (100)");
  EXPECT_EQ(quant::quantize(x.data(), {6, 100},
                            makeScheme(Format::Int8, Granularity::Channel, 2, 0, true),
                            quant::DoubleQuant::None, q),
            "channel axis 2 is out of range for rank 2");
  EXPECT_NE(quant::quantize(x.data(), {6, 100},
                            makeScheme(Format::Nf4, Granularity::Tensor, 0, 0, false),
                            quant::DoubleQuant::None, q),
            "");
}

TEST(QuantizedTensor, SchemeStrings) {
  for (const char *text : {"int4:block64:sym", "int3:channel0:sym", "int8:channel1:asym",
                           "nf4:tensor:sym", "fp8_e5m2:channel0:sym"}) {
    Scheme s;
    std::string error;
    ASSERT_TRUE(quant::parseSchemeString(text, s, error)) << error;
    EXPECT_EQ(quant::schemeString(s), text);
  }
  Scheme s;
  std::string error;
  EXPECT_FALSE(quant::parseSchemeString("int5:tensor:sym", s, error));
  EXPECT_EQ(error, "bad scheme 'int5:tensor:sym': unknown format 'int5'");
  EXPECT_FALSE(quant::parseSchemeString("int4:block:sym", s, error));
  EXPECT_FALSE(quant::parseSchemeString("nf4:tensor:asym", s, error));
  EXPECT_FALSE(quant::parseSchemeString("int8:channel", s, error));
}

/// A stacked scheme quantizes each slice of dimension 0 on its own: the
/// stack's codes, scales and zero points are each slice's, quantized with
/// the scheme alone (its channel axis one less), one slice after another.
TEST(QuantizedTensor, StackedSchemesQuantizeEachSlice) {
  const int64_t slices = 3, rows = 6, cols = 8, n = rows * cols;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  std::vector<float> x(slices * n);
  for (float &v : x) v = normal(rng);
  for (int64_t s = 0; s < slices; ++s) // slices of different ranges
    for (int64_t i = 0; i < n; ++i) x[s * n + i] *= static_cast<float>(s + 1);
  const std::vector<Scheme> schemes = {makeScheme(Format::Int8, Granularity::Channel, 1, 0, true),
                                       makeScheme(Format::Int4, Granularity::Channel, 2, 0, false),
                                       makeScheme(Format::Int4, Granularity::Tensor, 0, 0, true),
                                       makeScheme(Format::Fp8E4M3, Granularity::Tensor, 0, 0, true),
                                       makeScheme(Format::Int4, Granularity::Block, 0, 4, true)};
  for (Scheme stacked : schemes) {
    stacked.stacked = true;
    Scheme one = stacked;
    one.stacked = false;
    one.axis = std::max<int64_t>(0, one.axis - 1);
    quant::QuantizedTensor whole;
    ASSERT_EQ(
        quant::quantize(x.data(), {slices, rows, cols}, stacked, quant::DoubleQuant::None, whole),
        "");
    SCOPED_TRACE(quant::schemeString(stacked));
    std::vector<uint8_t> codes;
    std::vector<float> scales, values;
    std::vector<int32_t> zeroPoints;
    for (int64_t s = 0; s < slices; ++s) {
      quant::QuantizedTensor q;
      ASSERT_EQ(quant::quantize(x.data() + s * n, {rows, cols}, one, quant::DoubleQuant::None, q),
                "");
      codes.insert(codes.end(), q.codes.begin(), q.codes.end());
      scales.insert(scales.end(), q.scales.begin(), q.scales.end());
      zeroPoints.insert(zeroPoints.end(), q.zeroPoints.begin(), q.zeroPoints.end());
      std::vector<float> y = quant::dequantize(q);
      values.insert(values.end(), y.begin(), y.end());
    }
    EXPECT_EQ(whole.codes, codes);
    EXPECT_EQ(whole.scales, scales);
    EXPECT_EQ(whole.zeroPoints, zeroPoints);
    EXPECT_EQ(quant::dequantize(whole), values);
    EXPECT_EQ(quant::validate(whole), "");
  }
  Scheme s;
  std::string error;
  ASSERT_TRUE(quant::parseSchemeString("int8:channel1:sym:stacked", s, error)) << error;
  EXPECT_TRUE(s.stacked);
  EXPECT_EQ(quant::schemeString(s), "int8:channel1:sym:stacked");
  // Blocks are the same groups either way: no suffix.
  s = makeScheme(Format::Int4, Granularity::Block, 0, 32, true);
  s.stacked = true;
  EXPECT_EQ(quant::schemeString(s), "int4:block32:sym");
  EXPECT_FALSE(quant::parseSchemeString("int8:channel1:sym:stack", s, error));
  quant::QuantizedTensor q;
  s = makeScheme(Format::Int8, Granularity::Channel, 0, 0, true);
  s.stacked = true;
  EXPECT_EQ(quant::quantize(x.data(), {slices, rows, cols}, s, quant::DoubleQuant::None, q),
            "the channel axis of a stacked scheme is within each slice (>= 1), not 0");
}

TEST(QuantizedFile, RoundTripAndErrors) {
  test::TempDir dir;
  std::vector<int64_t> shape = {16, 128};
  std::vector<float> w = sample(shape, 5), bias = {0.5f, -1.25f};
  std::vector<quant::QuantizedTensor> qs(2);
  ASSERT_EQ(quant::quantize(w.data(), shape,
                            makeScheme(Format::Int8, Granularity::Channel, 0, 0, false),
                            quant::DoubleQuant::None, qs[0]),
            "");
  ASSERT_EQ(quant::quantize(w.data(), shape,
                            makeScheme(Format::Nf4, Granularity::Block, 0, 64, true),
                            quant::DoubleQuant::Int8, qs[1]),
            "");
  std::vector<SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
  appendQuantized("a.weight", qs[0], tensors, metadata);
  appendQuantized("b.weight", qs[1], tensors, metadata);
  tensors.push_back({"c.bias", DType::F32, {2}, bias.data(), 8});
  std::string path = dir.file("q.safetensors");
  writeSafetensors(path, tensors, metadata);
  EXPECT_EQ(metadata["a.weight"], "int8:channel0:asym shape=16x128");
  EXPECT_EQ(metadata["b.weight"], "nf4:block64:sym shape=16x128 double_quant=int8:block256");

  SafetensorsFile file(path);
  ASSERT_NE(file.find("a.weight.zero_point"), nullptr);
  EXPECT_EQ(file.find("a.weight.zero_point")->dtype, DType::I32);
  EXPECT_EQ(file.find("b.weight.absmax_q")->dtype, DType::U8);
  EXPECT_EQ(file.find("b.weight.absmax_mean")->shape, std::vector<int64_t>{});
  EXPECT_EQ(file.find("b.weight.scale"), nullptr);
  FloatTensor t;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(readFloatTensor(file, i == 0 ? "a.weight" : "b.weight", t));
    EXPECT_EQ(t.shape, shape);
    expectSame(t.data, quant::dequantize(qs[i]), "read back");
    EXPECT_FALSE(t.scheme.empty());
  }
  ASSERT_TRUE(readFloatTensor(file, "c.bias", t));
  EXPECT_EQ(t.data, bias);
  EXPECT_TRUE(t.scheme.empty());
  EXPECT_FALSE(readFloatTensor(file, "d.weight", t));

  // A quantized tensor missing one of its arrays, or with a wrong count.
  std::vector<SafeTensor> broken;
  for (const SafeTensor &s : tensors)
    if (s.name != "a.weight.scale") broken.push_back(s);
  writeSafetensors(dir.file("broken.safetensors"), broken, metadata);
  expectReadError(SafetensorsFile(dir.file("broken.safetensors")), "a.weight",
                  "quantized tensor 'a.weight' has no 'a.weight.scale'");
  metadata["a.weight"] = "int8:channel0:asym shape=16x64";
  writeSafetensors(dir.file("shape.safetensors"), tensors, metadata);
  SafetensorsFile shapeFile(dir.file("shape.safetensors"));
  EXPECT_THROW(readFloatTensor(shapeFile, "a.weight", t), RuntimeError);
}

TEST(QuantizedFile, PlainHalfPrecisionTensorsWiden) {
  // Hugging Face models are stored in bf16 or fp16: both load exactly.
  test::TempDir dir;
  std::vector<float> values = {1.0f, -2.5f, 0.099975586f, 65504.0f};
  std::vector<uint16_t> bf16, f16;
  for (float v : values) {
    bf16.push_back(floatToBf16(v));
    f16.push_back(half::fromFloat(v));
  }
  std::string path = dir.file("half.safetensors");
  writeSafetensors(path, {{"b", DType::BF16, {4}, bf16.data(), 8},
                          {"h", DType::F16, {4}, f16.data(), 8}});
  SafetensorsFile file(path);
  FloatTensor b, h;
  ASSERT_TRUE(readFloatTensor(file, "b", b));
  ASSERT_TRUE(readFloatTensor(file, "h", h));
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(b.data[i], bf16ToFloat(bf16[i]));
    EXPECT_EQ(h.data[i], half::toFloat(f16[i]));
    EXPECT_EQ(h.data[i], values[i]); // each value is exact in fp16
  }
}
