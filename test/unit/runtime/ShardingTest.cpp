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

/// `info` with a padding level: dimension `dim` grows to `padTo`.
ShardInfo padded(ShardInfo info, int dim, int64_t padTo) {
  ShardLevel pad;
  pad.dim = dim;
  pad.padTo = padTo;
  info.levels.push_back(pad);
  return info;
}

// A vocabulary padded inside the artifact (llmc-pad-vocab): 5 rows grow to
// 8 on one rank; the global tensor is still the real 5 rows.
TEST(ShardMap, APaddingLevelGrowsADimensionOnEveryRank) {
  Mesh mesh;
  ShardInfo info;
  info.globalShape = {5, 3};
  ShardMap map(padded(info, 0, 8), {8, 3}, mesh);
  EXPECT_EQ(map.globalShape(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(map.shapeAfter(1), (std::vector<int64_t>{8, 3}));
  EXPECT_EQ(map.positions(0), std::vector<int>{0});
  for (int64_t i = 0; i < map.localNumel(); ++i) {
    int64_t g = map.toGlobal({0}, i);
    EXPECT_EQ(g, i < 15 ? i : -1) << "element " << i;
  }
  std::vector<int> owner;
  int64_t local = -1;
  map.fromGlobal(14, owner, local);
  EXPECT_EQ(local, 14);
  EXPECT_TRUE(map.lastDimWhole());
  // Padding the last dimension leaves rows of 6 with 2 of padding each.
  ShardInfo columns;
  columns.globalShape = {2, 4};
  ShardMap byColumns(padded(columns, 1, 6), {2, 6}, mesh);
  EXPECT_FALSE(byColumns.lastDimWhole());
  EXPECT_EQ(byColumns.toGlobal({0}, 7), 5);
  EXPECT_EQ(byColumns.toGlobal({0}, 4), -1);
  byColumns.fromGlobal(5, owner, local);
  EXPECT_EQ(local, 7);
}

// Tensor parallelism after the padding splits the padded vocabulary: 257
// rows padded to 320, over tp=2 into 160 each; rank 1 holds rows 160-256
// and 63 rows of padding. Then ZeRO over dp=2 pads nothing more.
TEST(ShardMap, SplitsAfterThePaddingSplitThePaddedTensor) {
  Mesh mesh{{"dp", 2}, {"tp", 2}};
  ShardInfo info;
  info.globalShape = {257, 2};
  info = padded(info, 0, 320);
  info.levels.push_back({{"tp"}, 0, 1});
  info.levels.push_back({{"dp"}, 0, 1});
  ShardMap map(info, {80, 2}, mesh);
  std::set<int64_t> seen;
  int padding = 0;
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<int> at = map.positions(rank);
    for (int64_t i = 0; i < map.localNumel(); ++i) {
      int64_t g = map.toGlobal(at, i);
      if (g < 0) {
        ++padding;
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
  EXPECT_EQ(seen.size(), 514u);
  EXPECT_EQ(padding, 63 * 2);
}

TEST(ShardMap, RejectsPaddingThatShrinks) {
  ShardInfo info;
  info.globalShape = {9};
  EXPECT_THROW(ShardMap(padded(info, 0, 8), {8}, Mesh{}), std::exception);
  EXPECT_THROW(ShardMap(padded(info, 1, 12), {12}, Mesh{}), std::exception);
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
