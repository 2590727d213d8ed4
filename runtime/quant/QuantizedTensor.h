//===- QuantizedTensor.h - a float tensor stored quantized ------*- C++ -*-===//
//
// Post-training quantization of one tensor into storage, and back. The
// arithmetic is the fake-quantization contract of common/QuantScheme.h
// with each group's range taken from the tensor itself (min/max), so
// dequantize(quantize(x)) is exactly what `qat.fake_quant` computes on x:
// a model evaluated from the stored form sees the values a fake-quantized
// one does. Standard library only (the runtime loads these files).
//
// Storage:
//  - codes: one per element, in row-major order.
//      int8:      one byte, the two's-complement int8 level (a U8 holding
//                 the bit pattern of the int8; asymmetric: q ∈ [−128, 127]
//                 before subtracting the zero point);
//      int4:      a 4-bit two's-complement level, two per byte, element 2k
//                 in the low nibble of byte k (an odd count pads a 0);
//      int3:      a 3-bit two's-complement level, element i in bits 3i ..
//                 3i + 2 of the codes read as one little-endian bit stream
//                 (bit b of the stream is bit b % 8 of byte b / 8; a code
//                 may straddle two bytes; the last byte pads 0s);
//      nf4:       the index 0..15 of the NF4 level, packed like int4;
//      fp8_e4m3 / fp8_e5m2: the fp8 bit pattern (e4m3: OCP "FN", bias 7;
//                 e5m2: bias 15), one byte.
//  - scales: one fp32 per group — scale for integer and fp8 formats (y =
//    level · scale), the group's absmax for nf4 (y = level · absmax). With
//    fp16 scales (ScaleFormat::F16, `llmc quantize --scale-dtype f16`, as
//    GGUF's Q4_0 and GPTQ checkpoints store theirs) each group's scale is
//    rounded to the nearest fp16 value (ties to even) before its codes are
//    chosen, and the codes are chosen against the rounded scale, so the
//    stored tensor is fake_quant(x) on that slightly moved grid (relative
//    change ≤ 2^−11; for asymmetric formats the zero point follows it); a
//    scale below fp16's smallest subnormal rounds to 0 and its group
//    dequantizes to 0 like an empty one. The file stores them as F16.
//  - zeroPoints: one int32 per group, asymmetric integer formats only
//    (y = (q − zero point) · scale).
//  - NF4 double quantization (QLoRA, Dettmers et al. 2023) replaces the
//    fp32 absmax of every group by 8 bits: the absmax values minus their
//    mean are quantized in blocks of 256 consecutive groups, each block
//    with one fp32 scale s = max |absmax − mean| / M, to an 8-bit level q
//    of (absmax − mean) / s (in fp32): int8 (M = 127, round to nearest,
//    ties to even, clamped to ±127) or OCP E4M3 (M = 448, QLoRA's 8-bit
//    floats: common/Fp8.h's rounding, nearest with ties to the even
//    mantissa, saturating); reconstructed absmax = q · s + mean. Codes are
//    then chosen against the reconstructed absmax, so the stored tensor is
//    still exactly fake_quant(x) with that absmax as the group's range. A
//    group whose reconstructed absmax is not > 0 dequantizes to 0, as an
//    empty range does.
//
// A group with an empty range (amax, or hi − lo, not > 0) stores scale 0,
// zero point 0 and code 0 (nf4: the 0 level), which dequantizes to 0.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_QUANT_QUANTIZEDTENSOR_H
#define LLMC_RUNTIME_QUANT_QUANTIZEDTENSOR_H

#include "common/QuantScheme.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::quant {

/// How NF4 stores each group's absmax: in fp32 (None), or double-quantized
/// to 8-bit levels, int8 or E4M3.
enum class DoubleQuant { None, Int8, Fp8E4M3 };

/// The level format of a double quantization (Int8 for None).
inline AbsmaxFormat absmaxFormatOf(DoubleQuant d) {
  return d == DoubleQuant::Fp8E4M3 ? AbsmaxFormat::Fp8E4M3 : AbsmaxFormat::Int8;
}
/// The double quantization to levels of `format`.
inline DoubleQuant doubleQuantOf(AbsmaxFormat format) {
  return format == AbsmaxFormat::Fp8E4M3 ? DoubleQuant::Fp8E4M3 : DoubleQuant::Int8;
}

/// How the per-group scales are stored: fp32, or rounded to fp16 values.
enum class ScaleFormat { F32, F16 };

/// What a quantized tensor stores beside its scheme's codes: NF4's double
/// quantization and the scales' format. Implicit from a DoubleQuant, as
/// most callers choose only that.
struct StorageFormat {
  DoubleQuant doubleQuant = DoubleQuant::None;
  ScaleFormat scales = ScaleFormat::F32;
  StorageFormat(DoubleQuant d = DoubleQuant::None, // NOLINT(google-explicit-constructor)
                ScaleFormat s = ScaleFormat::F32)
      : doubleQuant(d), scales(s) {}
};

struct QuantizedTensor {
  Scheme scheme;
  std::vector<int64_t> shape;
  std::vector<uint8_t> codes;
  std::vector<float> scales;        ///< per group; empty with double quantization
  ScaleFormat scaleFormat = ScaleFormat::F32; ///< F16: every scale an fp16 value, stored so
  std::vector<uint16_t> halfScales; ///< F16: the scales' fp16 bits (what the file holds)
  std::vector<int32_t> zeroPoints;  ///< per group; asymmetric only
  DoubleQuant doubleQuant = DoubleQuant::None;
  std::vector<uint8_t> absmaxCodes;  ///< per group, levels as doubleQuant says
  std::vector<float> absmaxScales;   ///< per block of kNf4DoubleQuantBlock groups
  float absmaxMean = 0.0f;

  bool doubleQuantized() const { return doubleQuant != DoubleQuant::None; }

  int64_t numel() const;
  int64_t groups() const;
  /// Bytes of every stored array (codes, scales, zero points, the double
  /// quantization's codes, scales and mean).
  int64_t storageBytes() const;
  /// 8 · storageBytes / numel.
  double bitsPerParameter() const;
};

/// Bits of one code (8, 4 or 3).
int codeBits(Format format);
/// Bytes of the codes of `numel` elements.
int64_t codeBytes(Format format, int64_t numel);

/// Quantizes x (row-major, `shape`) with `s`, each group's range its own
/// min/max, stored as `storage` says (its doubleQuant applies to nf4
/// only). Returns an empty error string, or why the scheme does not fit
/// (block not dividing the last dimension, channel axis out of range,
/// asymmetric non-integer format) or the storage does not (fp16 scales
/// with double quantization, a scale beyond fp16's range).
std::string quantize(const float *x, const std::vector<int64_t> &shape, const Scheme &s,
                     const StorageFormat &storage, QuantizedTensor &out);

/// Each group's range [−min, max] as qat.observe takes it (negMin[g] =
/// −min, max[g] = max over the group's elements).
void observeRanges(const float *x, const std::vector<int64_t> &shape, const Scheme &s,
                   std::vector<float> &negMin, std::vector<float> &max);

/// quantize() with each group's range given instead of observed (GPTQ
/// fixes a group's range before the values it stores are final): the
/// codes of x on each group's grid, clipped where x leaves the range.
std::string quantizeWithRanges(const float *x, const std::vector<int64_t> &shape, const Scheme &s,
                               const StorageFormat &storage, const std::vector<float> &negMin,
                               const std::vector<float> &max, QuantizedTensor &out);

/// One group's grid as quantize() derives it from the range: the scale
/// (nf4: the absmax), the zero point (asymmetric integers) and whether the
/// range is non-empty.
struct GroupGrid {
  float scale = 0.0f, zeroPoint = 0.0f;
  bool live = false;
};
GroupGrid groupGrid(const Scheme &s, float negMin, float max);
/// The code quantize() stores for x in a group with grid g (integers: the
/// signed level, before packing), and the value dequantize() reads back
/// from it: decodeValue(encodeValue(x)) is fake_quant(x) on that grid.
int encodeValue(float x, const Scheme &s, const GroupGrid &g);
float decodeValue(int code, const Scheme &s, const GroupGrid &g);

/// The fp32 values the stored tensor represents.
std::vector<float> dequantize(const QuantizedTensor &q);

/// Each group's absmax as stored: the fp32 scale of nf4, or the
/// reconstruction of the double-quantized one.
std::vector<float> nf4Absmax(const QuantizedTensor &q);

/// Empty, or why the arrays do not fit the scheme and shape (sizes; an
/// E4M3 absmax level that is NaN), for a tensor read from a file.
std::string validate(const QuantizedTensor &q);

/// The canonical spelling of a scheme: "int4:block64:sym",
/// "int8:channel1:asym", "nf4:tensor:sym"; a stacked scheme ends in
/// ":stacked" ("int8:channel1:sym:stacked": per expert and output channel).
std::string schemeString(const Scheme &s);
/// Parses a canonical scheme string (fields in that order; the channel
/// axis explicit). Returns false with `error` set.
bool parseSchemeString(const std::string &text, Scheme &s, std::string &error);

/// fp8 bit pattern of a value the format holds exactly, and back
/// (common/Fp8.h's codeOfValue and decode).
uint8_t encodeFp8(float value, Format format);
float decodeFp8(uint8_t code, Format format);

} // namespace llmc::quant

#endif
