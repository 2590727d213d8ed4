//===- matmul_fp8.cpp - fp8 GEMM operand and product references -----------===//
//
// qat_quantize_fp8 and qat_matmul_fp8 as their definition says: the scale
// amax / fmax in fp32 (as every fp8 path computes it; one per slice of
// dimension 0 where the range has a row per slice), each value the
// nearest fp8 number by a search over the format's decoded values
// (fake_quant.cpp's nearestFp8), and the product a plain double matmul of
// those values scaled once. The codes themselves are represented by their
// values, which is what both kernels' codes decode to.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace llmc::ref {

Fp8Slices quantizeFp8Slices(const RefTensor &x, const RefTensor &range, quant::Format format) {
  require(range.shape.size() == 2 && range.shape[1] == 2, "quantizeFp8", "range must be [G, 2]");
  const int64_t groups = range.shape[0];
  require(groups == 1 || (!x.shape.empty() && x.shape[0] == groups), "quantizeFp8",
          "range must have one row, or one per slice of x's dimension 0");
  const float fmax = static_cast<float>(quant::fp8Max(format));
  Fp8Slices out{RefTensor::zeros(x.shape), {}};
  const int64_t slice = groups == 0 ? 0 : x.numel() / groups;
  for (int64_t g = 0; g < groups; ++g) {
    float amax =
        std::max(static_cast<float>(range.data[2 * g]), static_cast<float>(range.data[2 * g + 1]));
    float scale = amax / fmax;
    out.scales.push_back(scale);
    if (!(amax > 0.0f))
      continue;
    for (int64_t i = g * slice; i < (g + 1) * slice; ++i) {
      float v = static_cast<float>(x.data[i]) / scale;
      out.values.data[i] = nearestFp8(std::clamp(v, -fmax, fmax), format);
    }
  }
  return out;
}

Fp8Slices quantizeFp8RowGroups(const RefTensor &x, const RefTensor &range, const RefTensor &offsets,
                               quant::Format format) {
  require(x.shape.size() == 2, "quantizeFp8", "rows in groups must be [M, K]");
  const int64_t groups = static_cast<int64_t>(offsets.data.size()) - 1, k = x.shape[1];
  require(range.shape == std::vector<int64_t>{groups, 2}, "quantizeFp8",
          "range must be [G, 2] for G groups of rows");
  Fp8Slices out{RefTensor::zeros(x.shape), {}};
  for (int64_t g = 0; g < groups; ++g) {
    auto [begin, end] = groupRows(offsets, g, x.shape[0], "quantizeFp8");
    RefTensor rows = RefTensor::zeros({end - begin, k});
    std::copy(x.data.begin() + begin * k, x.data.begin() + end * k, rows.data.begin());
    RefTensor groupRange{{1, 2}, {range.data[2 * g], range.data[2 * g + 1]}};
    Fp8Slices q = quantizeFp8Slices(rows, groupRange, format);
    std::copy(q.values.data.begin(), q.values.data.end(), out.values.data.begin() + begin * k);
    out.scales.push_back(q.scales[0]);
  }
  return out;
}

Fp8Operand quantizeFp8(const RefTensor &x, const RefTensor &range, quant::Format format) {
  require(range.shape == std::vector<int64_t>{1, 2}, "quantizeFp8", "range must be [1, 2]");
  Fp8Slices q = quantizeFp8Slices(x, range, format);
  return {q.values, q.scales[0]};
}

double e5m2Value(int64_t byte) {
  const double sign = (byte & 0x80) != 0 ? -1.0 : 1.0;
  const int64_t exponent = (byte >> 2) & 0x1F, mantissa = byte & 0x03;
  if (exponent == 31)
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  if (exponent == 0) // subnormal: 2^-14 · m/4
    return sign * std::ldexp(static_cast<double>(mantissa), -16);
  return sign *
         std::ldexp(1.0 + static_cast<double>(mantissa) / 4.0, static_cast<int>(exponent) - 15);
}

RefTensor matmulFp8(const Fp8Operand &a, const Fp8Operand &b, bool transposeA, bool transposeB) {
  RefTensor c = matmul(a.values, b.values, transposeA, transposeB);
  for (double &v : c.data) v *= a.scale * b.scale;
  return c;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
// The codes are held as their values; the scale as a one-element tensor.
LLMC_REGISTER_EVALUATOR("qat.quantize_fp8", [](const RefCall &c) -> Results {
  const RefTensor *offsets = c.optional(2);
  Fp8Slices q = offsets ? quantizeFp8RowGroups(c.in(0), c.in(1), *offsets, c.scheme().format)
                        : quantizeFp8Slices(c.in(0), c.in(1), c.scheme().format);
  const int64_t groups = static_cast<int64_t>(q.scales.size());
  return {q.values, RefTensor{{groups}, q.scales}};
});
LLMC_REGISTER_EVALUATOR("qat.matmul_fp8", [](const RefCall &c) -> Results {
  return {matmulFp8({c.in(0), c.scalar(1)}, {c.in(2), c.scalar(3)}, c.flag("transpose_a"),
                    c.flag("transpose_b"))};
});

} // namespace llmc::ref
