//===- fake_quant.cpp - quantization-aware training references ------------===//
//
// qat_observe, qat_fake_quant, qat_fake_quant_grad and qat_ema, written
// from common/QuantScheme.h, not from the kernels, and as plainly as
// possible: an element's group comes from its multi-index, fp8 rounding picks
// the nearest of the values the format's 256 bit patterns decode to, NF4
// scans its 16 levels. Only what the contract fixes in fp32 (scale, zero
// point, x / scale, the final level · scale) is computed in float, so that a
// rounding tie is decided on the same fp32 value the kernels see.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

namespace {

/// Aborts unless the groups of `s` fit a tensor of `shape` (as the kernels'
/// factories check).
void requireScheme(const std::vector<int64_t> &shape, const quant::Scheme &s, const char *fn) {
  require(!shape.empty(), fn, "x must have rank >= 1");
  int64_t rank = static_cast<int64_t>(shape.size());
  if (s.granularity == quant::Granularity::Channel)
    require(s.axis >= 0 && s.axis < rank, fn, "channel axis out of range");
  if (s.granularity == quant::Granularity::Block)
    require(s.block > 0 && shape.back() % s.block == 0, fn,
            "block must be positive and divide the last dim");
}

/// The number of groups of `s` on a tensor of `shape`.
int64_t quantGroupCount(const std::vector<int64_t> &shape, const quant::Scheme &s) {
  switch (s.granularity) {
  case quant::Granularity::Tensor: return 1;
  case quant::Granularity::Channel: return shape[s.axis];
  case quant::Granularity::Block: return product(shape) / s.block;
  }
  return 0;
}

/// The group of every element, in row-major order, from its multi-index:
/// its channel index, or its row and block within the row.
std::vector<int64_t> quantGroups(const std::vector<int64_t> &shape, const quant::Scheme &s) {
  std::vector<int64_t> groups;
  int64_t blocksPerRow = s.block > 0 ? shape.back() / s.block : 0;
  forEachIndex(shape, [&](const std::vector<int64_t> &index) {
    switch (s.granularity) {
    case quant::Granularity::Tensor: groups.push_back(0); break;
    case quant::Granularity::Channel: groups.push_back(index[s.axis]); break;
    case quant::Granularity::Block: {
      int64_t row = 0;
      for (size_t d = 0; d + 1 < shape.size(); ++d) row = row * shape[d] + index[d];
      groups.push_back(row * blocksPerRow + index.back() / s.block);
      break;
    }
    }
  });
  return groups;
}

void requireRange(const RefTensor &range, const RefTensor &x, const quant::Scheme &s,
                  const char *fn) {
  require(range.shape == std::vector<int64_t>{quantGroupCount(x.shape, s), 2}, fn,
          "range must be [G, 2] for the scheme's G");
}

/// A finite value of an fp8 format and its mantissa field.
struct Fp8Value {
  double value;
  int mantissa;
};

/// Every finite value of an fp8 format, decoded from all 256 bit patterns:
/// e4m3 is the OCP "FN" variant (bias 7, no infinities, S.1111.111 is NaN),
/// e5m2 is IEEE-like (bias 15, exponent field 31 is inf/NaN).
std::vector<Fp8Value> decodeFp8(quant::Format format) {
  bool e4m3 = format == quant::Format::Fp8E4M3;
  int exponentBits = e4m3 ? 4 : 5, mantissaBits = 7 - exponentBits, bias = e4m3 ? 7 : 15;
  int exponentAll = (1 << exponentBits) - 1, mantissaAll = (1 << mantissaBits) - 1;
  std::vector<Fp8Value> values;
  for (int code = 0; code < 256; ++code) {
    bool negative = (code >> 7) != 0;
    int exponent = (code >> mantissaBits) & exponentAll, mantissa = code & mantissaAll;
    if (e4m3 ? (exponent == exponentAll && mantissa == mantissaAll) : exponent == exponentAll)
      continue;
    double magnitude = exponent == 0 ? mantissa * std::pow(2.0, 1 - bias - mantissaBits)
                                     : (1.0 + mantissa / std::pow(2.0, mantissaBits)) *
                                           std::pow(2.0, exponent - bias);
    values.push_back({negative ? -magnitude : magnitude, mantissa});
  }
  return values;
}

} // namespace

/// The value of `format` nearest v; of two at the same distance, the one
/// whose mantissa field is even.
double nearestFp8(float v, quant::Format format) {
  static const std::vector<Fp8Value> e4m3 = decodeFp8(quant::Format::Fp8E4M3);
  static const std::vector<Fp8Value> e5m2 = decodeFp8(quant::Format::Fp8E5M2);
  const std::vector<Fp8Value> &values = format == quant::Format::Fp8E4M3 ? e4m3 : e5m2;
  if (std::isnan(v)) return v;
  const Fp8Value *best = nullptr;
  double bestDistance = std::numeric_limits<double>::infinity();
  for (const Fp8Value &candidate : values) {
    double distance = std::abs(static_cast<double>(v) - candidate.value);
    bool tieWinner = distance == bestDistance && candidate.mantissa % 2 == 0;
    if (distance < bestDistance || tieWinner) {
      best = &candidate;
      bestDistance = distance;
    }
  }
  return best->value;
}

namespace {

/// The NF4 level nearest c; of two at the same distance, the lower.
double nearestNf4(float c) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::abs(static_cast<double>(c) - quant::kNf4Levels[i]) <
        std::abs(static_cast<double>(c) - quant::kNf4Levels[best]))
      best = i;
  return quant::kNf4Levels[best];
}

/// Quantize-dequantize of one element with its group's range
/// [negMin, max] = [−min, max]: the fp32 result and whether x was clipped.
struct Quantized {
  float y;
  bool clipped;
};

Quantized quantizeOne(float x, float negMin, float max, const quant::Scheme &s) {
  if (!s.symmetric) {
    float qmax = static_cast<float>(quant::integerMax(s.format)), qmin = -(qmax + 1.0f);
    float lo = std::min(-negMin, 0.0f), hi = std::max(max, 0.0f);
    if (!(hi - lo > 0.0f)) return {0.0f, x != 0.0f};
    float scale = (hi - lo) / (qmax - qmin);
    float zeroPoint = std::min(std::max(std::nearbyint(qmin - lo / scale), qmin), qmax);
    float q = std::nearbyint(x / scale) + zeroPoint;
    float kept = std::min(std::max(q, qmin), qmax);
    return {(kept - zeroPoint) * scale, q < qmin || q > qmax};
  }
  float amax = std::max(negMin, max);
  if (!(amax > 0.0f)) return {0.0f, x != 0.0f};
  switch (s.format) {
  case quant::Format::Int8:
  case quant::Format::Int4:
  case quant::Format::Int3: {
    float qmax = static_cast<float>(quant::integerMax(s.format));
    float scale = amax / qmax;
    float q = std::nearbyint(x / scale);
    float kept = std::min(std::max(q, -qmax), qmax);
    return {kept * scale, std::abs(q) > qmax};
  }
  case quant::Format::Fp8E4M3:
  case quant::Format::Fp8E5M2: {
    float fmax = static_cast<float>(quant::fp8Max(s.format));
    float scale = amax / fmax;
    float v = x / scale;
    float kept = std::min(std::max(v, -fmax), fmax);
    return {static_cast<float>(nearestFp8(kept, s.format)) * scale, std::abs(x) > amax};
  }
  case quant::Format::Nf4: {
    float v = x / amax;
    float kept = std::min(std::max(v, -1.0f), 1.0f);
    return {static_cast<float>(nearestNf4(kept)) * amax, std::abs(v) > 1.0f};
  }
  }
  fail("fakeQuant", "unknown format");
}

/// Whether each element of x lies in an outlier column of `s` (all false
/// without a threshold): its last index c has max(columns[c]) > threshold.
std::vector<bool> outlierElements(const RefTensor &x, const quant::Scheme &s,
                                  const RefTensor *columns, const char *fn) {
  std::vector<bool> outlier;
  require((s.outlier > 0) == (columns != nullptr), fn,
          "columns must be given exactly when the scheme has an outlier threshold");
  require(std::isfinite(s.outlier) && s.outlier >= 0, fn, "outlier threshold must be >= 0");
  if (columns) {
    require(quant::isInteger(s.format) && s.granularity != quant::Granularity::Block, fn,
            "outlier columns need an integer format and tensor or channel granularity");
    require(columns->shape == std::vector<int64_t>{x.shape.back(), 2}, fn,
            "columns must be [C, 2] for x's last dimension C");
  }
  forEachIndex(x.shape, [&](const std::vector<int64_t> &index) {
    if (!columns) {
      outlier.push_back(false);
      return;
    }
    // Read as fp32, as the kernels hold them.
    float negMin = static_cast<float>(columns->data[2 * index.back()]);
    float max = static_cast<float>(columns->data[2 * index.back() + 1]);
    outlier.push_back(static_cast<double>(std::max(negMin, max)) > s.outlier);
  });
  return outlier;
}

/// quantizeOne for every element of x.
std::vector<Quantized> quantizeAll(const RefTensor &x, const RefTensor &range,
                                   const quant::Scheme &s) {
  std::vector<int64_t> groups = quantGroups(x.shape, s);
  std::vector<Quantized> out;
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t g = groups[i];
    float negMin = static_cast<float>(range.data[2 * g]);
    float max = static_cast<float>(range.data[2 * g + 1]);
    out.push_back(quantizeOne(static_cast<float>(x.data[i]), negMin, max, s));
  }
  return out;
}

} // namespace

RefTensor quantObserve(const RefTensor &x, const quant::Scheme &s, const RefTensor *columns) {
  requireScheme(x.shape, s, "quantObserve");
  std::vector<bool> outlier = outlierElements(x, s, columns, "quantObserve");
  int64_t groupCount = quantGroupCount(x.shape, s);
  RefTensor range = RefTensor::zeros({groupCount, 2});
  std::fill(range.data.begin(), range.data.end(), -std::numeric_limits<double>::infinity());
  std::vector<int64_t> groups = quantGroups(x.shape, s);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (outlier[i]) continue;
    double &negMin = range.data[2 * groups[i]], &max = range.data[2 * groups[i] + 1];
    negMin = std::max(negMin, -x.data[i]);
    max = std::max(max, x.data[i]);
  }
  return range;
}

RefTensor fakeQuant(const RefTensor &x, const RefTensor &range, const quant::Scheme &s,
                    const RefTensor *columns) {
  requireScheme(x.shape, s, "fakeQuant");
  requireRange(range, x, s, "fakeQuant");
  require(s.symmetric || quant::isInteger(s.format), "fakeQuant",
          "asymmetric quantization is for integer formats only");
  std::vector<bool> outlier = outlierElements(x, s, columns, "fakeQuant");
  std::vector<Quantized> q = quantizeAll(x, range, s);
  RefTensor y = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) y.data[i] = outlier[i] ? x.data[i] : q[i].y;
  return y;
}

RefTensor fakeQuantGrad(const RefTensor &x, const RefTensor &range, const RefTensor &dy,
                        const quant::Scheme &s, const RefTensor *columns) {
  requireScheme(x.shape, s, "fakeQuantGrad");
  requireRange(range, x, s, "fakeQuantGrad");
  require(s.symmetric || quant::isInteger(s.format), "fakeQuantGrad",
          "asymmetric quantization is for integer formats only");
  require(dy.shape == x.shape, "fakeQuantGrad", "dy must have x's shape");
  std::vector<bool> outlier = outlierElements(x, s, columns, "fakeQuantGrad");
  std::vector<Quantized> q = quantizeAll(x, range, s);
  RefTensor dx = like(x);
  for (int64_t i = 0; i < x.numel(); ++i)
    dx.data[i] = q[i].clipped && !outlier[i] ? 0.0 : dy.data[i];
  return dx;
}

RefTensor quantEma(const RefTensor &state, const RefTensor &observed, double momentum) {
  require(state.shape.size() == 2 && state.shape[1] == 2, "quantEma", "state must be [G, 2]");
  require(observed.shape == state.shape, "quantEma", "observed must have state's shape");
  RefTensor out = like(state);
  for (int64_t g = 0; g < state.shape[0]; ++g) {
    bool neverObserved = state.data[2 * g] == 0.0 && state.data[2 * g + 1] == 0.0;
    for (int64_t j = 2 * g; j < 2 * g + 2; ++j)
      out.data[j] = neverObserved ? observed.data[j]
                                  : momentum * state.data[j] + (1.0 - momentum) * observed.data[j];
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
// The qat ops: x, [range, [dy,]] columns?; the scheme as the kernels read it.
LLMC_REGISTER_EVALUATOR("qat.observe", [](const RefCall &c) -> Results {
  return {quantObserve(c.in(0), c.scheme(), c.optional(1))};
});
LLMC_REGISTER_EVALUATOR("qat.fake_quant", [](const RefCall &c) -> Results {
  return {fakeQuant(c.in(0), c.in(1), c.scheme(), c.optional(2))};
});
LLMC_REGISTER_EVALUATOR("qat.fake_quant_grad", [](const RefCall &c) -> Results {
  return {fakeQuantGrad(c.in(0), c.in(1), c.in(2), c.scheme(), c.optional(3))};
});
LLMC_REGISTER_EVALUATOR("qat.ema", [](const RefCall &c) -> Results {
  return {quantEma(c.in(0), c.in(1), c.real("momentum"))};
});
// The identity forward (its backward is observe + fake_quant of dy).
LLMC_REGISTER_EVALUATOR("qat.quantize_grad", [](const RefCall &c) -> Results { return {c.in(0)}; });

} // namespace llmc::ref
