//===- IntWeight.h - one element of an int8/int4/fp8-stored weight -*- C++ -*-===//
//
// The value `llm.matmul_int` reads for element i of a weight that `llmc
// quantize --scheme int8:... / int4:... / fp8_e4m3:...` stored
// (docs/quantization.md):
//
//   level = the element's signed code (int8: the byte as two's complement;
//           int4: its nibble, element 2k in the low nibble of byte k, as
//           4-bit two's complement)
//   y     = float(level − zero_point[g]) · scale[g]   (one fp32 product)
//
// with the zero point 0 for a symmetric scheme; an E4M3 code (OCP "FN",
// common/Fp8.h) is read as its exact fp32 value v, y = v · scale[g], and
// has no zero point. That is the arithmetic of
// runtime/quant/QuantizedTensor.cpp's dequantize(), so a weight expanded
// inside the product is, bit for bit, the weight an fp32 artifact loads
// from the same file.
//
// The group g of element i of a [rows, cols] weight: one group (tensor),
// i / block (blocks along the last dimension), i / cols (channel axis 0:
// one scale per row) or i % cols (channel axis 1: one per column). The
// first three are runs of consecutive elements; IntWeightLayout keeps the
// run length, or 0 for the per-column case.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_INTWEIGHT_H
#define LLMC_KERNELS_INTWEIGHT_H

#include "common/Fp8.h"
#include "common/HostDevice.h"

#include <cstdint>

namespace llmc {

struct IntWeightLayout {
  int bits = 8;        ///< 8 or 4
  bool fp8 = false;    ///< 8-bit codes that are E4M3 bit patterns, not integers
  int64_t run = 0;     ///< elements per group, consecutive; 0: one group per column
  int64_t cols = 1;    ///< the weight's last dimension
  bool asymmetric = false;

  /// The layout of a [rows, cols] weight with one scale for all of it
  /// (channelAxis < 0 and block 0), per channel of `channelAxis`, or per
  /// `block` elements of a row.
  static IntWeightLayout of(int bits, int64_t rows, int64_t cols, int64_t channelAxis,
                            int64_t block, bool asymmetric) {
    IntWeightLayout l;
    l.bits = bits;
    l.cols = cols;
    l.asymmetric = asymmetric;
    l.run = block > 0 ? block : channelAxis == 0 ? cols : channelAxis == 1 ? 0 : rows * cols;
    return l;
  }
  /// Groups (scales) of a [rows, cols] weight.
  int64_t groups(int64_t rows) const { return run > 0 ? rows * cols / run : cols; }
};

/// Bytes of the codes of `numel` elements of `bits` each.
LLMC_HOST_DEVICE inline int64_t intCodeBytes(int bits, int64_t numel) {
  return bits == 8 ? numel : (numel + 1) / 2;
}

/// The signed level of element i.
LLMC_HOST_DEVICE inline int intLevel(const uint8_t *codes, int bits, int64_t i) {
  if (bits == 8) return static_cast<int8_t>(codes[i]);
  const int nibble = (i % 2 == 0) ? (codes[i / 2] & 0x0F) : (codes[i / 2] >> 4);
  return nibble >= 8 ? nibble - 16 : nibble;
}

/// The group (scale index) of element i.
LLMC_HOST_DEVICE inline int64_t intGroup(const IntWeightLayout &l, int64_t i) {
  return l.run > 0 ? i / l.run : i % l.cols;
}

/// float(level − zero point) · scale, never fused with what follows.
LLMC_HOST_DEVICE inline float intDequantize(int level, int zeroPoint, float scale) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(static_cast<float>(level - zeroPoint), scale);
#else
  return static_cast<float>(level - zeroPoint) * scale;
#endif
}

/// An E4M3 code's value · scale, never fused with what follows.
LLMC_HOST_DEVICE inline float fp8Dequantize(uint8_t code, float scale) {
  const float value = fp8::decode(code, fp8::Kind::E4M3);
#ifdef __CUDA_ARCH__
  return __fmul_rn(value, scale);
#else
  return value * scale;
#endif
}

/// Element i of the weight (zeroPoints null when symmetric).
LLMC_HOST_DEVICE inline float intWeightElement(const uint8_t *codes, const float *scales,
                                               const int32_t *zeroPoints,
                                               const IntWeightLayout &l, int64_t i) {
  const int64_t g = intGroup(l, i);
  if (l.fp8)
    return fp8Dequantize(codes[i], scales[g]);
  return intDequantize(intLevel(codes, l.bits, i), zeroPoints ? zeroPoints[g] : 0, scales[g]);
}

} // namespace llmc

#endif
