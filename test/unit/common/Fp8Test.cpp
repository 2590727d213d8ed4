//===- Fp8Test.cpp - common/Fp8.h against PyTorch's fp8 casts -------------===//
//
// Every fp8 code, every tie between neighbouring codes and the fp32 values
// around them, overflow, infinities, NaN, zeros, fp32 subnormals and random
// fp32 bit patterns, in both formats, against the saturating casts recorded
// by test/reference/fp8_cast_table.py (torch.float8_e4m3fn / float8_e5m2,
// or ml_dtypes where torch predates them: clamp to ±max, then cast).
//
//===----------------------------------------------------------------------===//
#include "common/Fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

using namespace llmc;
using fp8::Kind;

namespace {

struct CastRecord {
  float x;
  uint8_t e4m3, e5m2;
};

std::vector<CastRecord> readTable() {
  std::ifstream in(LLMC_FP8_CAST_TABLE, std::ios::binary);
  char magic[8] = {};
  uint32_t count = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char *>(&count), 4);
  if (!in || std::memcmp(magic, "LLMCFP8", 8) != 0)
    return {};
  std::vector<CastRecord> records(count);
  for (CastRecord &r : records) {
    uint32_t bits;
    in.read(reinterpret_cast<char *>(&bits), 4);
    in.read(reinterpret_cast<char *>(&r.e4m3), 1);
    in.read(reinterpret_cast<char *>(&r.e5m2), 1);
    std::memcpy(&r.x, &bits, 4);
  }
  return in ? records : std::vector<CastRecord>{};
}

bool isNanCode(uint8_t code, Kind kind) {
  return kind == Kind::E4M3 ? (code & 0x7f) == 0x7f : (code & 0x7f) > 0x7c;
}

const char *nameOf(Kind kind) { return kind == Kind::E4M3 ? "e4m3" : "e5m2"; }

void checkAgainstTable(Kind kind) {
  std::vector<CastRecord> table = readTable();
  ASSERT_GT(table.size(), 60000u) << "cannot read " << LLMC_FP8_CAST_TABLE;
  int mismatches = 0;
  for (const CastRecord &r : table) {
    uint8_t expected = kind == Kind::E4M3 ? r.e4m3 : r.e5m2;
    uint8_t code = fp8::encode(r.x, kind);
    float value = fp8::round(r.x, kind);
    float expectedValue = fp8::decode(expected, kind);
    bool ok = isNanCode(expected, kind)
                  ? isNanCode(code, kind) && std::isnan(value)
                  : code == expected && std::memcmp(&value, &expectedValue, 4) == 0;
    if (!ok && ++mismatches <= 10)
      ADD_FAILURE() << nameOf(kind) << " of " << r.x << " (" << std::hexfloat << r.x
                    << std::defaultfloat << "): code " << int(code) << " value " << value
                    << ", PyTorch's cast gives code " << int(expected);
  }
  EXPECT_EQ(mismatches, 0);
}

} // namespace

TEST(Fp8, E4M3MatchesTheSaturatingCast) { checkAgainstTable(Kind::E4M3); }
TEST(Fp8, E5M2MatchesTheSaturatingCast) { checkAgainstTable(Kind::E5M2); }

TEST(Fp8, TableCoversEveryCodeAndEveryTie) {
  std::vector<CastRecord> table = readTable();
  for (Kind kind : {Kind::E4M3, Kind::E5M2}) {
    std::vector<bool> seen(256, false);
    for (const CastRecord &r : table) seen[kind == Kind::E4M3 ? r.e4m3 : r.e5m2] = true;
    for (int code = 0; code < 256; ++code) {
      float v = fp8::decode(static_cast<uint8_t>(code), kind);
      if (std::isfinite(v)) {
        EXPECT_TRUE(seen[code]) << nameOf(kind) << " code " << code;
      }
    }
    // Every tie between neighbouring positive codes is an input.
    int ties = 0;
    for (int code = 0; code + 1 < 128; ++code) {
      float lo = fp8::decode(static_cast<uint8_t>(code), kind);
      float hi = fp8::decode(static_cast<uint8_t>(code + 1), kind);
      if (!std::isfinite(hi))
        break;
      float mid = (lo + hi) / 2; // exact: at most mbits + 2 significant bits
      for (const CastRecord &r : table)
        if (r.x == mid) {
          ++ties;
          break;
        }
    }
    EXPECT_EQ(ties, kind == Kind::E4M3 ? 126 : 123) << nameOf(kind);
  }
}

TEST(Fp8, DecodeEncodeRoundTripsEveryCode) {
  for (Kind kind : {Kind::E4M3, Kind::E5M2})
    for (int code = 0; code < 256; ++code) {
      float v = fp8::decode(static_cast<uint8_t>(code), kind);
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(fp8::round(v, kind)));
      } else if (std::isinf(v)) {
        EXPECT_EQ(fp8::round(v, kind), std::copysign(fp8::maxOf(kind), v));
      } else {
        EXPECT_EQ(fp8::encode(v, kind), code) << nameOf(kind) << " code " << code;
        EXPECT_EQ(fp8::round(v, kind), v);
      }
    }
}

/// The branch-free decoder the fp8 KV cache widens codes with is decode,
/// bit for bit, for every E4M3 code (NaN: both NaN with the code's sign).
TEST(Fp8, DecodeE4M3IsDecodeBitForBit) {
  for (int code = 0; code < 256; ++code) {
    const float fast = fp8::decodeE4M3(static_cast<uint8_t>(code));
    const float exact = fp8::decode(static_cast<uint8_t>(code), Kind::E4M3);
    uint32_t a, b;
    std::memcpy(&a, &fast, 4);
    std::memcpy(&b, &exact, 4);
    EXPECT_EQ(a, b) << "code " << code;
  }
}

TEST(Fp8, SaturatesAndKeepsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fp8::round(1e30f, Kind::E4M3), 448.0f);
  EXPECT_EQ(fp8::round(-inf, Kind::E4M3), -448.0f);
  EXPECT_EQ(fp8::round(inf, Kind::E5M2), 57344.0f);
  EXPECT_EQ(fp8::round(-61440.0f, Kind::E5M2), -57344.0f); // the tie beyond max
  EXPECT_EQ(fp8::encode(464.0f, Kind::E4M3), 0x7e);        // not NaN (0x7f)
  EXPECT_TRUE(std::isnan(fp8::round(std::nanf(""), Kind::E4M3)));
  EXPECT_TRUE(std::isnan(fp8::decode(fp8::encode(std::nanf(""), Kind::E5M2), Kind::E5M2)));
  EXPECT_TRUE(std::isinf(fp8::decode(0xfc, Kind::E5M2)));
  // Subnormals: the least one, ties to even around it, and flush to zero.
  EXPECT_EQ(fp8::round(std::ldexp(1.0f, -9), Kind::E4M3), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8::round(std::ldexp(1.0f, -10), Kind::E4M3), 0.0f);            // tie → 0 (even)
  EXPECT_EQ(fp8::round(std::ldexp(3.0f, -10), Kind::E4M3), std::ldexp(1.0f, -8)); // tie → 2
  EXPECT_EQ(fp8::round(std::ldexp(1.0f, -17), Kind::E5M2), 0.0f);
  EXPECT_TRUE(std::signbit(fp8::round(-1e-30f, Kind::E5M2)));
}
