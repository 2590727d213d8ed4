//===- Half.h - IEEE binary16 <-> fp32, bit for bit on every backend -*- C++ -*-===//
//
// The f16 conversions of the `cast` kernel, written on the bits (not with
// compiler or __half intrinsics) so the CPU and CUDA backends produce the
// same bits, NaN payloads and subnormals included. Widening is exact;
// narrowing rounds to nearest even (after F. Giesen's
// float_to_half_fast3_rtne). The only float operations are one product by
// a power of two and one sum, which no compiler can contract or reorder.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_HALF_H
#define LLMC_COMMON_HALF_H

#include "common/HostDevice.h"

#include <cstdint>
#include <cstring>

namespace llmc::half {

LLMC_HOST_DEVICE inline uint32_t bitsOf(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

LLMC_HOST_DEVICE inline float floatOf(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

/// The fp32 value of f16 bits `h` (exact).
LLMC_HOST_DEVICE inline float toFloat(uint16_t h16) {
  uint32_t h = h16;
  uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) { // zero or subnormal: mantissa · 2^-24, exact in fp32
    float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return floatOf(bitsOf(v) | sign);
  }
  if (exponent == 31) return floatOf(sign | 0x7f800000u | (mantissa << 13)); // inf / NaN
  return floatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/// `value` rounded to the nearest f16 (ties to even); NaN stays NaN.
LLMC_HOST_DEVICE inline uint16_t fromFloat(float value) {
  uint32_t u = bitsOf(value), sign = u & 0x80000000u;
  u ^= sign;
  uint16_t h;
  if (u >= (143u << 23)) { // >= 65536 (rounds to inf), inf or NaN
    h = u > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (u < (113u << 23)) { // below 2^-14: subnormal or zero
    constexpr uint32_t magic = ((127 - 15) + (23 - 10) + 1) << 23;
    h = static_cast<uint16_t>(bitsOf(floatOf(u) + floatOf(magic)) - magic);
  } else {
    uint32_t odd = (u >> 13) & 1u;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;
    h = static_cast<uint16_t>(u >> 13);
  }
  return static_cast<uint16_t>(h | (sign >> 16));
}

} // namespace llmc::half

#endif
