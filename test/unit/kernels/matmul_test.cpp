//===- matmul_test.cpp - matmul against the reference ---------------------===//
//
// Norm metric: each element is a K-term dot product whose value can cancel
// to near zero.

#include "KernelTest.h"

namespace llmc::test {
namespace {

struct MatmulCase {
  std::vector<int64_t> lead; // a's leading dims
  int64_t m, k, n;
  bool batchedB;
};

const std::vector<MatmulCase> kCases = {
    {{}, 7, 13, 33, false},     {{2, 3}, 7, 13, 5, false}, {{3}, 7, 13, 9, true},
    {{2, 2}, 33, 17, 13, true}, {{4}, 65, 128, 70, false}, {{}, 1, 1, 1, false},
    // One row (a decode step at batch 1): a GEMV.
    {{}, 1, 13, 33, false},     {{1, 1}, 1, 64, 70, false},
};

std::vector<int64_t> shapeOf(const std::vector<int64_t> &lead, int64_t rows, int64_t cols) {
  std::vector<int64_t> shape = lead;
  shape.push_back(rows);
  shape.push_back(cols);
  return shape;
}

TEST(MatmulKernel, MatchesReferenceForEveryTransposeAndBatching) {
  uint64_t seed = 100;
  for (DType dtype : kFloatTypes)
    for (const MatmulCase &c : kCases)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " m" + std::to_string(c.m) + " k" +
                       std::to_string(c.k) + " n" + std::to_string(c.n) + " batchedB " +
                       std::to_string(c.batchedB) + " ta " + std::to_string(ta) + " tb " +
                       std::to_string(tb));
          RefTensor a =
              roundTo(randomTensor(shapeOf(c.lead, ta ? c.k : c.m, ta ? c.m : c.k), ++seed), dtype);
          std::vector<int64_t> bLead = c.batchedB ? c.lead : std::vector<int64_t>{};
          RefTensor b =
              roundTo(randomTensor(shapeOf(bLead, tb ? c.n : c.k, tb ? c.k : c.n), ++seed), dtype);
          Buffer ab = Buffer::of(a, dtype), bb = Buffer::of(b, dtype),
                 out(dtype, shapeOf(c.lead, c.m, c.n));
          out.poison();
          ASSERT_TRUE(runKernel("matmul", {&ab, &bb}, {&out},
                                attrs({}, {{"transpose_a", ta}, {"transpose_b", tb}})));
          EXPECT_CLOSE(out.toRef(), ref::matmul(a, b, ta, tb), Metric::Norm, tolerance(dtype));
        }
}

TEST(MatmulKernel, AccumulateAddsIntoC) {
  for (DType dtype : kFloatTypes)
    for (int64_t rows : {7, 1}) // 1: the GEMV path
    for (bool batchedB : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + (batchedB ? " batched" : " shared") +
                   " rows " + std::to_string(rows));
      int64_t lead = rows == 1 ? 1 : 3;
      RefTensor a = roundTo(randomTensor({lead, rows, 13}, 201), dtype);
      RefTensor b = roundTo(
          randomTensor(batchedB ? std::vector<int64_t>{lead, 33, 13} : std::vector<int64_t>{33, 13},
                       202),
          dtype);
      RefTensor c0 = roundTo(randomTensor({lead, rows, 33}, 203), dtype);
      Buffer ab = Buffer::of(a, dtype), bb = Buffer::of(b, dtype), c = Buffer::of(c0, dtype);
      ASSERT_TRUE(runKernel("matmul", {&ab, &bb}, {&c},
                            attrs({}, {{"transpose_b", 1}, {"accumulate", 1}})));
      EXPECT_CLOSE(c.toRef(), ref::add(c0, ref::matmul(a, b, false, true)), Metric::Norm,
                   tolerance(dtype));
    }
}

} // namespace
} // namespace llmc::test
