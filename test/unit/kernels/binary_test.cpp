//===- binary_test.cpp - add, mul, scale against the reference ------------===//
//
// Elementwise metric throughout: every output element is one rounding of a
// well-conditioned sum or product.

#include "KernelTest.h"

namespace llmc::test {
namespace {

struct BroadcastCase {
  std::vector<int64_t> lhs, rhs;
};

const std::vector<BroadcastCase> kBroadcastCases = {
    {{3, 7, 13}, {13}}, {{3, 7, 13}, {7, 13}}, {{3, 7, 13}, {3, 7, 13}}, {{3, 7, 13}, {}},
    {{2, 33}, {33}},    {{70, 600}, {600}},    {{1, 40000}, {40000}},    {{5, 1}, {1}},
};

TEST(BinaryKernels, AddMulMatchReferenceWithBroadcast) {
  for (DType dtype : kFloatTypes)
    for (const BroadcastCase &c : kBroadcastCases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " lhs rank " + std::to_string(c.lhs.size()) +
                   " rhs rank " + std::to_string(c.rhs.size()));
      RefTensor lhs = roundTo(randomTensor(c.lhs, 1), dtype);
      RefTensor rhs = roundTo(randomTensor(c.rhs, 2), dtype);
      Buffer l = Buffer::of(lhs, dtype), r = Buffer::of(rhs, dtype), out(dtype, c.lhs);
      out.poison();
      ASSERT_TRUE(runKernel("add", {&l, &r}, {&out}));
      EXPECT_CLOSE(out.toRef(), ref::add(lhs, rhs), Metric::Elementwise, tolerance(dtype));
      out.poison();
      ASSERT_TRUE(runKernel("mul", {&l, &r}, {&out}));
      EXPECT_CLOSE(out.toRef(), ref::mul(lhs, rhs), Metric::Elementwise, tolerance(dtype));
    }
}

TEST(BinaryKernels, AddInPlaceOnLhs) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    RefTensor lhs = roundTo(randomTensor({9, 33}, 3), dtype);
    RefTensor rhs = roundTo(randomTensor({33}, 4), dtype);
    Buffer l = Buffer::of(lhs, dtype), r = Buffer::of(rhs, dtype);
    ASSERT_TRUE(runKernel("add", {&l, &r}, {&l}));
    EXPECT_CLOSE(l.toRef(), ref::add(lhs, rhs), Metric::Elementwise, tolerance(dtype));
  }
}

TEST(BinaryKernels, ScaleMatchesReferenceAndWorksInPlace) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    RefTensor x = roundTo(randomTensor({7, 13, 3}, 5), dtype);
    Buffer in = Buffer::of(x, dtype), out(dtype, x.shape);
    out.poison();
    ASSERT_TRUE(runKernel("scale", {&in}, {&out}, attrs({{"factor", -0.37}})));
    EXPECT_CLOSE(out.toRef(), ref::scale(x, -0.37), Metric::Elementwise, tolerance(dtype));
    ASSERT_TRUE(runKernel("scale", {&in}, {&in}, attrs({{"factor", 2.5}})));
    EXPECT_CLOSE(in.toRef(), ref::scale(x, 2.5), Metric::Elementwise, tolerance(dtype));
  }
}

} // namespace
} // namespace llmc::test
