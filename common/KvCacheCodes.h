//===- KvCacheCodes.h - a quantized KV cache's codes and scales -*- C++ -*-===//
//
// A quantized paged KV cache (`llmc compile --inference ...,kv=int8|fp8`)
// stores the D values x of one token slot and kv head as one byte each
// with one fp32 scale, in fp32 (IEEE division, one rounding per
// operation):
//  - s = amax / codeMax, amax the largest |x| of the row, codeMax 127
//    (int8) or 448 (fp8_e4m3, the format's largest finite value), the
//    conventions of common/QuantScheme.h's symmetric schemes;
//  - s not > 0 (an all-zero row, or an amax so small that s underflows):
//    s = 0 and every code 0;
//  - int8:     code = clamp(round_even(x / s), −127, 127), a NaN x −127;
//  - fp8_e4m3: code = the E4M3 code of x / s rounded to nearest even and
//              saturated (common/Fp8.h's encode, the project's one fp8
//              rounding); a NaN stores the NaN code 0x7f whatever its sign
//              (CPUs and GPUs give NaNs of different signs);
//  - a code reads back as value(code) · s, value being the code's integer
//    (int8) or its E4M3 number (fp8_e4m3).
// The CPU and CUDA kernels and the double reference all call these, so
// the codes and scales agree bit for bit between them.
//
// The kernels take the code type as a template argument: int8_t, or
// Fp8E4M3Code, a byte holding an E4M3 code's bits (both one byte, so a
// pool of either is a u8 buffer read in place).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_KVCACHECODES_H
#define LLMC_COMMON_KVCACHECODES_H

#include "common/Fp8.h"
#include "common/HostDevice.h"
#include "common/QuantScheme.h"

#include <cstdint>
#include <type_traits>

namespace llmc::kvcache {

/// One fp8 E4M3 code of a cache pool: the code's bits.
struct Fp8E4M3Code {
  uint8_t bits;
};
static_assert(sizeof(Fp8E4M3Code) == 1, "a pool of codes is a u8 buffer");

/// What a code type means: its format (common/QuantScheme.h's number, the
/// kernels' `format` attribute), the code magnitude a row's amax maps to,
/// and its encoding and value.
template <typename Code> struct CodeFormat;

template <> struct CodeFormat<int8_t> {
  static constexpr quant::Format kFormat = quant::Format::Int8;
  static constexpr float kMax = 127.0f;
  /// x / s (s > 0) rounded to the nearest integer (ties to even),
  /// clamped to ±127; NaN gives −127.
  LLMC_HOST_DEVICE static int8_t encode(float x, float s) {
    const float q = fp8::roundHalfEven(x / s);
    return static_cast<int8_t>(fminf(fmaxf(q, -kMax), kMax));
  }
  LLMC_HOST_DEVICE static float value(int8_t code) { return static_cast<float>(code); }
};

template <> struct CodeFormat<Fp8E4M3Code> {
  static constexpr quant::Format kFormat = quant::Format::Fp8E4M3;
  static constexpr float kMax = fp8::maxOf(fp8::Kind::E4M3);
  /// x / s (s > 0) as its saturated E4M3 code; NaN gives 0x7f.
  LLMC_HOST_DEVICE static Fp8E4M3Code encode(float x, float s) {
    const uint8_t code = fp8::encode(x / s, fp8::Kind::E4M3);
    return {static_cast<uint8_t>((code & 0x7fu) == 0x7fu ? 0x7fu : code)};
  }
  LLMC_HOST_DEVICE static float value(Fp8E4M3Code code) { return fp8::decodeE4M3(code.bits); }
};

/// Whether `C` is a cache code type (else a float cache element).
template <typename C>
inline constexpr bool kIsCode = std::is_same_v<C, int8_t> || std::is_same_v<C, Fp8E4M3Code>;

/// The scale of a row whose largest magnitude is `amax`.
template <typename Code> LLMC_HOST_DEVICE inline float rowScale(float amax) {
  return amax / CodeFormat<Code>::kMax;
}

/// The code of `x` in a row of scale `s`; 0 when s is not > 0.
template <typename Code> LLMC_HOST_DEVICE inline Code encode(float x, float s) {
  return s > 0.0f ? CodeFormat<Code>::encode(x, s) : Code{0};
}

/// What `code` in a row of scale `s` reads as.
template <typename Code> LLMC_HOST_DEVICE inline float valueOf(Code code, float s) {
  return CodeFormat<Code>::value(code) * s;
}

/// The cache formats by name (`inference.kv`, `--inference ...,kv=`), as
/// common/QuantScheme.h's formatName spells them.
inline bool isCacheFormat(quant::Format f) {
  return f == quant::Format::Int8 || f == quant::Format::Fp8E4M3;
}

} // namespace llmc::kvcache

#endif
