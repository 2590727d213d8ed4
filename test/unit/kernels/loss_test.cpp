//===- loss_test.cpp - cross_entropy and its gradient ---------------------===//
//
// reduce_max is a conformance case (Conformance.h), compared exactly. The
// loss is one scalar (relative error); the gradient uses the norm metric.

#include "Conformance.h"

#include <cmath>

namespace llmc::test {
namespace {

/// reduce_max over warp-per-row (< 1024) and block-per-row widths, odd row
/// counts and GPT-2's logits rows, and over vocabulary shards whose tail is
/// padding (num_classes). Inputs are shifted negative so a wrong -inf or 0
/// initial value shows; a maximum is exact on every backend (tolerance 0).
std::vector<ConformanceCase> reduceMaxCases() {
  struct Shard {
    std::vector<int64_t> shape;
    int64_t classOffset, numClasses; // numClasses 0: no padding
  };
  const std::vector<Shard> shards = {
      {{1}, 0, 0},          {{7}, 0, 0},          {{1, 1}, 0, 0},        {{37, 1}, 0, 0},
      {{3, 7}, 0, 0},       {{37, 129}, 0, 0},    {{3, 1023}, 0, 0},     {{3, 1024}, 0, 0},
      {{37, 1000}, 0, 0},   {{2, 3, 1025}, 0, 0}, {{3, 50257}, 0, 0},    {{2048, 31}, 0, 0},
      {{5, 13}, 26, 33},    {{3, 1031}, 0, 1000}, {{4, 2000}, 49000, 50257},
  };
  std::vector<ConformanceCase> cases;
  uint64_t seed = 200;
  for (DType dtype : kFloatTypes)
    for (const Shard &s : shards) {
      std::string label = std::string(dtypeName(dtype)) + "_" + shapeLabel(s.shape);
      if (s.numClasses)
        label += "_classes" + std::to_string(s.classOffset) + "of" + std::to_string(s.numClasses);
      cases.push_back({"reduce_max", label, [=, caseSeed = ++seed] {
                         KernelCall k;
                         k.input(randomTensor(s.shape, caseSeed, 1.0, -10.0), dtype);
                         k.output(DType::F32,
                                  std::vector<int64_t>(s.shape.begin(), s.shape.end() - 1));
                         if (s.numClasses)
                           k.attrs = attrs({}, {{"class_offset", s.classOffset},
                                                {"num_classes", s.numClasses}});
                         k.reference = [s](const std::vector<RefTensor> &in) {
                           return std::vector<RefTensor>{
                               ref::reduceMax(in[0], s.classOffset, s.numClasses)};
                         };
                         k.tolerances = k.cudaTolerances = {0.0};
                         return k;
                       }});
    }
  return cases;
}

LLMC_CONFORMANCE_CASES(ReduceMax, reduceMaxCases);

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

/// A padded vocabulary: rows `width` apart whose first `classes` columns
/// are classes (num_classes) and whose padding holds values that would
/// dominate the row if they were read. The loss and the classes' gradient
/// are the unpadded kernels' on the classes bit for bit, the padding's
/// gradient exactly 0, and the loss the float64 reference's; a target in
/// the padding is invalid (NaN), as one past the vocabulary is.
TEST(CrossEntropyKernels, PaddedClassesMatchTheUnpaddedKernels) {
  struct Padded {
    std::vector<int64_t> rows;
    int64_t classes, width;
  };
  uint64_t seed = 760;
  for (DType dtype : kFloatTypes)
    for (const Padded &c : {Padded{{3, 5}, 33, 40}, Padded{{7}, 13, 64}, Padded{{2, 5}, 1031, 1032},
                            Padded{{4}, 1, 8}}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " classes " + std::to_string(c.classes) +
                   " of " + std::to_string(c.width));
      std::vector<int64_t> realShape = c.rows, paddedShape = c.rows;
      realShape.push_back(c.classes);
      paddedShape.push_back(c.width);
      RefTensor real = roundTo(randomTensor(realShape, ++seed, 3.0), dtype);
      RefTensor padded = RefTensor::zeros(paddedShape);
      const int64_t rows = padded.numel() / c.width;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < c.width; ++j)
          padded.data[r * c.width + j] = j < c.classes ? real.data[r * c.classes + j] : 60.0;
      RefTensor targets = randomIds(c.rows, ++seed, 0, c.classes);
      targets.data[0] = -1;
      Buffer rb = Buffer::of(real, dtype), pb = Buffer::of(padded, dtype),
             tb = Buffer::of(targets, DType::I32),
             dloss = Buffer::of(RefTensor{{}, {0.7}}, DType::F32);
      Buffer loss(DType::F32, {}), dreal(dtype, realShape);
      Buffer paddedLoss(DType::F32, {}), dpadded(dtype, paddedShape);
      paddedLoss.poison(), dpadded.poison();
      KernelAttrs classes = attrs({}, {{"num_classes", c.classes}});
      ASSERT_TRUE(runKernel("cross_entropy", {&rb, &tb}, {&loss}));
      ASSERT_TRUE(runKernel("cross_entropy", {&pb, &tb}, {&paddedLoss}, classes));
      EXPECT_EQ(paddedLoss.toRef().data, loss.toRef().data);
      EXPECT_CLOSE(paddedLoss.toRef(), ref::crossEntropy(padded, targets, -1, c.classes),
                   Metric::Elementwise, 1e-5);
      ASSERT_TRUE(runKernel("cross_entropy_grad", {&rb, &tb, &dloss}, {&dreal}));
      ASSERT_TRUE(runKernel("cross_entropy_grad", {&pb, &tb, &dloss}, {&dpadded}, classes));
      RefTensor got = dpadded.toRef(), want = dreal.toRef();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < c.width; ++j)
          ASSERT_EQ(got.data[r * c.width + j], j < c.classes ? want.data[r * c.classes + j] : 0.0)
              << "row " << r << " column " << j;
      // A target in the padding is no class.
      RefTensor bad = targets;
      bad.data[1] = static_cast<double>(c.classes);
      Buffer badb = Buffer::of(bad, DType::I32), badLoss(DType::F32, {});
      ASSERT_TRUE(runKernel("cross_entropy", {&pb, &badb}, {&badLoss}, classes));
      EXPECT_TRUE(std::isnan(badLoss.toRef().data[0]));
    }
}

TEST(CrossEntropyKernels, NumClassesOutOfRangeIsABindError) {
  TensorView logits = typeOnly(DType::F32, {4, 8}), targets = typeOnly(DType::I32, {4}),
             loss = typeOnly(DType::F32, {});
  EXPECT_NE(bindError("cross_entropy", {logits, targets}, {loss},
                      attrs({}, {{"num_classes", 9}}))
                .find("num_classes 9 must be in [0, 8]"),
            std::string::npos);
  EXPECT_NE(bindError("cross_entropy_grad", {logits, targets, loss}, {logits},
                      attrs({}, {{"num_classes", -1}}))
                .find("num_classes -1 must be in [0, 8]"),
            std::string::npos);
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

// Vocabulary-parallel loss: each shard of the logits goes through
// reduce_max and cross_entropy_partial; the per-row statistics are combined
// as the all-reduces would (max, sum, sum) and cross_entropy_finish gives
// the loss of the whole row. Backward likewise. Both must equal the
// unsharded cross_entropy.
TEST(ShardedCrossEntropyKernels, ShardsCombineToTheWholeLossAndGradient) {
  uint64_t seed = 750;
  for (DType dtype : kFloatTypes)
    for (int64_t shards : {1, 3}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " shards " + std::to_string(shards));
      const std::vector<int64_t> rows = {3, 5};
      const int64_t width = 11, vocab = width * shards, ignore = -100;
      RefTensor logits = roundTo(randomTensor({3, 5, vocab}, ++seed, 4.0), dtype);
      RefTensor targets = randomIds(rows, ++seed, 0, vocab);
      targets.data[2] = ignore;
      KernelAttrs lossAttrs = attrs({}, {{"ignore_index", ignore}});
      Buffer tb = Buffer::of(targets, DType::I32);

      std::vector<RefTensor> pieces;
      RefTensor shift = RefTensor::zeros(rows);
      for (double &v : shift.data) v = -INFINITY;
      for (int64_t s = 0; s < shards; ++s) {
        pieces.push_back(ref::slice(logits, {0, 0, s * width}, {3, 5, width}));
        Buffer pb = Buffer::of(pieces.back(), dtype), m(DType::F32, rows);
        m.poison();
        ASSERT_TRUE(runKernel("reduce_max", {&pb}, {&m}));
        EXPECT_CLOSE(m.toRef(), ref::reduceMax(pieces.back()), Metric::Elementwise, 0.0);
        for (int64_t r = 0; r < shift.numel(); ++r)
          shift.data[r] = std::max(shift.data[r], m.toRef().data[r]);
      }
      Buffer shiftb = Buffer::of(shift, DType::F32);
      RefTensor sumexp = RefTensor::zeros(rows), target = RefTensor::zeros(rows);
      auto shardAttrs = [&](int64_t s) {
        return attrs({}, {{"class_offset", s * width}, {"num_classes", vocab},
                          {"ignore_index", ignore}});
      };
      for (int64_t s = 0; s < shards; ++s) {
        Buffer pb = Buffer::of(pieces[s], dtype), se(DType::F32, rows), tl(DType::F32, rows);
        se.poison(), tl.poison();
        ASSERT_TRUE(runKernel("cross_entropy_partial", {&pb, &tb, &shiftb}, {&se, &tl},
                              shardAttrs(s)));
        std::vector<RefTensor> expected =
            ref::crossEntropyPartial(pieces[s], targets, shift, s * width, vocab, ignore);
        EXPECT_CLOSE(se.toRef(), expected[0], Metric::Elementwise, 1e-5);
        EXPECT_CLOSE(tl.toRef(), expected[1], Metric::Elementwise, 0.0);
        for (int64_t r = 0; r < sumexp.numel(); ++r) {
          sumexp.data[r] += se.toRef().data[r];
          target.data[r] += tl.toRef().data[r];
        }
      }
      Buffer seb = Buffer::of(sumexp, DType::F32), tlb = Buffer::of(target, DType::F32),
             loss(DType::F32, {});
      loss.poison();
      ASSERT_TRUE(runKernel("cross_entropy_finish", {&seb, &shiftb, &tlb, &tb}, {&loss},
                            lossAttrs));
      EXPECT_CLOSE(loss.toRef(), ref::crossEntropy(logits, targets, ignore), Metric::Elementwise,
                   1e-5);

      Buffer dloss = Buffer::of(RefTensor{{}, {0.7}}, DType::F32), ds(DType::F32, rows),
             dm(DType::F32, rows), dt(DType::F32, rows);
      ds.poison(), dm.poison(), dt.poison();
      ASSERT_TRUE(runKernel("cross_entropy_finish_grad", {&seb, &tb, &dloss}, {&ds, &dm, &dt},
                            lossAttrs));
      std::vector<RefTensor> finishGrad = ref::crossEntropyFinishGrad(sumexp, targets, 0.7, ignore);
      EXPECT_CLOSE(ds.toRef(), finishGrad[0], Metric::Elementwise, 1e-6);
      EXPECT_CLOSE(dm.toRef(), finishGrad[1], Metric::Elementwise, 1e-6);
      EXPECT_CLOSE(dt.toRef(), finishGrad[2], Metric::Elementwise, 1e-6);
      RefTensor expectedGrad = ref::crossEntropyGrad(logits, targets, 0.7, ignore);
      for (int64_t s = 0; s < shards; ++s) {
        Buffer pb = Buffer::of(pieces[s], dtype), dl(dtype, {3, 5, width});
        dl.poison();
        ASSERT_TRUE(runKernel("cross_entropy_partial_grad", {&pb, &tb, &shiftb, &ds, &dt},
                              {&dl}, shardAttrs(s)));
        EXPECT_CLOSE(dl.toRef(), ref::slice(expectedGrad, {0, 0, s * width}, {3, 5, width}),
                     Metric::Norm, tolerance(dtype));
      }
    }
}

// A vocabulary padded to a multiple of the shards (29 classes in 3 shards of
// 10): the last shard's padding column holds garbage, which reduce_max,
// cross_entropy_partial and its gradient must leave out: the combined loss
// is the 29-class one, and the padding gets no gradient.
TEST(ShardedCrossEntropyKernels, PaddedClassesAreLeftOut) {
  const std::vector<int64_t> rows = {2, 3};
  const int64_t width = 10, shards = 3, vocab = 29, ignore = -100;
  RefTensor logits = roundTo(randomTensor({2, 3, vocab}, 4242, 4.0), DType::F32);
  RefTensor targets = randomIds(rows, 4243, 0, vocab);
  Buffer tb = Buffer::of(targets, DType::I32);
  auto shardAttrs = [&](int64_t s) {
    return attrs({}, {{"class_offset", s * width}, {"num_classes", vocab},
                      {"ignore_index", ignore}});
  };
  std::vector<RefTensor> pieces;
  RefTensor shift = RefTensor::zeros(rows);
  for (double &v : shift.data) v = -INFINITY;
  for (int64_t s = 0; s < shards; ++s) {
    RefTensor piece = RefTensor::zeros({2, 3, width});
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t j = 0; j < width; ++j)
        piece.data[r * width + j] =
            s * width + j < vocab ? logits.data[r * vocab + s * width + j] : 50.0 + r;
    pieces.push_back(piece);
    Buffer pb = Buffer::of(piece, DType::F32), m(DType::F32, rows);
    m.poison();
    ASSERT_TRUE(runKernel("reduce_max", {&pb}, {&m},
                          attrs({}, {{"class_offset", s * width}, {"num_classes", vocab}})));
    RefTensor expected = ref::reduceMax(piece, s * width, vocab);
    EXPECT_CLOSE(m.toRef(), expected, Metric::Elementwise, 0.0);
    for (int64_t r = 0; r < 6; ++r) {
      EXPECT_LT(m.toRef().data[r], 50.0) << "padding entered the maximum";
      shift.data[r] = std::max(shift.data[r], m.toRef().data[r]);
    }
  }
  Buffer shiftb = Buffer::of(shift, DType::F32);
  RefTensor sumexp = RefTensor::zeros(rows), target = RefTensor::zeros(rows);
  for (int64_t s = 0; s < shards; ++s) {
    Buffer pb = Buffer::of(pieces[s], DType::F32), se(DType::F32, rows), tl(DType::F32, rows);
    ASSERT_TRUE(runKernel("cross_entropy_partial", {&pb, &tb, &shiftb}, {&se, &tl},
                          shardAttrs(s)));
    std::vector<RefTensor> expected =
        ref::crossEntropyPartial(pieces[s], targets, shift, s * width, vocab, ignore);
    EXPECT_CLOSE(se.toRef(), expected[0], Metric::Elementwise, 1e-5);
    for (int64_t r = 0; r < 6; ++r) {
      sumexp.data[r] += se.toRef().data[r];
      target.data[r] += tl.toRef().data[r];
    }
  }
  Buffer seb = Buffer::of(sumexp, DType::F32), tlb = Buffer::of(target, DType::F32),
         loss(DType::F32, {});
  ASSERT_TRUE(runKernel("cross_entropy_finish", {&seb, &shiftb, &tlb, &tb}, {&loss},
                        attrs({}, {{"ignore_index", ignore}})));
  EXPECT_CLOSE(loss.toRef(), ref::crossEntropy(logits, targets, ignore), Metric::Elementwise,
               1e-5);

  Buffer dloss = Buffer::of(RefTensor{{}, {1.0}}, DType::F32), ds(DType::F32, rows),
         dm(DType::F32, rows), dt(DType::F32, rows);
  ASSERT_TRUE(runKernel("cross_entropy_finish_grad", {&seb, &tb, &dloss}, {&ds, &dm, &dt},
                        attrs({}, {{"ignore_index", ignore}})));
  Buffer last = Buffer::of(pieces.back(), DType::F32), dl(DType::F32, {2, 3, width});
  dl.poison();
  ASSERT_TRUE(runKernel("cross_entropy_partial_grad", {&last, &tb, &shiftb, &ds, &dt}, {&dl},
                        shardAttrs(shards - 1)));
  for (int64_t r = 0; r < 6; ++r)
    EXPECT_EQ(dl.toRef().data[r * width + width - 1], 0.0) << "padding got a gradient";
  RefTensor expectedGrad = ref::crossEntropyGrad(logits, targets, 1.0, ignore);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j + 1 < width; ++j)
      EXPECT_NEAR(dl.toRef().data[r * width + j],
                  expectedGrad.data[r * vocab + (shards - 1) * width + j], 1e-5);
}

TEST(ShardedCrossEntropyKernels, BadAttributesAreNamed) {
  TensorView logits = typeOnly(DType::F32, {4, 8}), targets = typeOnly(DType::I32, {4}),
             stat = typeOnly(DType::F32, {4});
  EXPECT_NE(bindError("cross_entropy_partial", {logits, targets, stat}, {stat, stat},
                      attrs({}, {{"class_offset", 4}}))
                .find("missing int attribute 'num_classes'"),
            std::string::npos);
  EXPECT_NE(bindError("cross_entropy_partial", {logits, targets, stat}, {stat, stat},
                      attrs({}, {{"class_offset", 4}, {"num_classes", 10}}))
                .find("classes [4, 12) do not fit in num_classes 10"),
            std::string::npos);
  EXPECT_NE(bindError("reduce_max", {logits}, {stat}, attrs({}, {{"num_classes", -3}}))
                .find("class_offset and num_classes must be >= 0"),
            std::string::npos);
}

} // namespace
} // namespace llmc::test
