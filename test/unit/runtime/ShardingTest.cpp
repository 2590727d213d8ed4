//===- ShardingTest.cpp - where a rank's piece sits, padded or not --------===//

#include "runtime/Sharding.h"

#include <gtest/gtest.h>

#include <set>

namespace llmc {
namespace {

ShardInfo rows(std::vector<int64_t> global, std::vector<std::string> axes) {
  ShardInfo info;
  info.globalShape = std::move(global);
  info.levels.push_back({std::move(axes), 0, 1});
  return info;
}

// 10 rows over 4 ranks: every piece holds ceil(10/4) = 3 rows; ranks 0-2
// hold rows 0-8, rank 3 row 9 and two rows of padding.
TEST(ShardMap, PadsASplitTheRanksDoNotDivide) {
  Mesh mesh{{"dp", 4}};
  ShardMap map(rows({10, 2}, {"dp"}), {3, 2}, mesh);
  EXPECT_EQ(map.localShape(), (std::vector<int64_t>{3, 2}));
  std::set<int64_t> seen;
  int padding = 0;
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<int> at = map.positions(rank);
    for (int64_t i = 0; i < map.localNumel(); ++i) {
      int64_t g = map.toGlobal(at, i);
      if (g < 0) {
        ++padding;
        EXPECT_EQ(rank, 3) << "only the last piece is padded";
        continue;
      }
      EXPECT_TRUE(seen.insert(g).second) << "element " << g << " held twice";
      std::vector<int> owner;
      int64_t local = -1;
      map.fromGlobal(g, owner, local);
      EXPECT_EQ(owner, at);
      EXPECT_EQ(local, i);
    }
  }
  EXPECT_EQ(seen.size(), 20u);
  EXPECT_EQ(padding, 4);
}

// A padded split after an even one, as ZeRO pads a tensor-parallel shard:
// 6 rows over tp=2 (3 each), then those over dp=2 (ceil(3/2) = 2 rows, the
// second dp rank's second row padding).
TEST(ShardMap, PadsTheSecondLevelOfTwo) {
  Mesh mesh{{"dp", 2}, {"tp", 2}};
  ShardInfo info = rows({6, 5}, {"tp"});
  info.levels.push_back({{"dp"}, 0, 1});
  ShardMap map(info, {2, 5}, mesh);
  std::set<int64_t> seen;
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<int> at = map.positions(rank);
    for (int64_t i = 0; i < map.localNumel(); ++i) {
      int64_t g = map.toGlobal(at, i);
      if (g >= 0) {
        EXPECT_TRUE(seen.insert(g).second);
      }
    }
  }
  EXPECT_EQ(seen.size(), 30u);
}

TEST(ShardMap, RejectsUnevenBlocks) {
  Mesh mesh{{"tp", 2}};
  ShardInfo info;
  info.globalShape = {9};
  info.levels.push_back({{"tp"}, 0, 3}); // three blocks of 3 over 2 ranks
  EXPECT_THROW(ShardMap(info, {2}, mesh), std::exception);
}

} // namespace
} // namespace llmc
