//===- ArenaPlacementTest.cpp - arena offsets against their lifetimes -----===//

#include "passes/lib/ArenaPlacement.h"

#include <gtest/gtest.h>

#include <array>
#include <random>

using namespace llmc::arena;

namespace {

constexpr int64_t kAlign = 64;

/// Lifetimes in instructions, sizes in alignment units.
std::vector<Interval> units(std::initializer_list<std::array<int64_t, 3>> list) {
  std::vector<Interval> out;
  for (auto [start, end, size] : list)
    out.push_back({start, end, size * kAlign});
  return out;
}

void expectValid(const std::vector<Interval> &intervals, const std::vector<int64_t> &offsets,
                 const char *what) {
  ASSERT_EQ(offsets.size(), intervals.size()) << what;
  for (int64_t offset : offsets)
    EXPECT_EQ(offset % kAlign, 0) << what;
  auto conflict = findConflict(intervals, offsets, kAlign);
  EXPECT_FALSE(conflict) << what << ": buffers " << conflict->first << " and " << conflict->second
                         << " are live together and share bytes";
  EXPECT_GE(extent(intervals, offsets, kAlign), liveBytesBound(intervals, kAlign)) << what;
}

TEST(ArenaPlacement, CheckerFindsSharedBytes) {
  std::vector<Interval> intervals = units({{0, 3, 2}, {2, 5, 2}, {4, 6, 1}});
  // The first two are live together at 2..3.
  EXPECT_EQ(findConflict(intervals, {0, 64, 256}, kAlign), std::make_pair(size_t(0), size_t(1)));
  EXPECT_FALSE(findConflict(intervals, {0, 128, 0}, kAlign)) << "0 and 2 never live together";
  // A lifetime ending where another starts still overlaps: a kernel reads
  // its operands while it writes its results.
  EXPECT_TRUE(findConflict(units({{0, 2, 1}, {2, 4, 1}}), {0, 0}, kAlign));
  EXPECT_FALSE(findConflict(units({{0, 1, 1}, {2, 4, 1}}), {0, 0}, kAlign));
}

TEST(ArenaPlacement, LiveBytesBound) {
  // At 2: 2 + 2 + 1 units live; a size rounds up to the alignment.
  std::vector<Interval> intervals = units({{0, 3, 2}, {2, 5, 2}, {1, 2, 1}, {4, 6, 3}});
  EXPECT_EQ(liveBytesBound(intervals, kAlign), 5 * kAlign);
  EXPECT_EQ(liveBytesBound({{0, 0, 1}, {1, 1, 65}}, kAlign), 128);
  EXPECT_EQ(liveBytesBound({}, kAlign), 0);
}

TEST(ArenaPlacement, GreedyBySizeBeatsFirstFitWhereItFragments) {
  // A short buffer and a long one start together; first-fit puts the short
  // one lowest, and the large buffer that starts next cannot use the one
  // unit it frees, so it goes above both: 4 units for a bound of 3.
  std::vector<Interval> intervals = units({{0, 0, 1}, {0, 5, 1}, {1, 5, 2}});
  int64_t bound = liveBytesBound(intervals, kAlign);
  EXPECT_EQ(bound, 3 * kAlign);
  std::vector<int64_t> firstFit = place(intervals, Strategy::FirstFitByStart, kAlign);
  expectValid(intervals, firstFit, "first-fit");
  EXPECT_EQ(extent(intervals, firstFit, kAlign), 4 * kAlign);
  std::vector<int64_t> bySize = place(intervals, Strategy::GreedyBySize, kAlign);
  expectValid(intervals, bySize, "greedy by size");
  EXPECT_EQ(extent(intervals, bySize, kAlign), bound) << "the large buffer first, at 0";
  EXPECT_EQ(bySize[2], 0);
  Plan plan = planArena(intervals, kAlign);
  EXPECT_EQ(plan.strategy, Strategy::GreedyBySize);
  EXPECT_EQ(plan.extent, bound);
  EXPECT_EQ(plan.offsets, bySize);
}

TEST(ArenaPlacement, KeepsFirstFitWhereGreedyBySizeLoses) {
  // Greedy by size puts the 4-unit buffer at 0 and the 3-unit one that
  // outlives it beside it, leaving a 1-unit gap the last buffer cannot
  // use: 9 units. First-fit by start reaches the bound, 8.
  std::vector<Interval> intervals = units({{2, 4, 2}, {2, 2, 3}, {1, 2, 3}, {1, 1, 4}});
  EXPECT_EQ(liveBytesBound(intervals, kAlign), 8 * kAlign);
  EXPECT_EQ(extent(intervals, place(intervals, Strategy::GreedyBySize, kAlign), kAlign),
            9 * kAlign);
  EXPECT_EQ(extent(intervals, place(intervals, Strategy::GreedyBySizeBestFit, kAlign), kAlign),
            9 * kAlign);
  Plan plan = planArena(intervals, kAlign);
  EXPECT_EQ(plan.strategy, Strategy::FirstFitByStart);
  EXPECT_EQ(plan.extent, 8 * kAlign);
  expectValid(intervals, plan.offsets, "plan");
}

TEST(ArenaPlacement, TiesKeepFirstFit) {
  // Every strategy reaches the bound here; the plan stays first-fit's, so
  // programs it already placed tightly keep their offsets.
  std::vector<Interval> intervals = units({{0, 1, 2}, {1, 2, 1}, {2, 3, 2}});
  Plan plan = planArena(intervals, kAlign);
  EXPECT_EQ(plan.strategy, Strategy::FirstFitByStart);
  EXPECT_EQ(plan.offsets, place(intervals, Strategy::FirstFitByStart, kAlign));
  EXPECT_EQ(plan.extent, liveBytesBound(intervals, kAlign));
}

TEST(ArenaPlacement, RandomLifetimesArePlacedValidly) {
  std::mt19937_64 rng(7);
  int greedyWins = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<Interval> intervals;
    int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      int64_t start = static_cast<int64_t>(rng() % 40);
      int64_t end = start + static_cast<int64_t>(rng() % 12);
      // Odd byte counts: the planner rounds them up.
      intervals.push_back({start, end, 1 + static_cast<int64_t>(rng() % 1000)});
    }
    int64_t best = -1;
    for (Strategy strategy : kStrategies) {
      std::vector<int64_t> offsets = place(intervals, strategy, kAlign);
      expectValid(intervals, offsets, strategyName(strategy));
      EXPECT_EQ(offsets, place(intervals, strategy, kAlign)) << "deterministic";
      int64_t top = extent(intervals, offsets, kAlign);
      best = best < 0 ? top : std::min(best, top);
    }
    Plan plan = planArena(intervals, kAlign);
    expectValid(intervals, plan.offsets, "plan");
    EXPECT_EQ(plan.extent, best);
    EXPECT_EQ(plan.extent, extent(intervals, plan.offsets, kAlign));
    EXPECT_LE(plan.extent,
              extent(intervals, place(intervals, Strategy::FirstFitByStart, kAlign), kAlign));
    greedyWins += plan.strategy != Strategy::FirstFitByStart;
  }
  EXPECT_GT(greedyWins, 0) << "the random cases should include some first-fit fragments";
}

} // namespace
