//===- loss_test.cpp - cross_entropy and its gradient ---------------------===//
//
// The loss is one scalar (relative error); the gradient uses the norm metric.

#include "KernelTest.h"

#include <cmath>

namespace llmc::test {
namespace {

struct LossCase {
  std::vector<int64_t> rows;
  int64_t vocab;
  int64_t ignoreIndex;
  int everyNthIgnored; // 0: none
};

const std::vector<LossCase> kCases = {
    {{7}, 13, -1, 0},
    {{3, 7}, 33, -1, 3},
    {{2, 5}, 1031, -100, 2},
    {{64}, 257, 5, 0},
};

TEST(CrossEntropyKernels, LossAndGradMatchReference) {
  uint64_t seed = 700;
  for (DType dtype : kFloatTypes)
    for (const LossCase &c : kCases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " V " + std::to_string(c.vocab) + " ignore " +
                   std::to_string(c.ignoreIndex));
      std::vector<int64_t> shape = c.rows;
      shape.push_back(c.vocab);
      RefTensor logits = roundTo(randomTensor(shape, ++seed, 3.0), dtype);
      RefTensor targets = randomIds(c.rows, ++seed, 0, c.vocab);
      for (int64_t i = 0; c.everyNthIgnored && i < targets.numel(); i += c.everyNthIgnored)
        targets.data[i] = static_cast<double>(c.ignoreIndex);
      Buffer lb = Buffer::of(logits, dtype), tb = Buffer::of(targets, DType::I32),
             dloss = Buffer::of(RefTensor{{}, {0.7}}, DType::F32);
      Buffer loss(DType::F32, {}), dlogits(dtype, shape);
      loss.poison(), dlogits.poison();
      KernelAttrs a = attrs({}, {{"ignore_index", c.ignoreIndex}});
      ASSERT_TRUE(runKernel("cross_entropy", {&lb, &tb}, {&loss}, a));
      EXPECT_CLOSE(loss.toRef(), ref::crossEntropy(logits, targets, c.ignoreIndex),
                   Metric::Elementwise, 1e-5);
      ASSERT_TRUE(runKernel("cross_entropy_grad", {&lb, &tb, &dloss}, {&dlogits}, a));
      RefTensor expected = ref::crossEntropyGrad(logits, targets, 0.7, c.ignoreIndex);
      EXPECT_CLOSE(dlogits.toRef(), expected, Metric::Norm, tolerance(dtype));
      // Ignored rows are exactly zero.
      RefTensor got = dlogits.toRef();
      for (int64_t r = 0; r < targets.numel(); ++r) {
        if (targets.data[r] != c.ignoreIndex) continue;
        for (int64_t j = 0; j < c.vocab; ++j) ASSERT_EQ(got.data[r * c.vocab + j], 0.0);
      }
    }
}

TEST(CrossEntropyKernels, AllIgnoredGivesZero) {
  RefTensor logits = randomTensor({4, 9}, 711);
  RefTensor targets{{4}, {-1, -1, -1, -1}};
  Buffer lb = Buffer::of(logits, DType::F32), tb = Buffer::of(targets, DType::I32),
         dloss = Buffer::of(RefTensor{{}, {1.0}}, DType::F32), loss(DType::F32, {}),
         dlogits(DType::F32, {4, 9});
  loss.poison(), dlogits.poison();
  ASSERT_TRUE(runKernel("cross_entropy", {&lb, &tb}, {&loss}));
  EXPECT_EQ(loss.toRef().data[0], 0.0);
  ASSERT_TRUE(runKernel("cross_entropy_grad", {&lb, &tb, &dloss}, {&dlogits}));
  for (double v : dlogits.toRef().data) ASSERT_EQ(v, 0.0);
}

TEST(CrossEntropyKernels, LargeLogitsAreStable) {
  RefTensor logits{{2, 3}, {1000.0, 0.0, -1000.0, 88.0, 89.0, 90.0}};
  RefTensor targets{{2}, {0, 1}};
  Buffer lb = Buffer::of(logits, DType::F32), tb = Buffer::of(targets, DType::I32),
         loss(DType::F32, {});
  ASSERT_TRUE(runKernel("cross_entropy", {&lb, &tb}, {&loss}));
  EXPECT_CLOSE(loss.toRef(), ref::crossEntropy(logits, targets, -1), Metric::Elementwise, 1e-5);
}

} // namespace
} // namespace llmc::test
