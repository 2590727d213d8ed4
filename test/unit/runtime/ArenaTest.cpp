//===- ArenaTest.cpp - the arena refuses what memory cannot hold -----------===//

#include "runtime/Arena.h"

#include "TestUtil.h"

using namespace llmc;

TEST(Arena, RefusesMoreThanTheMachineHasOrHasAvailable) {
  const size_t gib = size_t(1) << 30;
  EXPECT_EQ(arenaMemoryShortfall(2 * gib, 8 * gib, 16 * gib), "");
  // Unknown (0) says nothing.
  EXPECT_EQ(arenaMemoryShortfall(2 * gib, 0, 0), "");
  EXPECT_NE(arenaMemoryShortfall(32 * gib, 8 * gib, 16 * gib)
                .find("is larger than this machine's 17179869184 bytes of memory"),
            std::string::npos);
  std::string why = arenaMemoryShortfall(12 * gib, 8 * gib, 16 * gib);
  EXPECT_NE(why.find("the plan's arena of 12884901888 bytes (12.00 GiB) is more than the memory "
                     "available on this machine now (8.00 GiB of 16.00 GiB)"),
            std::string::npos)
      << why;
}

TEST(Arena, AllocatesAndFillsWithThePattern) {
  Arena arena(10000);
  EXPECT_EQ(arena.size(), 10000u);
  EXPECT_EQ(arena.base()[9999], Arena::kPattern);
  EXPECT_EQ(arena.highWaterMark(), 0u);
  EXPECT_RUNTIME_ERROR(Arena(size_t(1) << 62), "is larger than this machine's");
}

TEST(Arena, ReadsPlacedRangesFromOutside) {
  Arena arena(3 * 4096);
  std::vector<uint8_t> file(8192, 7);
  arena.placeOutside(4096, 4096, file.data());
  EXPECT_EQ(arena.outside(4096, 4096), file.data());
  EXPECT_EQ(arena.outside(4096 + 100, 16), file.data() + 100); // a view inside it
  EXPECT_EQ(arena.outside(0, 4096), nullptr);
  EXPECT_EQ(arena.outside(8192, 100), nullptr);
  EXPECT_EQ(arena.bytesOutside(), 4096u);
  // The arena's own bytes around the range are untouched.
  EXPECT_EQ(arena.base()[4095], Arena::kPattern);
  EXPECT_EQ(arena.base()[8192], Arena::kPattern);
}

TEST(Arena, RefusesRangesThatStraddleOrOverlap) {
  Arena arena(3 * 4096);
  std::vector<uint8_t> file(4096);
  arena.placeOutside(4096, 1000, file.data());
  EXPECT_RUNTIME_ERROR(arena.outside(4000, 200), "cover part of the range at 4096");
  EXPECT_RUNTIME_ERROR(arena.outside(5000, 200), "cover part of the range [4096, 5096)");
  EXPECT_RUNTIME_ERROR(arena.placeOutside(5000, 10, file.data()), "overlap a range placed");
  EXPECT_RUNTIME_ERROR(arena.placeOutside(4000, 100, file.data()), "overlap a range placed");
  EXPECT_RUNTIME_ERROR(arena.placeOutside(12000, 1000, file.data()), "the arena holds 12288");
}

TEST(Arena, LeavesTheZeroPrefixUntouched) {
  Arena arena(3 * 4096, 4096 + 10);
  EXPECT_EQ(arena.base()[0], 0);
  EXPECT_EQ(arena.base()[4096 + 9], 0);
  EXPECT_EQ(arena.base()[4096 + 10], Arena::kPattern);
  EXPECT_EQ(arena.highWaterMark(), 4096u + 10);
}
