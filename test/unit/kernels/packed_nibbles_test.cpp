//===- packed_nibbles_test.cpp - the repacked 4-bit decode copies ---------===//
//
// kernels/cpu/DecodeGemvPacked.h's cache of repacked copies, compiled as
// the CPU kernels are (x86-64-v3: the header's bodies use AVX2). The
// products over the copies are decode_gemv_test.cpp's.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/DecodeGemvPacked.h"

#include <gtest/gtest.h>

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

} // namespace
} // namespace llmc::cpu::decode
