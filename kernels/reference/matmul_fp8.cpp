//===- matmul_fp8.cpp - fp8 GEMM operand and product references -----------===//
//
// qat_quantize_fp8 and qat_matmul_fp8 as their definition says: the scale
// amax / fmax in fp32 (as every fp8 path computes it), each value the
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

Fp8Operand quantizeFp8(const RefTensor &x, const RefTensor &range, quant::Format format) {
  require(range.shape == std::vector<int64_t>{1, 2}, "quantizeFp8", "range must be [1, 2]");
  float amax = std::max(static_cast<float>(range.data[0]), static_cast<float>(range.data[1]));
  float fmax = static_cast<float>(quant::fp8Max(format));
  float scale = amax / fmax;
  Fp8Operand out{RefTensor::zeros(x.shape), scale};
  if (!(amax > 0.0f))
    return out;
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = static_cast<float>(x.data[i]) / scale;
    out.values.data[i] = nearestFp8(std::clamp(v, -fmax, fmax), format);
  }
  return out;
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
  Fp8Operand q = quantizeFp8(c.in(0), c.in(1), c.scheme().format);
  return {q.values, RefTensor{{1}, {q.scale}}};
});
LLMC_REGISTER_EVALUATOR("qat.matmul_fp8", [](const RefCall &c) -> Results {
  return {matmulFp8({c.in(0), c.scalar(1)}, {c.in(2), c.scalar(3)}, c.flag("transpose_a"),
                    c.flag("transpose_b"))};
});

} // namespace llmc::ref
