//===- ScheduleTest.cpp - learning-rate schedules -------------------------===//

#include "runtime/train/LRSchedule.h"

#include <gtest/gtest.h>

using namespace llmc;

TEST(LRSchedule, WarmupThenCosine) {
  LRSchedule s{1.0, 0.1, 10, 110, "cosine"};
  EXPECT_DOUBLE_EQ(s.at(1), 0.1);
  EXPECT_DOUBLE_EQ(s.at(5), 0.5);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.55, 1e-12); // halfway: (max + min) / 2
  EXPECT_NEAR(s.at(110), 0.1, 1e-12);
  EXPECT_NEAR(s.at(500), 0.1, 1e-12); // past the end: stays at min
}

TEST(LRSchedule, LinearAndConstant) {
  LRSchedule linear{1.0, 0.0, 0, 100, "linear"};
  EXPECT_NEAR(linear.at(25), 0.75, 1e-12);
  EXPECT_NEAR(linear.at(100), 0.0, 1e-12);
  LRSchedule constant{0.3, 0.0, 4, 100, "constant"};
  EXPECT_NEAR(constant.at(2), 0.15, 1e-12);
  EXPECT_DOUBLE_EQ(constant.at(50), 0.3);
}
