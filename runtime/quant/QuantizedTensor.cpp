//===- QuantizedTensor.cpp - a float tensor stored quantized --------------===//
//
// Every quantity the contract fixes in fp32 (range, scale, zero point,
// x / scale, level · scale) is computed here in float, operation for
// operation as common/QuantScheme.h writes it, so a stored level is the
// one the fake-quantization kernels and the double reference pick, ties
// included, and level · scale reproduces their result bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/QuantizedTensor.h"
#include "common/Half.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace llmc::quant {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// The group of every flat element, without recomputing strides per element.
class GroupIndex {
public:
  GroupIndex(const Scheme &s, const std::vector<int64_t> &shape) : s_(s) {
    if (s.granularity == Granularity::Channel) {
      inner_ = innerSize(shape, s.axis);
      channels_ = shape[s.axis];
    }
    if (s.stacked && shape.size() >= 2)
      slice_ = innerSize(shape, 0);
  }
  int64_t operator()(int64_t i) const {
    switch (s_.granularity) {
    case Granularity::Tensor: return slice_ > 0 ? i / slice_ : 0;
    case Granularity::Channel:
      return (slice_ > 0 ? (i / slice_) * channels_ : 0) + (i / inner_) % channels_;
    case Granularity::Block: return i / s_.block;
    }
    return 0;
  }

private:
  Scheme s_;
  int64_t inner_ = 1, channels_ = 1;
  int64_t slice_ = 0; ///< elements per slice of a stacked scheme; 0 otherwise
};

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

/// Why `s` does not fit `shape`, or empty.
std::string schemeMismatch(const Scheme &s, const std::vector<int64_t> &shape) {
  if (!s.symmetric && !isInteger(s.format))
    return std::string("asymmetric quantization is for integer formats only, not ") +
           formatName(s.format);
  if (shape.empty())
    return "a scalar has no elements to group (rank 0)";
  if (s.stacked && shape.size() < 2)
    return "a stacked scheme needs a stack of tensors (rank >= 2), got rank " +
           std::to_string(shape.size());
  if (s.stacked && s.granularity == Granularity::Channel && s.axis == 0)
    return "the channel axis of a stacked scheme is within each slice (>= 1), not 0";
  if (s.granularity == Granularity::Channel &&
      (s.axis < 0 || s.axis >= static_cast<int64_t>(shape.size())))
    return "channel axis " + std::to_string(s.axis) + " is out of range for rank " +
           std::to_string(shape.size());
  if (s.granularity == Granularity::Block && (s.block <= 0 || shape.back() % s.block != 0))
    return "blocks of " + std::to_string(s.block) + " do not divide the last dimension (" +
           std::to_string(shape.back()) + ")";
  return "";
}

void putCode(std::vector<uint8_t> &codes, int bits, int64_t i, int value) {
  uint8_t byte = static_cast<uint8_t>(value);
  if (bits == 8) {
    codes[i] = byte;
    return;
  }
  if (bits == 3) {
    // Bits 3i .. 3i+2 of the little-endian bit stream; a code may straddle
    // two bytes.
    unsigned v = byte & 0x07u;
    int64_t bit = 3 * i, at = bit / 8;
    int shift = static_cast<int>(bit % 8);
    codes[at] |= static_cast<uint8_t>(v << shift);
    if (shift > 5)
      codes[at + 1] |= static_cast<uint8_t>(v >> (8 - shift));
    return;
  }
  uint8_t nibble = byte & 0x0f;
  codes[i / 2] |= (i % 2 == 0) ? nibble : static_cast<uint8_t>(nibble << 4);
}

int getCode(const std::vector<uint8_t> &codes, int bits, int64_t i) {
  if (bits == 8) return codes[i];
  if (bits == 3) {
    int64_t bit = 3 * i, at = bit / 8;
    int shift = static_cast<int>(bit % 8);
    unsigned word = codes[at] | (shift > 5 ? static_cast<unsigned>(codes[at + 1]) << 8 : 0u);
    return static_cast<int>((word >> shift) & 0x07u);
  }
  return nf4Index(codes.data(), i); // 4-bit codes pack as NF4 indices do
}

/// A code's signed integer level (int8 / int4 / int3 two's complement).
int signedLevel(int code, int bits) {
  if (bits == 8) return static_cast<int8_t>(code);
  int half = 1 << (bits - 1);
  return code >= half ? code - 2 * half : code;
}

/// The NF4 level index nearest c; of two at the same distance, the lower
/// (the reference's scan, in double, of fp32 c against fp32 levels).
int nearestNf4Index(float c) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::abs(static_cast<double>(c) - kNf4Levels[i]) <
        std::abs(static_cast<double>(c) - kNf4Levels[best]))
      best = i;
  return best;
}

/// Index of the NF4 level 0.0 (an empty group's code).
constexpr int kNf4Zero = 7;

/// The code of the 8-bit level nearest v (= (absmax − mean) / scale):
/// int8 rounded to nearest, ties to even, clamped to ±127; E4M3 by
/// common/Fp8.h's rounding (ties to the even mantissa, saturating at 448).
uint8_t absmaxCode(float v, AbsmaxFormat format) {
  if (format == AbsmaxFormat::Fp8E4M3)
    return fp8::encode(v, fp8::Kind::E4M3);
  int level = static_cast<int>(std::clamp(std::nearbyint(v), -127.0f, 127.0f));
  return static_cast<uint8_t>(static_cast<int8_t>(level));
}

/// Double-quantizes the per-group absmax values into `q` (to the levels of
/// q.doubleQuant) and returns their reconstruction (what the codes are
/// then chosen against).
std::vector<float> doubleQuantize(const std::vector<float> &absmax, QuantizedTensor &q) {
  const AbsmaxFormat format = absmaxFormatOf(q.doubleQuant);
  int64_t groups = static_cast<int64_t>(absmax.size());
  double sum = 0;
  for (float a : absmax) sum += a;
  q.absmaxMean = groups > 0 ? static_cast<float>(sum / static_cast<double>(groups)) : 0.0f;
  int64_t blocks = nf4ScaleCount(groups);
  q.absmaxCodes.assign(groups, 0);
  q.absmaxScales.assign(blocks, 0.0f);
  std::vector<float> reconstructed(groups);
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t begin = b * kNf4DoubleQuantBlock, end = std::min(groups, begin + kNf4DoubleQuantBlock);
    float amax = 0.0f;
    for (int64_t g = begin; g < end; ++g) amax = std::max(amax, std::abs(absmax[g] - q.absmaxMean));
    float scale = amax > 0.0f ? amax / absmaxLevelMax(format) : 0.0f;
    q.absmaxScales[b] = scale;
    for (int64_t g = begin; g < end; ++g) {
      uint8_t code = 0; // the level 0 in both formats
      if (scale > 0.0f) {
        float deviation = absmax[g] - q.absmaxMean;
        code = absmaxCode(deviation / scale, format);
      }
      q.absmaxCodes[g] = code;
      reconstructed[g] = nf4Absmax(code, format, scale, q.absmaxMean);
    }
  }
  return reconstructed;
}

/// Rounds every group's scale to the nearest fp16 value, the zero point
/// (asymmetric) derived from the group's min (−negMin) on the rounded
/// scale as groupGrid derives it; a scale that rounds to 0 leaves its
/// group empty. Returns why not when a scale is beyond fp16's largest
/// value.
std::string roundScalesToHalf(const Scheme &s, const std::vector<float> &negMin,
                              std::vector<GroupGrid> &grid) {
  const float qmax = isInteger(s.format) ? static_cast<float>(integerMax(s.format)) : 0.0f;
  const float qmin = -(qmax + 1.0f);
  for (size_t g = 0; g < grid.size(); ++g) {
    GroupGrid &group = grid[g];
    if (!group.live)
      continue;
    const float rounded = half::toFloat(half::fromFloat(group.scale));
    if (std::isinf(rounded))
      return "group " + std::to_string(g) + "'s scale " + std::to_string(group.scale) +
             " is beyond fp16's largest value (65504); store the scales in fp32";
    group.scale = rounded;
    if (!(rounded > 0.0f)) {
      group = GroupGrid{};
      continue;
    }
    if (!s.symmetric) {
      const float lo = std::min(-negMin[g], 0.0f);
      group.zeroPoint = std::min(std::max(std::nearbyint(qmin - lo / rounded), qmin), qmax);
    }
  }
  return "";
}

} // namespace

int64_t QuantizedTensor::numel() const { return product(shape); }

int64_t QuantizedTensor::groups() const { return groupCount(scheme, shape); }

int64_t QuantizedTensor::storageBytes() const {
  const size_t scaleBytes = scaleFormat == ScaleFormat::F16 ? 2 : 4;
  return static_cast<int64_t>(codes.size() + scaleBytes * scales.size() + 4 * zeroPoints.size() +
                              absmaxCodes.size() + 4 * absmaxScales.size()) +
         (doubleQuantized() ? 4 : 0);
}

double QuantizedTensor::bitsPerParameter() const {
  int64_t n = numel();
  return n > 0 ? 8.0 * static_cast<double>(storageBytes()) / static_cast<double>(n) : 0.0;
}

int codeBits(Format format) {
  if (format == Format::Int3) return 3;
  return format == Format::Int4 || format == Format::Nf4 ? 4 : 8;
}

int64_t codeBytes(Format format, int64_t numel) {
  return (codeBits(format) * numel + 7) / 8;
}

GroupGrid groupGrid(const Scheme &s, float negMin, float max) {
  const float qmax = isInteger(s.format) ? static_cast<float>(integerMax(s.format)) : 0.0f;
  const float qmin = -(qmax + 1.0f);
  GroupGrid g;
  if (!s.symmetric) {
    float lo = std::min(-negMin, 0.0f), hi = std::max(max, 0.0f);
    if (!(hi - lo > 0.0f)) return g;
    g.live = true;
    g.scale = (hi - lo) / (qmax - qmin);
    g.zeroPoint = std::min(std::max(std::nearbyint(qmin - lo / g.scale), qmin), qmax);
    return g;
  }
  float amax = std::max(negMin, max);
  if (!(amax > 0.0f)) return g;
  g.live = true;
  g.scale = isInteger(s.format)       ? amax / qmax
            : s.format == Format::Nf4 ? amax
                                      : amax / static_cast<float>(fp8Max(s.format));
  return g;
}

int encodeValue(float x, const Scheme &s, const GroupGrid &g) {
  if (!g.live) return s.format == Format::Nf4 ? kNf4Zero : 0;
  float v = x / g.scale;
  switch (s.format) {
  case Format::Int8:
  case Format::Int4:
  case Format::Int3: {
    const float qmax = static_cast<float>(integerMax(s.format)), qmin = -(qmax + 1.0f);
    float level = s.symmetric ? std::min(std::max(std::nearbyint(v), -qmax), qmax)
                              : std::min(std::max(std::nearbyint(v) + g.zeroPoint, qmin), qmax);
    return static_cast<int>(level);
  }
  case Format::Fp8E4M3:
  case Format::Fp8E5M2: {
    return fp8::encode(v, fp8KindOf(s.format));
  }
  case Format::Nf4: return nearestNf4Index(std::min(std::max(v, -1.0f), 1.0f));
  }
  return 0;
}

float decodeValue(int code, const Scheme &s, const GroupGrid &g) {
  switch (s.format) {
  case Format::Int8:
  case Format::Int4:
  case Format::Int3: {
    int level = code - (s.symmetric ? 0 : static_cast<int>(g.zeroPoint));
    return static_cast<float>(level) * g.scale;
  }
  case Format::Fp8E4M3:
  case Format::Fp8E5M2: return decodeFp8(static_cast<uint8_t>(code), s.format) * g.scale;
  case Format::Nf4: return nf4Value(code, g.scale);
  }
  return 0.0f;
}

void observeRanges(const float *x, const std::vector<int64_t> &shape, const Scheme &s,
                   std::vector<float> &negMin, std::vector<float> &max) {
  const int64_t n = product(shape), groups = groupCount(s, shape);
  GroupIndex groupOf(s, shape);
  negMin.assign(groups, kNegInf);
  max.assign(groups, kNegInf);
  for (int64_t i = 0; i < n; ++i) {
    int64_t g = groupOf(i);
    negMin[g] = std::max(negMin[g], -x[i]);
    max[g] = std::max(max[g], x[i]);
  }
}

std::string quantize(const float *x, const std::vector<int64_t> &shape, const Scheme &s,
                     const StorageFormat &storage, QuantizedTensor &out) {
  if (std::string why = schemeMismatch(s, shape); !why.empty())
    return why;
  // Each group's range [−min, max], as qat.observe computes it.
  std::vector<float> negMin, max;
  observeRanges(x, shape, s, negMin, max);
  return quantizeWithRanges(x, shape, s, storage, negMin, max, out);
}

std::string quantizeWithRanges(const float *x, const std::vector<int64_t> &shape, const Scheme &s,
                               const StorageFormat &storage, const std::vector<float> &negMin,
                               const std::vector<float> &max, QuantizedTensor &out) {
  if (std::string why = schemeMismatch(s, shape); !why.empty())
    return why;
  const int64_t n = product(shape), groups = groupCount(s, shape);
  if (static_cast<int64_t>(negMin.size()) != groups || static_cast<int64_t>(max.size()) != groups)
    return "expected " + std::to_string(groups) + " group ranges, got " +
           std::to_string(negMin.size());
  QuantizedTensor q;
  q.scheme = s;
  q.shape = shape;
  q.doubleQuant = s.format == Format::Nf4 ? storage.doubleQuant : DoubleQuant::None;
  q.scaleFormat = storage.scales;
  if (q.doubleQuantized() && q.scaleFormat == ScaleFormat::F16)
    return "fp16 scales and double quantization exclude each other (a double-quantized nf4 "
           "tensor stores its absmax in 8 bits, not as scales)";
  const int bits = codeBits(s.format);
  GroupIndex groupOf(s, shape);

  std::vector<GroupGrid> grid(groups);
  for (int64_t g = 0; g < groups; ++g) grid[g] = groupGrid(s, negMin[g], max[g]);
  if (q.doubleQuantized()) {
    // The codes are chosen against the absmax the file will reconstruct.
    std::vector<float> absmax(groups);
    for (int64_t g = 0; g < groups; ++g) absmax[g] = grid[g].scale;
    absmax = doubleQuantize(absmax, q);
    for (int64_t g = 0; g < groups; ++g) grid[g] = {absmax[g], 0.0f, absmax[g] > 0.0f};
  }
  if (q.scaleFormat == ScaleFormat::F16)
    if (std::string why = roundScalesToHalf(s, negMin, grid); !why.empty())
      return why;

  q.codes.assign(codeBytes(s.format, n), 0);
  for (int64_t i = 0; i < n; ++i)
    putCode(q.codes, bits, i, encodeValue(x[i], s, grid[groupOf(i)]));
  if (!q.doubleQuantized())
    for (const GroupGrid &g : grid) q.scales.push_back(g.scale);
  if (q.scaleFormat == ScaleFormat::F16)
    for (float scale : q.scales) q.halfScales.push_back(half::fromFloat(scale));
  if (!s.symmetric)
    for (const GroupGrid &g : grid) q.zeroPoints.push_back(static_cast<int32_t>(g.zeroPoint));
  out = std::move(q);
  return "";
}

std::vector<float> nf4Absmax(const QuantizedTensor &q) {
  if (!q.doubleQuantized())
    return q.scales;
  const AbsmaxFormat format = absmaxFormatOf(q.doubleQuant);
  std::vector<float> absmax(q.absmaxCodes.size());
  for (size_t g = 0; g < absmax.size(); ++g)
    absmax[g] =
        nf4Absmax(q.absmaxCodes[g], format, q.absmaxScales[g / kNf4DoubleQuantBlock], q.absmaxMean);
  return absmax;
}

std::vector<float> dequantize(const QuantizedTensor &q) {
  const Scheme &s = q.scheme;
  const int64_t n = q.numel();
  const int bits = codeBits(s.format);
  GroupIndex groupOf(s, q.shape);
  std::vector<float> scale = s.format == Format::Nf4 ? nf4Absmax(q) : q.scales;
  std::vector<float> y(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t g = groupOf(i);
    int code = getCode(q.codes, bits, i);
    switch (s.format) {
    case Format::Int8:
    case Format::Int4:
    case Format::Int3: {
      int level = signedLevel(code, bits) - (s.symmetric ? 0 : q.zeroPoints[g]);
      y[i] = static_cast<float>(level) * scale[g];
      break;
    }
    case Format::Fp8E4M3:
    case Format::Fp8E5M2: y[i] = decodeFp8(static_cast<uint8_t>(code), s.format) * scale[g]; break;
    case Format::Nf4: y[i] = nf4Value(code, scale[g]); break;
    }
  }
  return y;
}

std::string validate(const QuantizedTensor &q) {
  const Scheme &s = q.scheme;
  if (std::string why = schemeMismatch(s, q.shape); !why.empty())
    return "scheme " + schemeString(s) + " does not fit the shape: " + why;
  int64_t groups = q.groups(), n = q.numel();
  auto size = [](const char *what, size_t have, int64_t want) {
    return std::string(what) + " has " + std::to_string(have) + " entries, expected " +
           std::to_string(want);
  };
  if (static_cast<int64_t>(q.codes.size()) != codeBytes(s.format, n))
    return size("qweight", q.codes.size(), codeBytes(s.format, n));
  if (q.doubleQuantized()) {
    if (s.format != Format::Nf4)
      return "double quantization is for nf4 only";
    int64_t blocks = nf4ScaleCount(groups);
    if (!q.scales.empty())
      return "a double-quantized tensor has no fp32 scales";
    if (static_cast<int64_t>(q.absmaxCodes.size()) != groups)
      return size("absmax_q", q.absmaxCodes.size(), groups);
    if (static_cast<int64_t>(q.absmaxScales.size()) != blocks)
      return size("absmax_scale", q.absmaxScales.size(), blocks);
    // E4M3's S.1111.111 is NaN, a level quantization never writes.
    if (q.doubleQuant == DoubleQuant::Fp8E4M3)
      for (size_t g = 0; g < q.absmaxCodes.size(); ++g)
        if ((q.absmaxCodes[g] & 0x7f) == 0x7f)
          return "absmax_q[" + std::to_string(g) + "] is an E4M3 NaN (code " +
                 std::to_string(q.absmaxCodes[g]) + ")";
  } else if (static_cast<int64_t>(q.scales.size()) != groups) {
    return size("scale", q.scales.size(), groups);
  } else if (q.scaleFormat == ScaleFormat::F16 && q.halfScales.size() != q.scales.size()) {
    return size("fp16 scale", q.halfScales.size(), groups);
  }
  if (static_cast<int64_t>(q.zeroPoints.size()) != (s.symmetric ? 0 : groups))
    return size("zero_point", q.zeroPoints.size(), s.symmetric ? 0 : groups);
  return "";
}

std::string schemeString(const Scheme &s) {
  std::string granularity = s.granularity == Granularity::Tensor    ? "tensor"
                            : s.granularity == Granularity::Channel ? "channel" + std::to_string(s.axis)
                                                                    : "block" + std::to_string(s.block);
  return std::string(formatName(s.format)) + ":" + granularity + ":" +
         (s.symmetric ? "sym" : "asym") +
         // Blocks never cross a row: a stack's are the same groups either way.
         (s.stacked && s.granularity != Granularity::Block ? ":stacked" : "");
}

bool parseSchemeString(const std::string &text, Scheme &s, std::string &error) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1)
    fields.push_back(text.substr(start, colon - start));
  fields.push_back(text.substr(start));
  auto bad = [&](const std::string &why) {
    error = "bad scheme '" + text + "': " + why;
    return false;
  };
  Scheme parsed;
  if (fields.size() == 4 && fields[3] == "stacked") {
    parsed.stacked = true;
    fields.pop_back();
  }
  if (fields.size() != 3)
    return bad("expected <format>:<tensor|channel<axis>|block<size>>:<sym|asym>[:stacked]");
  bool known = false;
  for (Format f :
       {Format::Int8, Format::Int4, Format::Int3, Format::Fp8E4M3, Format::Fp8E5M2, Format::Nf4})
    if (fields[0] == formatName(f)) parsed.format = f, known = true;
  if (!known)
    return bad("unknown format '" + fields[0] + "'");
  auto number = [](const std::string &digits, int64_t &value) {
    if (digits.empty() || digits.size() > 12 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return false;
    value = std::stoll(digits);
    return true;
  };
  if (fields[1] == "tensor") {
    parsed.granularity = Granularity::Tensor;
  } else if (fields[1].rfind("channel", 0) == 0 && number(fields[1].substr(7), parsed.axis)) {
    parsed.granularity = Granularity::Channel;
  } else if (fields[1].rfind("block", 0) == 0 && number(fields[1].substr(5), parsed.block) &&
             parsed.block > 0) {
    parsed.granularity = Granularity::Block;
  } else {
    return bad("unknown granularity '" + fields[1] + "'");
  }
  if (fields[2] != "sym" && fields[2] != "asym")
    return bad("unknown symmetry '" + fields[2] + "'");
  parsed.symmetric = fields[2] == "sym";
  if (!parsed.symmetric && !isInteger(parsed.format))
    return bad("asymmetric quantization is for integer formats only");
  s = parsed;
  return true;
}

uint8_t encodeFp8(float value, Format format) { return fp8::codeOfValue(value, fp8KindOf(format)); }

float decodeFp8(uint8_t code, Format format) { return fp8::decode(code, fp8KindOf(format)); }

} // namespace llmc::quant
