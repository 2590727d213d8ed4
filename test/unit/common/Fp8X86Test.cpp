//===- Fp8X86Test.cpp - common/Fp8.h's AVX2 decoder -----------------------===//
//
// Built for the CPU kernels' target (x86-64-v3: AVX2, F16C), as the
// decoder's users are: fp8::decodeE4M3x16 gives fp8::decode's value times
// the scale, bit for bit, for every E4M3 code in every lane, at ordinary,
// tiny and huge scales; NaN codes (the scalar path) among finite ones.
//
//===----------------------------------------------------------------------===//
#include "common/Fp8.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

using namespace llmc;

namespace {

#if defined(__AVX2__) && defined(__F16C__)
uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

TEST(Fp8X86, DecodeE4M3x16IsTheScalarProductBitForBit) {
  // Each code in each lane (16 rotations of the 256 codes), at scales that
  // are not powers of two, one whose products fall among fp32's
  // subnormals and one whose 2^8 multiple is near fp32's largest.
  uint8_t codes[256 + 16];
  for (float scale : {1.0f, 0.37f, 3.1e-41f, 1.3e36f})
    for (int shift = 0; shift < 16; ++shift) {
      for (int i = 0; i < 256 + 16; ++i) codes[i] = static_cast<uint8_t>(i + shift);
      for (int at = 0; at < 256; at += 16) {
        float got[16];
        fp8::decodeE4M3x16(codes + at, scale, got);
        for (int lane = 0; lane < 16; ++lane) {
          const uint8_t code = codes[at + lane];
          EXPECT_EQ(bitsOf(got[lane]), bitsOf(fp8::decode(code, fp8::Kind::E4M3) * scale))
              << "code " << int(code) << " lane " << lane << " scale " << scale;
        }
      }
    }
}
#else
TEST(Fp8X86, DecodeE4M3x16IsTheScalarProductBitForBit) {
  GTEST_SKIP() << "built without AVX2 and F16C";
}
#endif

} // namespace
