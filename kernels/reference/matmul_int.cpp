//===- matmul_int.cpp - int8/int4/fp8 weight expansion and product reference -===//
//
// The weight int8/int4/fp8 storage holds, element by element as
// docs/quantization.md defines it (float(level − zero point) · scale in
// fp32, an E4M3 code's value · scale, so it is exactly the stored value),
// and x · W through the double
// matmul reference: what kernels/cpu/matmul_int.cpp and
// kernels/cuda/matmul_int.cu compute without ever storing all of W.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

#include <cmath>
#include <limits>

namespace llmc::ref {

double e4m3Value(int64_t byte) {
  const double sign = (byte & 0x80) != 0 ? -1.0 : 1.0;
  const int64_t exponent = (byte >> 3) & 0x0F, mantissa = byte & 0x07;
  if (exponent == 15 && mantissa == 7)
    return std::numeric_limits<double>::quiet_NaN();
  if (exponent == 0) // subnormal: 2^-6 · m/8
    return sign * std::ldexp(static_cast<double>(mantissa), -9);
  return sign *
         std::ldexp(1.0 + static_cast<double>(mantissa) / 8.0, static_cast<int>(exponent) - 7);
}

RefTensor dequantizeInt(const RefTensor &codes, const RefTensor &scale, const RefTensor &zeroPoint,
                        const std::vector<int64_t> &shape, int bits, int64_t block,
                        int64_t channelAxis, bool fp8) {
  require(shape.size() == 2 && (bits == 8 || bits == 4), "dequantizeInt",
          "a 2-D weight of 8- or 4-bit codes");
  require(!fp8 || (bits == 8 && zeroPoint.data.empty()), "dequantizeInt",
          "fp8 codes are 8 bits each, without zero points");
  RefTensor w = RefTensor::zeros(shape);
  const int64_t n = w.numel(), cols = shape[1];
  require(block == 0 || (block > 0 && cols % block == 0), "dequantizeInt",
          "the block must divide the last dimension");
  const int64_t groups = block > 0 ? n / block : channelAxis >= 0 ? shape[channelAxis] : 1;
  require(codes.numel() == (bits == 8 ? n : (n + 1) / 2) && scale.numel() == groups &&
              (zeroPoint.data.empty() || zeroPoint.numel() == groups),
          "dequantizeInt", "storage sizes do not match the shape");
  for (int64_t i = 0; i < n; ++i) {
    int64_t g = block > 0 ? i / block
                : channelAxis == 0 ? i / cols
                : channelAxis == 1 ? i % cols
                                   : 0;
    int64_t byte = static_cast<int64_t>(codes.data[bits == 8 ? i : i / 2]) & 0xFF;
    if (fp8) {
      w.data[i] = static_cast<float>(e4m3Value(byte)) * static_cast<float>(scale.data[g]);
      continue;
    }
    int64_t level = bits == 8 ? (byte >= 128 ? byte - 256 : byte)
                              : (i % 2 == 0 ? byte & 0x0F : byte >> 4);
    if (bits == 4 && level >= 8) level -= 16;
    int64_t zp = zeroPoint.data.empty() ? 0 : static_cast<int64_t>(zeroPoint.data[g]);
    w.data[i] = static_cast<float>(level - zp) * static_cast<float>(scale.data[g]);
  }
  return w;
}

RefTensor matmulInt(const RefTensor &x, const RefTensor &codes, const RefTensor &scale,
                    const RefTensor &zeroPoint, const std::vector<int64_t> &weightShape, int bits,
                    int64_t block, int64_t channelAxis, bool transposeB, bool fp8) {
  require(!x.shape.empty() && weightShape.size() == 2, "matmulInt",
          "x must have rank >= 1 and the weight rank 2");
  RefTensor w = dequantizeInt(codes, scale, zeroPoint, weightShape, bits, block, channelAxis, fp8);
  return productWithWeight(x, w, transposeB);
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
// Without block or channel_axis the scale is per tensor.
LLMC_REGISTER_EVALUATOR("llm.matmul_int", [](const RefCall &c) -> Results {
  const RefTensor *zeroPoint = c.optional(3);
  return {matmulInt(c.in(0), c.in(1), c.in(2), zeroPoint ? *zeroPoint : RefTensor(),
                    c.array("weight_shape"), static_cast<int>(c.integer("bits")),
                    c.integer("block", 0), c.integer("channel_axis", -1), c.flag("transpose_b"),
                    c.flag("fp8"))};
});

} // namespace llmc::ref
