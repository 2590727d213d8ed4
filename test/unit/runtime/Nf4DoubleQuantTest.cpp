//===- Nf4DoubleQuantTest.cpp - QLoRA's 8-bit float absmax levels ---------===//
//
// NF4's double quantization with E4M3 levels (`llmc quantize --double-quant
// fp8`, QLoRA's 8-bit floats) against a reference written here from the
// OCP E4M3 definition alone: the 256 codes decoded from their sign,
// exponent and mantissa fields in double, and a value's code found by
// scanning them for the nearest finite one (ties to the even mantissa;
// beyond 448, 448). Every stored code, block scale and reconstructed absmax
// must be the reference's bit for bit, and the stored tensor fake_quant
// with that absmax as each block's range. The file form (absmax_q typed
// F8_E4M3, the record's double_quant field) reads back, and a form the
// record and dtype disagree on is an error naming the tensor and file.
// Measured and printed: the absmax and weight error of int8 against E4M3
// levels on a GPT-2-shaped random weight.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kernels/reference/Reference.h"
#include "runtime/quant/QuantizedFile.h"
#include "runtime/quant/QuantizedTensor.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

using namespace llmc;
using quant::DoubleQuant;

namespace {

/// E4M3 code `c` decoded from its fields (bias 7, 3 mantissa bits,
/// subnormals below exponent field 1); NaN for S.1111.111.
double e4m3Value(int c) {
  const int exponent = (c >> 3) & 15, mantissa = c & 7;
  if (exponent == 15 && mantissa == 7)
    return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exponent == 0 ? mantissa / 8.0 * std::ldexp(1.0, -6)
                                         : (1.0 + mantissa / 8.0) * std::ldexp(1.0, exponent - 7);
  return (c & 0x80) ? -magnitude : magnitude;
}

/// The code of the finite E4M3 value of v's sign nearest v; of two as
/// near, the one with an even mantissa (even code). Saturates: nothing
/// finite lies beyond ±448.
int nearestE4m3(float v) {
  const int first = std::signbit(v) ? 0x80 : 0;
  int best = -1;
  double bestDistance = std::numeric_limits<double>::infinity();
  for (int c = first; c < first + 0x80; ++c) {
    const double value = e4m3Value(c);
    if (std::isnan(value))
      continue;
    const double distance = std::abs(static_cast<double>(v) - value);
    if (distance < bestDistance || (distance == bestDistance && c % 2 == 0)) {
      best = c;
      bestDistance = distance;
    }
  }
  return best;
}

/// The double quantization the contract specifies, operation for
/// operation in fp32, with the reference's E4M3 rounding.
struct ReferenceLevels {
  float mean = 0.0f;
  std::vector<uint8_t> codes;
  std::vector<float> scales, absmax;
};

ReferenceLevels referenceFp8Levels(const std::vector<float> &absmax) {
  ReferenceLevels r;
  const int64_t groups = static_cast<int64_t>(absmax.size());
  double sum = 0.0;
  for (float a : absmax) sum += a;
  r.mean = static_cast<float>(sum / static_cast<double>(groups));
  for (int64_t begin = 0; begin < groups; begin += quant::kNf4DoubleQuantBlock) {
    const int64_t end = std::min(groups, begin + quant::kNf4DoubleQuantBlock);
    float amax = 0.0f;
    for (int64_t g = begin; g < end; ++g) amax = std::max(amax, std::abs(absmax[g] - r.mean));
    const float scale = amax > 0.0f ? amax / 448.0f : 0.0f;
    r.scales.push_back(scale);
    for (int64_t g = begin; g < end; ++g) {
      const int code = scale > 0.0f ? nearestE4m3((absmax[g] - r.mean) / scale) : 0;
      const float deviation = static_cast<float>(e4m3Value(code)) * scale;
      r.codes.push_back(static_cast<uint8_t>(code));
      r.absmax.push_back(deviation + r.mean);
    }
  }
  return r;
}

/// Normal weights (GPT-2's initialisation, std 0.02), with `outliers`
/// every 997th element ×8, so that block absmax values spread.
std::vector<float> randomWeight(const std::vector<int64_t> &shape, uint64_t seed,
                                bool outliers = true) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(n);
  for (float &v : w) v = normal(rng);
  for (int64_t i = 0; outliers && i < n; i += 997) w[i] *= 8.0f;
  return w;
}

quant::Scheme nf4Blocks(int64_t block) {
  return quant::makeScheme(quant::Format::Nf4, quant::Granularity::Block, 0, block);
}

quant::QuantizedTensor quantized(const std::vector<float> &w, const std::vector<int64_t> &shape,
                                 int64_t block, DoubleQuant levels) {
  quant::QuantizedTensor q;
  EXPECT_EQ(quant::quantize(w.data(), shape, nf4Blocks(block), levels, q), "");
  return q;
}

double rms(const std::vector<double> &errors) {
  double sum = 0.0;
  for (double e : errors) sum += e * e;
  return std::sqrt(sum / static_cast<double>(errors.size()));
}

} // namespace

TEST(Nf4DoubleQuant, ReferenceE4M3CoversTheFormat) {
  // The reference's decoder is the format: 448 largest, 2^-9 smallest,
  // one NaN per sign; every finite code is its own nearest.
  EXPECT_EQ(e4m3Value(0x7e), 448.0);
  EXPECT_EQ(e4m3Value(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(e4m3Value(0x08), std::ldexp(1.0, -6));
  EXPECT_TRUE(std::isnan(e4m3Value(0xff)));
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    if (std::isnan(e4m3Value(c)))
      continue;
    ++finite;
    EXPECT_EQ(nearestE4m3(static_cast<float>(e4m3Value(c))), c) << "code " << c;
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(nearestE4m3(1000.0f), 0x7e);
  EXPECT_EQ(nearestE4m3(-1000.0f), 0xfe);
  EXPECT_EQ(nearestE4m3(1.0625f), 0x38); // between 1 and 1.125: the even mantissa
  EXPECT_EQ(nearestE4m3(1.1875f), 0x3a); // between 1.125 and 1.25: 1.25
}

TEST(Nf4DoubleQuant, Fp8LevelsMatchTheReferenceBitForBit) {
  // 40 × 448 in blocks of 64 (280 absmax values, 256 + a partial 24), and
  // GPT-2's MLP weight in blocks of 64 (36864 blocks, 144 scales).
  for (const auto &[shape, block] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
           {{40, 448}, 64}, {{768, 3072}, 64}, {{5, 96}, 32}}) {
    std::vector<float> w = randomWeight(shape, 11);
    quant::QuantizedTensor plain = quantized(w, shape, block, DoubleQuant::None);
    quant::QuantizedTensor q = quantized(w, shape, block, DoubleQuant::Fp8E4M3);
    ASSERT_EQ(q.doubleQuant, DoubleQuant::Fp8E4M3);
    EXPECT_EQ(quant::validate(q), "");
    ReferenceLevels want = referenceFp8Levels(plain.scales); // the fp32 absmax
    EXPECT_EQ(q.absmaxMean, want.mean);
    EXPECT_EQ(q.absmaxScales, want.scales);
    ASSERT_EQ(q.absmaxCodes.size(), want.codes.size());
    int64_t codeMismatches = 0;
    for (size_t g = 0; g < want.codes.size(); ++g)
      if (q.absmaxCodes[g] != want.codes[g] && codeMismatches++ < 5)
        ADD_FAILURE() << "block " << g << ": code " << int(q.absmaxCodes[g]) << ", reference "
                      << int(want.codes[g]) << " (absmax " << plain.scales[g] << ")";
    EXPECT_EQ(codeMismatches, 0);
    EXPECT_EQ(quant::nf4Absmax(q), want.absmax);

    // The stored tensor is fake_quant with the reconstructed absmax.
    ref::RefTensor x;
    x.shape = shape;
    x.data.assign(w.begin(), w.end());
    ref::RefTensor range = ref::RefTensor::zeros({static_cast<int64_t>(want.absmax.size()), 2});
    for (size_t g = 0; g < want.absmax.size(); ++g)
      range.data[2 * g] = range.data[2 * g + 1] = want.absmax[g];
    ref::RefTensor y = ref::fakeQuant(x, range, nf4Blocks(block));
    EXPECT_EQ(quant::dequantize(q), std::vector<float>(y.data.begin(), y.data.end()));
  }
}

TEST(Nf4DoubleQuant, Fp8LevelsStayWithinHalfAnE4M3Step) {
  // |â − a| ≤ half the E4M3 step at |a − mean| / scale, times the scale
  // (a relative 2^-4 of the deviation, or 2^-10 · scale among subnormals),
  // plus the fp32 roundings of the division, product and sum.
  const std::vector<int64_t> shape = {768, 3072};
  std::vector<float> w = randomWeight(shape, 12);
  quant::QuantizedTensor plain = quantized(w, shape, 64, DoubleQuant::None);
  quant::QuantizedTensor q = quantized(w, shape, 64, DoubleQuant::Fp8E4M3);
  std::vector<float> absmax = quant::nf4Absmax(q);
  for (size_t g = 0; g < absmax.size(); ++g) {
    const double scale = q.absmaxScales[g / quant::kNf4DoubleQuantBlock];
    const double deviation = std::abs(plain.scales[g] - q.absmaxMean) / scale;
    const int exponent =
        deviation > 0 ? std::max(-6, static_cast<int>(std::floor(std::log2(deviation)))) : -6;
    const double halfStep = std::ldexp(1.0, exponent - 4) * scale;
    EXPECT_LE(std::abs(absmax[g] - plain.scales[g]), halfStep * (1 + 1e-6) + 1e-6 * plain.scales[g])
        << "block " << g;
  }
}

TEST(Nf4DoubleQuant, MeasuredErrorOfInt8AndFp8Levels) {
  // GPT-2 124M's MLP weight [768, 3072], blocks of 64, normal weights with
  // and without outliers: the error the 8-bit levels add to the fp32
  // absmax, and what it does to the weight (against NF4 with fp32 absmax).
  // Printed for docs/quantization.md.
  const std::vector<int64_t> shape = {768, 3072};
  for (bool outliers : {false, true}) {
    std::vector<float> w = randomWeight(shape, 13, outliers);
    quant::QuantizedTensor plain = quantized(w, shape, 64, DoubleQuant::None);
    const std::vector<float> plainW = quant::dequantize(plain);
    std::vector<double> nf4Error(w.size());
    for (size_t i = 0; i < w.size(); ++i) nf4Error[i] = plainW[i] - w[i];
    std::printf("%s: NF4 blocks of 64, fp32 absmax: weight RMS error %.4e (RMS weight %.4e)\n",
                outliers ? "with outliers" : "normal", rms(nf4Error),
                rms(std::vector<double>(w.begin(), w.end())));
    for (DoubleQuant levels : {DoubleQuant::Int8, DoubleQuant::Fp8E4M3}) {
      quant::QuantizedTensor q = quantized(w, shape, 64, levels);
      const std::vector<float> absmax = quant::nf4Absmax(q), stored = quant::dequantize(q);
      std::vector<double> absmaxError(absmax.size()), relative(absmax.size()),
          weightError(w.size()), vsPlain(w.size());
      for (size_t g = 0; g < absmax.size(); ++g) {
        absmaxError[g] = absmax[g] - plain.scales[g];
        relative[g] = std::abs(absmaxError[g] / plain.scales[g]);
      }
      for (size_t i = 0; i < w.size(); ++i) {
        weightError[i] = stored[i] - w[i];
        vsPlain[i] = stored[i] - plainW[i];
      }
      std::printf("  %s levels: absmax RMS error %.4e (relative: RMS %.4e, max %.4e); weight "
                  "RMS error %.4e, against fp32 absmax %.4e; %.4f bits per parameter\n",
                  levels == DoubleQuant::Fp8E4M3 ? "E4M3" : "int8", rms(absmaxError), rms(relative),
                  *std::max_element(relative.begin(), relative.end()), rms(weightError),
                  rms(vsPlain), q.bitsPerParameter());
      // Either form leaves NF4's own error within 1 %: the absmax levels
      // are far finer than the 4-bit grid.
      EXPECT_LT(rms(weightError), 1.01 * rms(nf4Error));
      EXPECT_GT(rms(absmaxError), 0.0);
      EXPECT_DOUBLE_EQ(q.bitsPerParameter(),
                       4.0 + 8.0 / 64 + 32.0 / (64 * 256) + 32.0 / (768.0 * 3072.0));
    }
  }
}

TEST(Nf4DoubleQuant, FileFormSaysItsLevels) {
  test::TempDir dir;
  const std::vector<int64_t> shape = {16, 128};
  std::vector<float> w = randomWeight(shape, 5);
  std::vector<quant::QuantizedTensor> qs = {quantized(w, shape, 64, DoubleQuant::Int8),
                                            quantized(w, shape, 64, DoubleQuant::Fp8E4M3)};
  std::vector<SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
  appendQuantized("a.weight", qs[0], tensors, metadata);
  appendQuantized("b.weight", qs[1], tensors, metadata);
  const std::string path = dir.file("q.safetensors");
  writeSafetensors(path, tensors, metadata);
  EXPECT_EQ(metadata["a.weight"], "nf4:block64:sym shape=16x128 double_quant=int8:block256");
  EXPECT_EQ(metadata["b.weight"], "nf4:block64:sym shape=16x128 double_quant=fp8_e4m3:block256");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("\"dtype\":\"F8_E4M3\""), std::string::npos);

  SafetensorsFile file(path);
  EXPECT_FALSE(file.find("a.weight.absmax_q")->e4m3);
  EXPECT_TRUE(file.find("b.weight.absmax_q")->e4m3);
  EXPECT_EQ(file.find("b.weight.absmax_q")->dtype, DType::U8);
  FloatTensor t;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(readFloatTensor(file, i == 0 ? "a.weight" : "b.weight", t));
    EXPECT_EQ(t.data, quant::dequantize(qs[i]));
  }
  // The same bytes under the other form's record are not read as it.
  auto readError = [&](const std::map<std::string, std::string> &records,
                       const std::vector<SafeTensor> &written, const std::string &name) {
    const std::string other = dir.file("other.safetensors");
    writeSafetensors(other, written, records);
    SafetensorsFile f(other);
    FloatTensor out;
    try {
      readFloatTensor(f, name, out);
    } catch (const RuntimeError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::map<std::string, std::string> swapped = metadata;
  std::swap(swapped["a.weight"], swapped["b.weight"]);
  EXPECT_NE(readError(swapped, tensors, "a.weight")
                .find("other.safetensors: tensor 'a.weight.absmax_q' is U8, expected F8_E4M3"),
            std::string::npos);
  EXPECT_NE(readError(swapped, tensors, "b.weight")
                .find("other.safetensors: tensor 'b.weight.absmax_q' is F8_E4M3, expected U8"),
            std::string::npos);
  // An absmax_q of a dtype neither form has.
  std::vector<SafeTensor> wide = tensors;
  std::vector<float> wideLevels(qs[1].absmaxCodes.begin(), qs[1].absmaxCodes.end());
  for (SafeTensor &s : wide)
    if (s.name == "b.weight.absmax_q")
      s = {s.name, DType::F32, s.shape, wideLevels.data(), wideLevels.size() * 4};
  EXPECT_NE(readError(metadata, wide, "b.weight")
                .find("other.safetensors: tensor 'b.weight.absmax_q' is F32, expected F8_E4M3"),
            std::string::npos);
  // A record naming levels llmc does not know.
  std::map<std::string, std::string> unknown = metadata;
  unknown["b.weight"] = "nf4:block64:sym shape=16x128 double_quant=fp8_e5m2:block256";
  EXPECT_NE(readError(unknown, tensors, "b.weight")
                .find("unknown double quantization 'double_quant=fp8_e5m2:block256'"),
            std::string::npos);
  // A plain F8_E4M3 tensor is no parameter llmc reads.
  EXPECT_NE(readError(metadata, tensors, "b.weight.absmax_q")
                .find("tensor 'b.weight.absmax_q' is F8_E4M3, which llmc reads only as NF4's "
                      "absmax levels"),
            std::string::npos);
}

TEST(Nf4DoubleQuant, ValidateRefusesNanLevels) {
  const std::vector<int64_t> shape = {4, 64};
  std::vector<float> w = randomWeight(shape, 3);
  quant::QuantizedTensor q = quantized(w, shape, 64, DoubleQuant::Fp8E4M3);
  EXPECT_EQ(quant::validate(q), "");
  q.absmaxCodes[2] = 0xff;
  EXPECT_EQ(quant::validate(q), "absmax_q[2] is an E4M3 NaN (code 255)");
  // The same byte is an int8 level (−1) in the other form.
  q.doubleQuant = DoubleQuant::Int8;
  EXPECT_EQ(quant::validate(q), "");
}
