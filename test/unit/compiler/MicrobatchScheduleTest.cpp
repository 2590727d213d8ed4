//===- MicrobatchScheduleTest.cpp - schedules against their textbook numbers ===//

#include "passes/lib/MicrobatchSchedule.h"

#include <gtest/gtest.h>

using namespace llmc::pipeline;

namespace {

std::vector<std::vector<Action>> build(Kind kind, int p, int m, int v = 1) {
  std::string error;
  auto schedule = buildSchedule({kind, p, m, v}, error);
  EXPECT_TRUE(error.empty()) << error;
  return schedule;
}

/// Every stage runs each of its (microbatch, chunk) forward and backward
/// exactly once.
void expectComplete(const Spec &spec, const std::vector<std::vector<Action>> &schedule) {
  ASSERT_EQ(schedule.size(), static_cast<size_t>(spec.stages));
  for (int s = 0; s < spec.stages; ++s) {
    size_t perChunk = spec.kind == Kind::ZeroBubble ? 3 : 2;
    EXPECT_EQ(schedule[s].size(), perChunk * spec.microbatches * spec.virtualStages);
    for (const Action &a : schedule[s])
      EXPECT_EQ(a.chunk % spec.stages, s);
  }
}

TEST(MicrobatchSchedule, GPipeAnd1F1BHaveTheTextbookBubble) {
  for (Kind kind : {Kind::GPipe, Kind::OneFOneB})
    for (auto [p, m] : {std::pair{2, 4}, {4, 8}, {4, 3}, {3, 1}}) {
      Spec spec{kind, p, m};
      auto schedule = build(kind, p, m);
      expectComplete(spec, schedule);
      Stats stats = simulate(spec, schedule);
      ASSERT_TRUE(stats.complete);
      EXPECT_NEAR(stats.bubble, (p - 1.0) / (m + p - 1.0), 1e-12) << kindName(kind);
      EXPECT_DOUBLE_EQ(stats.analyticBubble, (p - 1.0) / (m + p - 1.0));
      for (int s = 0; s < p; ++s)
        EXPECT_EQ(stats.peakInFlight[s], kind == Kind::GPipe ? m : std::min(m, p - s));
    }
}

TEST(MicrobatchSchedule, OneFOneBOrderOfTheFirstStage) {
  auto schedule = build(Kind::OneFOneB, 4, 6);
  EXPECT_EQ(describe(schedule[0], 1), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(describe(schedule[3], 1), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
}

TEST(MicrobatchSchedule, NaiveRunsOneMicrobatchAtATime) {
  Spec spec{Kind::Naive, 4, 3};
  Stats stats = simulate(spec, build(Kind::Naive, 4, 3));
  EXPECT_NEAR(stats.bubble, 0.75, 1e-12);
  EXPECT_EQ(stats.peakInFlight, (std::vector<int>{1, 1, 1, 1}));
}

TEST(MicrobatchSchedule, InterleavedCutsTheBubble) {
  for (auto [p, m, v] : {std::tuple{2, 4, 2}, {4, 8, 2}, {4, 8, 3}}) {
    Spec spec{Kind::Interleaved, p, m, v};
    auto schedule = build(Kind::Interleaved, p, m, v);
    expectComplete(spec, schedule);
    Stats stats = simulate(spec, schedule);
    ASSERT_TRUE(stats.complete) << "deadlock";
    EXPECT_DOUBLE_EQ(stats.analyticBubble, (p - 1.0) / (m + p - 1.0) / v);
    Stats plain = simulate({Kind::OneFOneB, p, m}, build(Kind::OneFOneB, p, m));
    EXPECT_LT(stats.bubble, plain.bubble);
  }
  std::string error;
  EXPECT_TRUE(buildSchedule({Kind::Interleaved, 4, 6, 2}, error).empty());
  EXPECT_EQ(error, "the interleaved schedule needs the microbatch count (6) to be a multiple "
                   "of the pipeline stages (4)");
}

TEST(MicrobatchSchedule, ZeroBubbleFillsTheCooldownWithWeightGradients) {
  for (auto [p, m] : {std::pair{2, 4}, {4, 8}, {4, 4}, {3, 7}}) {
    Spec spec{Kind::ZeroBubble, p, m};
    auto schedule = build(Kind::ZeroBubble, p, m);
    expectComplete(spec, schedule);
    Stats stats = simulate(spec, schedule);
    ASSERT_TRUE(stats.complete);
    Stats plain = simulate({Kind::OneFOneB, p, m}, build(Kind::OneFOneB, p, m));
    EXPECT_LT(stats.bubble, plain.bubble);
    EXPECT_NEAR(stats.bubble, stats.analyticBubble, 1e-12);
    for (int s = 0; s < p; ++s)
      EXPECT_LE(stats.peakInFlight[s], p - s);
  }
}

TEST(MicrobatchSchedule, ZeroBubbleKeepsWeightGradientsBounded) {
  // However many microbatches, at most p W's wait.
  auto schedule = build(Kind::ZeroBubble, 4, 32);
  for (const auto &stage : schedule) {
    int waiting = 0, most = 0;
    for (const Action &a : stage) {
      if (a.phase == Phase::Backward) most = std::max(most, ++waiting);
      if (a.phase == Phase::Weight) --waiting;
    }
    EXPECT_LE(most, 5);
  }
}

TEST(MicrobatchSchedule, OrdersThatWaitOnEachOtherAreReported) {
  Spec spec{Kind::GPipe, 2, 1};
  // Stage 0 waits for the backward before running the forward it needs.
  std::vector<std::vector<Action>> bad = {{{0, 0, Phase::Backward}, {0, 0, Phase::Forward}},
                                          {{0, 1, Phase::Forward}, {0, 1, Phase::Backward}}};
  EXPECT_FALSE(simulate(spec, bad).complete);
}

} // namespace
