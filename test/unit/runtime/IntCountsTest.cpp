//===- IntCountsTest.cpp - pieces MPI can count ---------------------------===//

#include "runtime/comm/IntCounts.h"

#include <gtest/gtest.h>

#include <climits>
#include <utility>
#include <vector>

using namespace llmc;

namespace {

std::vector<std::pair<size_t, int>> pieces(size_t n, size_t most) {
  std::vector<std::pair<size_t, int>> out;
  forEachIntPiece(n, [&](size_t first, int count) { out.emplace_back(first, count); }, most);
  return out;
}

TEST(IntCounts, PiecesCoverTheRangeInOrder) {
  using P = std::vector<std::pair<size_t, int>>;
  EXPECT_EQ(pieces(10, 4), (P{{0, 4}, {4, 4}, {8, 2}}));
  EXPECT_EQ(pieces(8, 4), (P{{0, 4}, {4, 4}}));
  EXPECT_EQ(pieces(3, 4), (P{{0, 3}}));
  // Every rank joins a collective of nothing once.
  EXPECT_EQ(pieces(0, 4), (P{{0, 0}}));
}

TEST(IntCounts, MpiSizedPiecesStayWithinAnInt) {
  const size_t most = static_cast<size_t>(INT_MAX);
  auto big = pieces(2 * most + 5, most);
  ASSERT_EQ(big.size(), 3u);
  EXPECT_EQ(big[0].second, INT_MAX);
  EXPECT_EQ(big[2], std::make_pair(2 * most, 5));
  EXPECT_TRUE(fitsIntCount(most));
  EXPECT_FALSE(fitsIntCount(most + 1));
}

} // namespace
