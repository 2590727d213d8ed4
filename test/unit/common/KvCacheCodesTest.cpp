//===- KvCacheCodesTest.cpp - a quantized KV cache's codes and scales ----===//
//
// common/KvCacheCodes.h against its definition: the scale is amax over the
// format's top code, int8 codes round x / s to even and clamp, fp8 codes
// are fp8::encode of x / s (the one fp8 rounding), a NaN stores one code
// whatever its sign, and a code reads back as its value times s.
//
//===----------------------------------------------------------------------===//
#include "common/KvCacheCodes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

using namespace llmc;
using kvcache::Fp8E4M3Code;

namespace {

TEST(KvCacheCodes, ScaleMapsAmaxToTheTopCode) {
  EXPECT_EQ(kvcache::rowScale<int8_t>(254.0f), 2.0f);
  EXPECT_EQ(kvcache::rowScale<Fp8E4M3Code>(896.0f), 2.0f);
  EXPECT_EQ(kvcache::encode<int8_t>(254.0f, 2.0f), 127);
  EXPECT_EQ(kvcache::encode<Fp8E4M3Code>(896.0f, 2.0f).bits, 0x7e); // 448
  EXPECT_EQ(kvcache::encode<Fp8E4M3Code>(-896.0f, 2.0f).bits, 0xfe);
}

TEST(KvCacheCodes, Int8RoundsToEvenAndClamps) {
  EXPECT_EQ(kvcache::encode<int8_t>(2.5f, 1.0f), 2);
  EXPECT_EQ(kvcache::encode<int8_t>(3.5f, 1.0f), 4);
  EXPECT_EQ(kvcache::encode<int8_t>(-2.5f, 1.0f), -2);
  EXPECT_EQ(kvcache::encode<int8_t>(127.6f, 1.0f), 127); // amax / s can pass 127 by an ulp
  EXPECT_EQ(kvcache::encode<int8_t>(std::nanf(""), 1.0f), -127);
  EXPECT_EQ(kvcache::valueOf<int8_t>(-5, 0.25f), -1.25f);
}

TEST(KvCacheCodes, Fp8IsTheSharedRoundingOfXOverS) {
  // Every fp8 value, the ties between neighbours and values around them,
  // at a scale that is not a power of two.
  const float s = 0.37f;
  for (int code = 0; code < 256; ++code) {
    const float v = fp8::decode(static_cast<uint8_t>(code), fp8::Kind::E4M3);
    if (std::isnan(v))
      continue;
    for (float x : {v * s, std::nextafter(v * s, 0.0f), std::nextafter(v * s, 1e9f)}) {
      EXPECT_EQ(kvcache::encode<Fp8E4M3Code>(x, s).bits, fp8::encode(x / s, fp8::Kind::E4M3))
          << "x " << x;
      const Fp8E4M3Code c = kvcache::encode<Fp8E4M3Code>(x, s);
      EXPECT_EQ(kvcache::valueOf(c, s), fp8::decode(c.bits, fp8::Kind::E4M3) * s);
    }
  }
  EXPECT_EQ(kvcache::encode<Fp8E4M3Code>(1e6f, 1.0f).bits, 0x7e); // saturates, never NaN
}

TEST(KvCacheCodes, NaNStoresOneCodeAndZeroScaleStoresZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(kvcache::encode<Fp8E4M3Code>(nan, 1.0f).bits, 0x7f);
  EXPECT_EQ(kvcache::encode<Fp8E4M3Code>(-nan, 1.0f).bits, 0x7f);
  EXPECT_TRUE(std::isnan(kvcache::valueOf(Fp8E4M3Code{0x7f}, 1.0f)));
  EXPECT_EQ(kvcache::encode<Fp8E4M3Code>(3.0f, 0.0f).bits, 0);
  EXPECT_EQ(kvcache::encode<int8_t>(3.0f, 0.0f), 0);
}

} // namespace
