//===- packed_nibbles_test.cpp - the repacked 4-bit decode copies ---------===//
//
// kernels/cpu/DecodeGemvPacked.h's cache of repacked copies, compiled as
// the CPU kernels are (x86-64-v3: the header's bodies use AVX2). The
// products over the copies are decode_gemv_test.cpp's.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/DecodeGemvPacked.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace llmc::cpu::decode {
namespace {

/// Kernels asking for the copy of the same codes (with the same body)
/// while one holds it get that copy; other codes or another body, another.
TEST(PackedNibbles, CopiesAreSharedWhileHeld) {
  std::vector<uint8_t> codes(17 * 64 / 2, 0x21), other(17 * 64 / 2, 0x21);
  std::vector<float> scales(17 * 2, 0.5f);
  const BlockScales ws{scales.data(), 1};
  auto first = PackedNibbles::shared(codes.data(), ws, 17, 64, CodeKind::Int4, DotIsa::Avx2);
  auto again = PackedNibbles::shared(codes.data(), ws, 17, 64, CodeKind::Int4, DotIsa::Avx2);
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ(first->groups(), 2);
  EXPECT_NE(first.get(),
            PackedNibbles::shared(other.data(), ws, 17, 64, CodeKind::Int4, DotIsa::Avx2).get());
  EXPECT_NE(first.get(),
            PackedNibbles::shared(codes.data(), ws, 17, 64, CodeKind::Nf4, DotIsa::Avx2).get());
  EXPECT_NE(
      first.get(),
      PackedNibbles::shared(codes.data(), ws, 17, 64, CodeKind::Int4, DotIsa::YmmVnniEvex).get());
}

/// Groups of sixteen rows, the last holding what remains.
TEST(PackedNibbles, GroupsCoverEveryRow) {
  std::vector<uint8_t> codes(33 * 32 / 2, 0x7f);
  std::vector<float> scales(33, 1.0f);
  const BlockScales ws{scales.data(), 1};
  EXPECT_EQ(PackedNibbles::shared(codes.data(), ws, 16, 32, CodeKind::Int4, DotIsa::Avx2)->groups(),
            1);
  EXPECT_EQ(PackedNibbles::shared(codes.data(), ws, 33, 32, CodeKind::Int4, DotIsa::Avx2)->groups(),
            3);
}

/// The copy holds its scales in fp16 exactly when every scale of W is an
/// fp16 value: one that is not (in any row, or NaN) keeps them in fp32.
TEST(PackedNibbles, ScalesAreHalvedOnlyWhenExact) {
  std::vector<uint8_t> codes(17 * 96 / 2, 0x35);
  std::vector<float> scales(17 * 3, 0.375f);
  auto copy = [&] {
    return PackedNibbles::shared(codes.data(), BlockScales{scales.data(), 1}, 17, 96,
                                 CodeKind::Int4, DotIsa::Avx2);
  };
  EXPECT_TRUE(copy()->halfScales());
  scales[16 * 3 + 2] = 0.1f; // not an fp16 value, in the last row's last block
  EXPECT_FALSE(copy()->halfScales());
  scales[16 * 3 + 2] = std::nanf("");
  EXPECT_FALSE(copy()->halfScales());
  // One scale for the whole weight (runs longer than a row).
  float one = 65504.0f;
  EXPECT_TRUE(PackedNibbles::shared(codes.data(), BlockScales{&one, 17 * 3}, 17, 96, CodeKind::Int4,
                                    DotIsa::Avx2)
                  ->halfScales());
  one = 65505.0f;
  EXPECT_FALSE(PackedNibbles::shared(codes.data(), BlockScales{&one, 17 * 3}, 17, 96,
                                     CodeKind::Int4, DotIsa::Avx2)
                   ->halfScales());
}

} // namespace
} // namespace llmc::cpu::decode
