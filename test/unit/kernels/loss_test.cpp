//===- loss_test.cpp - cross_entropy and its gradient ---------------------===//
//
// reduce_max and the cross-entropy family (whole, padded and sharded) are
// conformance cases (Conformance.h): reduce_max compared exactly, losses
// (scalars) with a relative error, gradients with the norm metric. Here
// also: exact zeros (ignored rows, padding), padded against unpadded bit
// for bit, stability, and shards combining to the whole loss.

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
      {{1}, 0, 0},          {{7}, 0, 0},          {{1, 1}, 0, 0},
      {{37, 1}, 0, 0},      {{3, 7}, 0, 0},       {{37, 129}, 0, 0},
      {{3, 1023}, 0, 0},    {{3, 1024}, 0, 0},    {{37, 1000}, 0, 0},
      {{2, 3, 1025}, 0, 0}, {{3, 50257}, 0, 0},   {{2048, 31}, 0, 0},
      {{5, 13}, 26, 33},    {{3, 1031}, 0, 1000}, {{4, 2000}, 49000, 50257},
  };
  std::vector<ConformanceCase> cases;
  uint64_t seed = 200;
  for (DType dtype : kFloatTypes)
    for (const Shard &s : shards) {
      std::string label = std::string(dtypeName(dtype)) + "_" + shapeLabel(s.shape);
      if (s.numClasses)
        label += "_classes" + std::to_string(s.classOffset) + "of" + std::to_string(s.numClasses);
      cases.push_back(
          {"reduce_max", label, [=, caseSeed = ++seed] {
             KernelCall k;
             k.input(randomTensor(s.shape, caseSeed, 1.0, -10.0), dtype);
             k.output(DType::F32, std::vector<int64_t>(s.shape.begin(), s.shape.end() - 1));
             if (s.numClasses)
               k.attrs =
                   attrs({}, {{"class_offset", s.classOffset}, {"num_classes", s.numClasses}});
             k.reference = [s](const std::vector<RefTensor> &in) {
               return std::vector<RefTensor>{ref::reduceMax(in[0], s.classOffset, s.numClasses)};
             };
             k.tolerances = k.cudaTolerances = {0.0};
             return k;
           }});
    }
  return cases;
}

LLMC_CONFORMANCE_CASES(ReduceMax, reduceMaxCases);

/// Targets of `rows` in [0, classes), every `everyNth` one `ignoreIndex`.
RefTensor targetsWithIgnored(const std::vector<int64_t> &rows, uint64_t seed, int64_t classes,
                             int64_t ignoreIndex, int everyNth) {
  RefTensor targets = randomIds(rows, seed, 0, classes);
  for (int64_t i = 0; everyNth && i < targets.numel(); i += everyNth)
    targets.data[i] = static_cast<double>(ignoreIndex);
  return targets;
}

/// A cross_entropy call and its gradient's: logits [rows..., width] of
/// which the first `classes` are classes (the rest padding holding 50, which
/// would dominate a row if read; classes == width: no padding).
struct WholeLoss {
  std::vector<int64_t> rows;
  int64_t classes, width, ignoreIndex;
  int everyNthIgnored; // 0: none; 1: every row (the loss is 0)
};

void addWholeLoss(std::vector<ConformanceCase> &cases, DType dtype, DType idType,
                  const WholeLoss &c, uint64_t seed) {
  std::string label = std::string(dtypeName(dtype)) + "_ids_" + dtypeName(idType) + "_" +
                      shapeLabel(c.rows) + "_V" + std::to_string(c.classes) +
                      (c.width != c.classes ? "_of" + std::to_string(c.width) : "") + "_ignore" +
                      std::to_string(c.ignoreIndex) + "_every" + std::to_string(c.everyNthIgnored);
  label = caseLabel(label);
  std::vector<int64_t> shape = c.rows;
  shape.push_back(c.width);
  auto logits = [=] {
    RefTensor values = randomTensor(shape, seed, 3.0);
    for (int64_t r = 0; r < values.numel() / c.width; ++r)
      for (int64_t j = c.classes; j < c.width; ++j) values.data[r * c.width + j] = 50.0;
    return Buffer::of(values, dtype);
  };
  auto targets = [=] {
    return Buffer::of(
        targetsWithIgnored(c.rows, seed + 1, c.classes, c.ignoreIndex, c.everyNthIgnored), idType);
  };
  KernelAttrs a = attrs({}, {{"ignore_index", c.ignoreIndex}});
  if (c.width != c.classes)
    a.setInt("num_classes", c.classes);
  const int64_t numClasses = c.width != c.classes ? c.classes : 0;
  cases.push_back({"cross_entropy", label, [=] {
                     KernelCall k;
                     k.input(logits());
                     k.input(targets());
                     k.output(DType::F32, {});
                     k.attrs = a;
                     k.reference = [c, numClasses](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{
                           ref::crossEntropy(in[0], in[1], c.ignoreIndex, numClasses)};
                     };
                     // An f32 sum of f32 row values for every logits dtype.
                     k.tolerances = k.cudaTolerances = {1e-5};
                     return k;
                   }});
  cases.push_back({"cross_entropy_grad", label, [=] {
                     KernelCall k;
                     k.input(logits());
                     k.input(targets());
                     k.input(RefTensor{{}, {0.7}}, DType::F32);
                     k.output(dtype, shape);
                     k.attrs = a;
                     k.reference = [c, numClasses](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{ref::crossEntropyGrad(
                           in[0], in[1], in[2].data[0], c.ignoreIndex, numClasses)};
                     };
                     k.metric = k.cudaMetric = Metric::Norm;
                     return k;
                   }});
}

/// One vocabulary shard (classes [offset, offset + width) of total) of the
/// vocabulary-parallel loss: cross_entropy_partial and its gradient, and
/// cross_entropy_finish and its gradient on positive sums, as the
/// all-reduce delivers them.
struct Shard {
  std::vector<int64_t> rows;
  int64_t width, offset, total, ignoreIndex;
};

void addShard(std::vector<ConformanceCase> &cases, DType dtype, DType idType, const Shard &s,
              uint64_t seed) {
  std::string label = std::string(dtypeName(dtype)) + "_ids_" + dtypeName(idType) + "_" +
                      shapeLabel(s.rows) + "_classes" + std::to_string(s.offset) + "_" +
                      std::to_string(s.offset + s.width) + "_of" + std::to_string(s.total);
  std::vector<int64_t> shape = s.rows;
  shape.push_back(s.width);
  auto targets = [=] {
    RefTensor values = randomIds(s.rows, seed, 0, s.total);
    for (int64_t i = 0; i < values.numel(); i += 4)
      values.data[i] = static_cast<double>(s.ignoreIndex);
    // Some targets inside this shard, whatever its share of the classes.
    for (int64_t i = 1; i < values.numel(); i += 4)
      values.data[i] = static_cast<double>(s.offset + (i * 7) % s.width);
    return Buffer::of(values, idType);
  };
  // The shift stands for the row maximum: near it, exp(logit − shift) stays
  // within f16's range in the gradient (logits are 3·N(0, 1)).
  const double shiftMean = s.width > 5000 ? 12.0 : 4.0;
  auto rowValues = [=](uint64_t offset, double scale, double shift) {
    return Buffer::of(randomTensor(s.rows, seed + offset, scale, shift), DType::F32);
  };
  KernelAttrs a = attrs(
      {}, {{"class_offset", s.offset}, {"num_classes", s.total}, {"ignore_index", s.ignoreIndex}});
  KernelAttrs finish = attrs({}, {{"ignore_index", s.ignoreIndex}});
  cases.push_back({"cross_entropy_partial", label, [=] {
                     KernelCall k;
                     k.input(randomTensor(shape, seed + 1, 3.0), dtype);
                     k.input(targets());
                     k.input(rowValues(2, 0.5, shiftMean)); // shift
                     k.output(DType::F32, s.rows);
                     k.output(DType::F32, s.rows);
                     k.attrs = a;
                     k.reference = [s](const std::vector<RefTensor> &in) {
                       return ref::crossEntropyPartial(in[0], in[1], in[2], s.offset, s.total,
                                                       s.ignoreIndex);
                     };
                     // The target's logit is copied.
                     k.tolerances = k.cudaTolerances = {1e-5, 0.0};
                     return k;
                   }});
  cases.push_back({"cross_entropy_partial_grad", label, [=] {
                     KernelCall k;
                     k.input(randomTensor(shape, seed + 1, 3.0), dtype);
                     k.input(targets());
                     k.input(rowValues(2, 0.5, shiftMean)); // shift
                     k.input(rowValues(3, 0.1, 0.0)); // dsumexp
                     k.input(rowValues(4, 0.1, 0.0)); // dtarget_logit
                     k.output(dtype, shape);
                     k.attrs = a;
                     k.reference = [s](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{ref::crossEntropyPartialGrad(
                           in[0], in[1], in[2], in[3], in[4], s.offset, s.total, s.ignoreIndex)};
                     };
                     k.metric = k.cudaMetric = Metric::Norm;
                     return k;
                   }});
  cases.push_back({"cross_entropy_finish", label, [=] {
                     KernelCall k;
                     k.input(rowValues(5, 0.3, 5.0)); // sumexp
                     k.input(rowValues(2, 0.5, shiftMean)); // shift
                     k.input(rowValues(4, 0.1, 0.0)); // target_logit
                     k.input(targets());
                     k.output(DType::F32, {});
                     k.attrs = finish;
                     k.reference = [s](const std::vector<RefTensor> &in) {
                       return std::vector<RefTensor>{
                           ref::crossEntropyFinish(in[0], in[1], in[2], in[3], s.ignoreIndex)};
                     };
                     k.tolerances = k.cudaTolerances = {1e-5};
                     return k;
                   }});
  cases.push_back({"cross_entropy_finish_grad", label, [=] {
                     KernelCall k;
                     k.input(rowValues(5, 0.3, 5.0)); // sumexp
                     k.input(targets());
                     k.input(RefTensor{{}, {1.3}}, DType::F32);
                     for (int i = 0; i < 3; ++i) k.output(DType::F32, s.rows);
                     k.attrs = finish;
                     k.reference = [s](const std::vector<RefTensor> &in) {
                       return ref::crossEntropyFinishGrad(in[0], in[1], in[2].data[0],
                                                          s.ignoreIndex);
                     };
                     k.tolerances = k.cudaTolerances = {1e-6};
                     return k;
                   }});
}

/// The cross-entropy family over one row and one class up to GPT-2's
/// vocabulary, ignored rows (some, all), padded vocabularies whose rows are
/// 16-byte aligned (the vectorised path: 136 columns, 50304) or not (133),
/// and vocabulary shards. Losses are scalars (relative error 1e-5);
/// gradients use the norm metric.
std::vector<ConformanceCase> crossEntropyCases() {
  const std::vector<WholeLoss> whole = {
      {{1}, 1, 1, -1, 0},          {{7}, 13, 13, -1, 0},        {{3, 37}, 129, 129, -1, 3},
      {{37}, 1000, 1000, -100, 2}, {{64}, 257, 257, 5, 0},      {{3}, 50257, 50257, -1, 0},
      {{4, 7}, 11, 11, 3, 1},      {{64}, 50257, 50257, -1, 0}, {{2, 5}, 1031, 1031, -100, 2},
      {{4, 9}, 9, 9, -1, 1},
  };
  const std::vector<WholeLoss> padded = {
      {{3, 37}, 129, 136, -1, 5},  {{3, 37}, 129, 133, -1, 5}, {{64}, 50257, 50304, -1, 5},
      {{5}, 1, 8, -1, 5},          {{3, 5}, 33, 40, -1, 5},    {{7}, 13, 64, -1, 5},
      {{2, 5}, 1031, 1032, -1, 5},
  };
  const std::vector<Shard> shards = {{{1}, 1, 0, 1, -1},
                                     {{7}, 13, 13, 39, -1},
                                     {{3, 5}, 11, 22, 33, -100},
                                     {{3, 37}, 129, 0, 300, 7},
                                     {{37}, 1000, 1000, 2000, -100},
                                     {{2, 512}, 12565, 25130, 50257, -1}};
  std::vector<ConformanceCase> cases;
  uint64_t seed = 10100;
  for (DType dtype : kFloatTypes)
    for (DType idType : {DType::I32, DType::I64}) {
      for (const WholeLoss &c : whole) addWholeLoss(cases, dtype, idType, c, seed += 8);
      for (const Shard &s : shards) addShard(cases, dtype, idType, s, seed += 8);
    }
  for (DType dtype : kFloatTypes)
    for (const WholeLoss &c : padded) addWholeLoss(cases, dtype, DType::I32, c, seed += 8);
  return cases;
}

LLMC_CONFORMANCE_CASES(CrossEntropy, crossEntropyCases);

TEST(CrossEntropyKernels, IgnoredRowsGetExactlyZeroGradient) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    const int64_t vocab = 33, ignore = -100;
    RefTensor targets = targetsWithIgnored({3, 7}, 702, vocab, ignore, 3);
    Buffer lb = Buffer::of(randomTensor({3, 7, vocab}, 701, 3.0), dtype),
           tb = Buffer::of(targets, DType::I32),
           dloss = Buffer::of(RefTensor{{}, {0.7}}, DType::F32), dlogits(dtype, {3, 7, vocab});
    dlogits.poison();
    ASSERT_TRUE(runKernel("cross_entropy_grad", {&lb, &tb, &dloss}, {&dlogits},
                          attrs({}, {{"ignore_index", ignore}})));
    RefTensor got = dlogits.toRef();
    for (int64_t r = 0; r < targets.numel(); ++r) {
      if (targets.data[r] != ignore)
        continue;
      for (int64_t j = 0; j < vocab; ++j) ASSERT_EQ(got.data[r * vocab + j], 0.0);
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
