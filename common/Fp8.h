//===- Fp8.h - E4M3 / E5M2 rounding, bit for bit on every backend -*- C++ -*-===//
//
// The one definition of fp8 rounding in llmc: QAT's fake quantization (CPU
// and CUDA kernels), `llmc quantize`'s stored fp8 codes, the fp8 matmuls
// and the fp8 KV cache (common/KvCacheCodes.h) all call these functions,
// so a value rounds to the same fp8 number everywhere.
//
// Formats (OCP 8-bit floating point, as `torch.float8_e4m3fn` and
// `torch.float8_e5m2`):
//  - E4M3 ("fn"): 3 mantissa bits, bias 7, least normal exponent −6,
//    largest finite 448, no infinities; S.1111.111 is NaN.
//  - E5M2: 2 mantissa bits, bias 15, least normal exponent −14, largest
//    finite 57344; IEEE-like infinities and NaNs.
//
// Conversion from fp32 is the "satfinite" cast of both formats: round to
// nearest, ties to the even mantissa (subnormals included), then any result
// beyond the largest finite value (infinities too) becomes ± that value; NaN
// stays NaN. This is what the hardware conversions Transformer Engine and
// cuBLASLt use do (`__nv_cvt_float_to_fp8(x, __NV_SATFINITE, …)`, which the
// `__nv_fp8_e4m3` / `__nv_fp8_e5m2` constructors call; PTX `cvt.satfinite`),
// and what torchao's `to_fp8_saturated` does (clamp to ±max, then cast).
// A scaled fp8 recipe chooses its scale so that amax maps to the largest
// value, so saturation only ever clips rounding noise; an infinity coming
// from a non-finite amax is caught before any cast (the step is skipped).
// PyTorch's bare cast differs only beyond the largest value: E4M3 overflows
// to NaN, E5M2 to inf — a clamp before it gives exactly these functions.
//
// Rounding is written on the bits: with |v| ∈ [2^e, 2^(e+1)) the format's
// step there is 2^s, s = max(e, emin) − mbits, and fp8(v) =
// rint(v · 2^−s) · 2^s. Both products are by powers of two inside fp32's
// normal range, hence exact; e is the exponent field − 127 (exact for
// normal v; fp32 subnormals and 0 give −127, below every fp8 emin, which is
// all that matters for them). No libm call, so CPU loops vectorise.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_FP8_H
#define LLMC_COMMON_FP8_H

#include "common/Half.h"
#include "common/HostDevice.h"

#include <array>
#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__F16C__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

namespace llmc::fp8 {

/// An fp8 format.
enum class Kind : int { E4M3 = 0, E5M2 = 1 };

/// A format's fields.
struct Spec {
  int mbits;  ///< mantissa bits
  int bias;   ///< exponent bias
  int emin;   ///< least normal exponent
  float max;  ///< largest finite value
};

LLMC_HOST_DEVICE constexpr Spec specOf(Kind kind) {
  return kind == Kind::E4M3 ? Spec{3, 7, -6, 448.0f} : Spec{2, 15, -14, 57344.0f};
}

/// Largest finite value of `kind` (448 / 57344).
LLMC_HOST_DEVICE constexpr float maxOf(Kind kind) { return specOf(kind).max; }

/// v clamped to [−max, max]; NaN stays NaN (both comparisons are false).
LLMC_HOST_DEVICE inline float saturate(float v, float max) {
  return v > max ? max : (v < -max ? -max : v);
}

/// 2^p for p in fp32's normal exponent range.
LLMC_HOST_DEVICE inline float powerOfTwo(int32_t p) {
  return half::floatOf(static_cast<uint32_t>(127 + p) << 23);
}

/// Round half to even (the default rounding mode's nearbyint).
LLMC_HOST_DEVICE inline float roundHalfEven(float v) {
#ifdef __CUDA_ARCH__
  return rintf(v);
#else
  return std::nearbyint(v);
#endif
}

/// v (|v| ≤ the format's max, or NaN) rounded to the grid of a format with
/// `mbits` mantissa bits and least normal exponent `emin`, ties to even.
LLMC_HOST_DEVICE inline float roundToGrid(float v, int32_t mbits, int32_t emin) {
  int32_t e = static_cast<int32_t>((half::bitsOf(v) >> 23) & 0xffu) - 127;
  int32_t s = (e > emin ? e : emin) - mbits;
  return roundHalfEven(v * powerOfTwo(-s)) * powerOfTwo(s);
}

/// The fp8 value of `kind` nearest v (the satfinite cast, see above), as
/// an fp32 (exact).
LLMC_HOST_DEVICE inline float round(float v, Kind kind) {
  Spec s = specOf(kind);
  return roundToGrid(saturate(v, s.max), s.mbits, s.emin);
}

/// The code of an fp32 that is an fp8 value of `kind` or NaN (what round
/// returns). NaN encodes as S.1111.111, which is NaN in both formats.
LLMC_HOST_DEVICE inline uint8_t codeOfValue(float value, Kind kind) {
  Spec s = specOf(kind);
  uint32_t bits = half::bitsOf(value);
  uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return static_cast<uint8_t>(sign | 0x7f);
  if (magnitude == 0)
    return sign;
  int32_t e = static_cast<int32_t>(magnitude >> 23) - 127;
  if (e < s.emin) { // subnormal: a multiple of 2^(emin − mbits), exact
    float units = half::floatOf(magnitude) * powerOfTwo(s.mbits - s.emin);
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(units));
  }
  uint32_t mantissa = (magnitude >> (23 - s.mbits)) & ((1u << s.mbits) - 1u);
  return static_cast<uint8_t>(sign | ((static_cast<uint32_t>(e + s.bias) << s.mbits) | mantissa));
}

/// The code of round(v, kind).
LLMC_HOST_DEVICE inline uint8_t encode(float v, Kind kind) {
  return codeOfValue(round(v, kind), kind);
}

/// The fp32 value of `code` (exact): E4M3's S.1111.111 and E5M2's
/// S.11111.mm (mm ≠ 0) are NaN, E5M2's S.11111.00 is ±inf.
LLMC_HOST_DEVICE inline float decode(uint8_t code, Kind kind) {
  Spec s = specOf(kind);
  uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  uint32_t field = (code & 0x7fu) >> s.mbits, mantissa = code & ((1u << s.mbits) - 1u);
  uint32_t topField = kind == Kind::E4M3 ? 15u : 31u;
  if (field == topField && (kind == Kind::E5M2 || mantissa == (1u << s.mbits) - 1u))
    return half::floatOf(sign | (mantissa == 0 ? 0x7f800000u : 0x7fc00000u));
  float magnitude =
      field == 0 ? static_cast<float>(mantissa) * powerOfTwo(s.emin - s.mbits)
                 : half::floatOf(
                       (static_cast<uint32_t>(static_cast<int32_t>(field) - s.bias + 127) << 23) |
                       (mantissa << (23 - s.mbits)));
  return half::floatOf(half::bitsOf(magnitude) | sign);
}

/// decode(code, Kind::E4M3), bit for bit, without branches, so that a loop
/// widening codes vectorises (the fp8 KV cache's reads): a normal code's
/// exponent field is rebased from bias 7 to fp32's 127 with its mantissa
/// moved to the top of fp32's; a subnormal's value is its mantissa · 2^−9
/// (exact); S.1111.111 is NaN.
LLMC_HOST_DEVICE inline float decodeE4M3(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t magnitude = code & 0x7fu;
  const uint32_t normal = (magnitude << 20) + (120u << 23);
  const uint32_t subnormal = half::bitsOf(static_cast<float>(magnitude) * 0x1p-9f);
  const uint32_t bits = magnitude == 0x7fu ? 0x7fc00000u : magnitude < 8u ? subnormal : normal;
  return half::floatOf(bits | sign);
}

/// Every code's value in `kind` (decode), for CPU loops that look codes up.
inline const float *values(Kind kind) {
  auto tableOf = [](Kind k) {
    std::array<float, 256> values{};
    for (int code = 0; code < 256; ++code) values[code] = decode(static_cast<uint8_t>(code), k);
    return values;
  };
  static const std::array<float, 256> e4m3 = tableOf(Kind::E4M3), e5m2 = tableOf(Kind::E5M2);
  return kind == Kind::E4M3 ? e4m3.data() : e5m2.data();
}

/// Every E4M3 code's value (decode).
inline const float *e4m3Values() { return values(Kind::E4M3); }

#if defined(__AVX2__) && defined(__F16C__) && !defined(__CUDACC__)
/// The f16 bits of 2^−8 · the value of 16 E4M3 codes held in 16-bit lanes:
/// a code's exponent and mantissa bits moved into an f16's (S.EEEE.MMM →
/// S.0EEEE.MMM0000000) are that f16 at 2^−8 of the E4M3 value, subnormals
/// included (the biases differ by 8), and vcvtph2ps widens an f16 exactly.
/// E4M3's NaN (S.1111.111) becomes ±480 · 2^−8: see e4m3HasNan.
inline __m256i e4m3ToF16(__m256i codes16) {
  const __m256i magnitude = _mm256_and_si256(codes16, _mm256_set1_epi16(0x7f));
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(codes16, _mm256_set1_epi16(0x80)), 8);
  return _mm256_or_si256(sign, _mm256_slli_epi16(magnitude, 7));
}

/// The 16-bit lanes of `codes16` holding E4M3's NaN code (all ones), or 0s.
inline __m256i e4m3NanLanes(__m256i codes16) {
  const __m256i magnitude = _mm256_and_si256(codes16, _mm256_set1_epi16(0x7f));
  return _mm256_cmpeq_epi16(magnitude, _mm256_set1_epi16(0x7f));
}

/// out[i] = decodeE4M3(codes[i]) · scale for 16 codes, bit for bit (one
/// fp32 product each), with AVX2 and F16C: the CPU kernels' targets; the
/// fp8 KV cache widens its tiles with it. Through e4m3ToF16, and 2^8 ·
/// scale is exact, so each product rounds once, as the scalar one does. A
/// NaN code sends the 16 to the scalar decoder.
inline void decodeE4M3x16(const uint8_t *codes, float scale, float *out) {
  const __m256i bytes =
      _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(codes)));
  const __m256i nan = e4m3NanLanes(bytes);
  if (!_mm256_testz_si256(nan, nan)) {
    for (int i = 0; i < 16; ++i) out[i] = decodeE4M3(codes[i]) * scale;
    return;
  }
  const __m256i f16 = e4m3ToF16(bytes);
  const __m256 s = _mm256_set1_ps(scale * 256.0f);
  _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(f16)), s));
  _mm256_storeu_ps(out + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(f16, 1)), s));
}
#endif

} // namespace llmc::fp8

#endif
