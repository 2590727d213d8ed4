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
