//===- linear_cross_entropy_test.cpp - the fused head + loss --------------===//
//
// Conformance cases (Conformance.h) of linear_cross_entropy(_train) and
// the vocabulary-parallel linear_cross_entropy_partial(_grad) against the
// unfused double reference (the head's product, cross_entropy,
// cross_entropy_grad and the backward's products): every chunk size from
// one row to all of them and a size that leaves a short last chunk, both
// weight layouts, ignored targets, frozen heads, 16-bit heads, GPT-2's
// vocabulary split into padded shards. Then, against other kernels: a
// frozen head (frozen_weight: no dw output) and the evaluation kernel give
// the trained head's loss and dh bit for bit; bf16 and f16 heads equal the
// unfused kernels themselves; the shards equal the unfused sharded kernels
// (reduce_max, cross_entropy_partial and its gradient). A padded
// vocabulary (num_classes < V) gives the unpadded head's loss, dh and dw
// bit for bit, and dw's padding exactly 0, whatever the padded weights
// hold.

#include "Conformance.h"

#include "common/HeadScratch.h"

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

namespace llmc::test {
namespace {

struct HeadCase {
  std::vector<int64_t> rows;
  int64_t width, vocab;
  bool transposeB;
};

/// `a` with the frozen_weight flag: the backward forms without dw.
KernelAttrs withFrozenWeight(KernelAttrs a) {
  a.setInt("frozen_weight", 1);
  return a;
}

/// The scratch of a head over `rows` rows of width `width` and `vocab`
/// classes in chunks of `chunk`: the chunk, and a 16-bit trained weight's
/// fp32 sum over several chunks (common/HeadScratch.h).
Buffer headScratch(int64_t rows, int64_t width, int64_t chunk, int64_t vocab, DType dtype,
                   bool weightGrad) {
  return Buffer(DType::F32, {chunk + headAccumulatorRows(rows, width, chunk,
                                                         dtype != DType::F32, weightGrad),
                             vocab});
}

const std::vector<HeadCase> kHeads = {
    {{3, 7}, 16, 33, true},   // tied layout, w [V, D]
    {{2, 5}, 24, 257, false}, // untied, w [D, V]
    {{13}, 8, 1031, true},
};

//===----------------------------------------------------------------------===//
// Conformance
//===----------------------------------------------------------------------===//

/// One fused head's call: h [rows..., width] and w ([V, D] when
/// transposeB, else [D, V]) in `dtype`, targets (i64 with ignore_index
/// `ignore` at element 1, or i32 with the default -1 at element 3).
struct HeadSetting {
  DType dtype;
  std::vector<int64_t> rows;
  int64_t width, vocab;
  bool transposeB;
  int64_t chunk;
  double wScale;
  bool cpuTargets; ///< i64 with ignore_index -100 at element 1
  bool ignoreOne = true;
};

std::string labelOf(const HeadSetting &s) {
  return std::string(dtypeName(s.dtype)) + "_" + shapeLabel(s.rows) + "x" +
         std::to_string(s.width) + "_V" + std::to_string(s.vocab) +
         (s.transposeB ? "_wVD" : "_wDV") + "_chunk" + std::to_string(s.chunk) +
         (s.cpuTargets ? "_ignore100" : "");
}

/// Against the double reference (the head's product, cross_entropy and
/// its gradient, the backward's products): in f32 the loss 1e-5 (an f32
/// sum of f32 row values), dh and dw 1e-5 by norm (sums over the
/// vocabulary and the rows). A bf16 or f16 head rounds the logits and the
/// gradient to its type where the unfused matmul stores them: the dtype's
/// tolerance, by norm. CUDA against the CPU: f32 everything 1e-5 by norm,
/// the scratch too (it holds the last chunk's gradient on both backends);
/// 16-bit heads the loss 1e-3 and dh, dw the dtype's tolerance, the scratch
/// not compared (the GPU holds the chunk in the type).
ConformanceCase headCase(const std::string &kernel, const HeadSetting &s, uint64_t seed,
                         bool frozen = false) {
  return {kernel, labelOf(s) + (frozen ? "_frozen" : ""), [=] {
            KernelCall k;
            const bool half = s.dtype != DType::F32, train = kernel != "linear_cross_entropy";
            std::vector<int64_t> hShape = s.rows;
            hShape.push_back(s.width);
            std::vector<int64_t> wShape = s.transposeB ? std::vector<int64_t>{s.vocab, s.width}
                                                       : std::vector<int64_t>{s.width, s.vocab};
            RefTensor targets = randomIds(s.rows, seed + 3, 0, s.vocab);
            if (s.ignoreOne)
              targets.data[s.cpuTargets ? 1 : 3] = s.cpuTargets ? -100 : -1;
            const int64_t rows = targets.numel();
            k.input(randomTensor(hShape, seed + 1), s.dtype);
            k.input(randomTensor(wShape, seed + 2, s.wScale), s.dtype);
            k.input(targets, s.cpuTargets ? DType::I64 : DType::I32);
            if (train)
              k.input(RefTensor{{}, {0.7}}, DType::F32);
            k.output(DType::F32, {});
            if (train)
              k.output(s.dtype, hShape);
            if (train && !frozen)
              k.output(s.dtype, wShape);
            const std::vector<int64_t> scratch =
                k.buffers[k.output(headScratch(rows, s.width, std::min(s.chunk, rows), s.vocab,
                                               s.dtype, train && !frozen))]
                    .shape;
            k.attrs = attrs({}, {{"chunk_rows", s.chunk}, {"transpose_b", s.transposeB}});
            if (s.cpuTargets)
              k.attrs.setInt("ignore_index", -100);
            if (frozen)
              k.attrs.setInt("frozen_weight", 1);
            const int64_t ignore = s.cpuTargets ? -100 : -1;
            k.reference = [s, train, frozen, ignore, scratch](const std::vector<RefTensor> &in) {
              const double dloss = 0.7;
              std::vector<RefTensor> r = ref::linearCrossEntropy(in[0], in[1], in[2], s.transposeB,
                                                                 ignore, train ? &dloss : nullptr);
              if (!train)
                r.resize(1);
              if (frozen)
                r.resize(2);
              r.push_back(RefTensor::zeros(scratch)); // unspecified: not compared
              return r;
            };
            const double tol = half ? tolerance(s.dtype) : 1e-5;
            const double unchecked = std::numeric_limits<double>::infinity();
            k.tolerances.assign(k.outputs.size(), tol);
            k.tolerances.back() = unchecked;
            k.metrics.assign(k.outputs.size(), Metric::Norm);
            k.metrics[0] = Metric::Elementwise;
            k.cudaMetric = Metric::Norm;
            k.cudaTolerances.assign(k.outputs.size(), tol);
            if (half)
              k.cudaTolerances[0] = 1e-3, k.cudaTolerances.back() = unchecked;
            return k;
          }};
}

/// Small heads at every chunk size from one row to all of them and one
/// that leaves a short last chunk, both layouts, an ignored target; GPT-2's
/// vocabulary in f32 (both layouts, an ignored target) and bf16 and f16
/// (tied layout), one chunk and several.
std::vector<ConformanceCase> headCases() {
  std::vector<HeadSetting> settings;
  for (const HeadCase &c : kHeads) {
    const int64_t rows =
        std::accumulate(c.rows.begin(), c.rows.end(), int64_t{1}, std::multiplies<int64_t>());
    for (int64_t chunk : {int64_t{1}, int64_t{4}, rows - 1, rows})
      settings.push_back({DType::F32, c.rows, c.width, c.vocab, c.transposeB, chunk, 0.5, true});
  }
  for (bool transposeB : {true, false})
    for (int64_t chunk : {int64_t{1}, int64_t{5}, int64_t{64}})
      settings.push_back({DType::F32, {4, 16}, 48, 50257, transposeB, chunk, 0.1, false});
  for (DType dtype : {DType::BF16, DType::F16})
    for (int64_t chunk : {int64_t{5}, int64_t{64}})
      settings.push_back({dtype, {4, 16}, 48, 50257, true, chunk, 0.1, false, false});
  std::vector<ConformanceCase> cases;
  uint64_t seed = 10130;
  for (const HeadSetting &s : settings) {
    cases.push_back(headCase("linear_cross_entropy_train", s, seed += 4));
    cases.push_back(headCase("linear_cross_entropy_train", s, seed, /*frozen=*/true));
    cases.push_back(headCase("linear_cross_entropy", s, seed));
  }
  return cases;
}

LLMC_CONFORMANCE_CASES(LinearCrossEntropy, headCases);

/// The vocabulary-parallel head on rank `rank`'s shard of GPT-2's
/// vocabulary over 2 ranks (the second padded: its rows past the
/// vocabulary are zeros), an ignored target. The statistics (max, Σ exp,
/// the target's logit) elementwise, dh and dw by norm: in f32 1e-5; in
/// bf16 the dtype's tolerance (the logits are rounded to the type, and may
/// round to neighbours on the two backends' GEMMs). The scratch is not
/// compared. The backward's shift, dsumexp and dtarget_logit are made-up
/// row values in their ranges.
ConformanceCase shardCase(const std::string &kernel, DType dtype, int64_t rank, int64_t chunk,
                          bool frozen, uint64_t seed) {
  const int64_t vocab = 50257, shard = 25129, width = 48;
  std::string label = std::string(dtypeName(dtype)) + "_rank" + std::to_string(rank) + "_chunk" +
                      std::to_string(chunk) + (frozen ? "_frozen" : "");
  return {kernel, label, [=] {
            KernelCall k;
            const bool grad = kernel == "linear_cross_entropy_partial_grad";
            RefTensor w = randomTensor({shard, width}, seed + 1, 0.1);
            if (rank == 1)
              std::fill(w.data.begin() + (vocab - shard) * width, w.data.end(), 0.0);
            RefTensor ids = randomIds({4, 16}, seed + 2, 0, vocab);
            ids.data[3] = -1;
            k.input(randomTensor({4, 16, width}, seed + 3), dtype);
            k.input(w, dtype);
            k.input(ids, DType::I32);
            if (grad) {
              k.input(randomTensor({4, 16}, seed + 4, 0.1, 1.0), DType::F32);
              k.input(randomTensor({4, 16}, seed + 5, 1e-3), DType::F32);
              k.input(randomTensor({4, 16}, seed + 6, 1e-2), DType::F32);
              k.output(dtype, {4, 16, width});
              if (!frozen)
                k.output(dtype, {shard, width});
              k.output(headScratch(64, width, chunk, shard, dtype, !frozen));
            } else {
              for (int stat = 0; stat < 3; ++stat) k.output(DType::F32, {4, 16});
              k.output(DType::F32, {chunk, shard});
            }
            k.attrs = attrs({}, {{"chunk_rows", chunk},
                                 {"transpose_b", 1},
                                 {"class_offset", rank * shard},
                                 {"num_classes", vocab}});
            if (frozen)
              k.attrs.setInt("frozen_weight", 1);
            const std::vector<int64_t> scratch = k.buffers.back().shape;
            k.reference = [=](const std::vector<RefTensor> &in) {
              std::vector<RefTensor> r =
                  grad ? ref::linearCrossEntropyPartialGrad(in[0], in[1], in[2], in[3], in[4],
                                                            in[5], true, rank * shard, vocab, -1)
                       : ref::linearCrossEntropyPartial(in[0], in[1], in[2], true, rank * shard,
                                                        vocab, -1);
              if (frozen)
                r.resize(1);
              r.push_back(RefTensor::zeros(scratch)); // unspecified: not compared
              return r;
            };
            const double tol = dtype == DType::F32 ? 1e-5 : tolerance(dtype);
            k.tolerances.assign(k.outputs.size(), tol);
            k.tolerances.back() = std::numeric_limits<double>::infinity();
            k.cudaTolerances = k.tolerances;
            k.metric = k.cudaMetric = grad ? Metric::Norm : Metric::Elementwise;
            // The target logit is one 48-term dot product, which can cancel to
            // near zero: per element it differs by more than 1e-5 relative
            // between BLAS kernels (OpenBLAS's Zen vs SkylakeX), as a norm not.
            if (!grad)
              k.metrics = k.cudaMetrics = {Metric::Elementwise, Metric::Elementwise, Metric::Norm,
                                           Metric::Elementwise};
            return k;
          }};
}

std::vector<ConformanceCase> shardCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 10190;
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t rank : {0, 1})
      for (int64_t chunk : {int64_t{5}, int64_t{64}}) {
        cases.push_back(
            shardCase("linear_cross_entropy_partial", dtype, rank, chunk, false, seed += 8));
        for (bool frozen : {false, true})
          cases.push_back(
              shardCase("linear_cross_entropy_partial_grad", dtype, rank, chunk, frozen, seed));
      }
  return cases;
}

LLMC_CONFORMANCE_CASES(LinearCrossEntropyShards, shardCases);

/// A frozen head (frozen_weight: no dw output) and the evaluation kernel
/// give the trained head's loss and dh bit for bit, at every chunk size.
TEST(LinearCrossEntropyKernels, FrozenAndEvalHeadsAreTheTrainedHeadBitForBit) {
  uint64_t seed = 900;
  for (const HeadCase &c : kHeads) {
    std::vector<int64_t> hShape = c.rows;
    hShape.push_back(c.width);
    std::vector<int64_t> wShape =
        c.transposeB ? std::vector<int64_t>{c.vocab, c.width} : std::vector<int64_t>{c.width, c.vocab};
    RefTensor h = roundTo(randomTensor(hShape, ++seed), DType::F32);
    RefTensor w = roundTo(randomTensor(wShape, ++seed, 0.5), DType::F32);
    RefTensor targets = randomIds(c.rows, ++seed, 0, c.vocab);
    const int64_t rows = targets.numel(), ignore = -100;
    targets.data[1] = static_cast<double>(ignore);
    const double dloss = 0.7;
    for (int64_t chunk : {int64_t{1}, int64_t{4}, rows - 1, rows}) {
      SCOPED_TRACE("V " + std::to_string(c.vocab) + " chunk " + std::to_string(chunk));
      Buffer hb = Buffer::of(h, DType::F32), wb = Buffer::of(w, DType::F32),
             tb = Buffer::of(targets, DType::I64),
             db = Buffer::of(RefTensor{{}, {dloss}}, DType::F32);
      Buffer loss(DType::F32, {}), dh(DType::F32, hShape), dw(DType::F32, wShape),
          scratch(DType::F32, {chunk, c.vocab});
      loss.poison(), dh.poison(), dw.poison();
      KernelAttrs a = attrs({}, {{"chunk_rows", chunk}, {"transpose_b", c.transposeB},
                                 {"ignore_index", ignore}});
      ASSERT_TRUE(runKernel("linear_cross_entropy_train", {&hb, &wb, &tb, &db},
                            {&loss, &dh, &dw, &scratch}, a));
      Buffer frozenLoss(DType::F32, {}), frozenDh(DType::F32, hShape);
      frozenLoss.poison(), frozenDh.poison();
      ASSERT_TRUE(runKernel("linear_cross_entropy_train", {&hb, &wb, &tb, &db},
                            {&frozenLoss, &frozenDh, &scratch}, withFrozenWeight(a)));
      EXPECT_EQ(frozenLoss.toRef().data, loss.toRef().data);
      EXPECT_EQ(frozenDh.toRef().data, dh.toRef().data);
      Buffer evalLoss(DType::F32, {}), evalScratch(DType::F32, {chunk, c.vocab});
      evalLoss.poison();
      ASSERT_TRUE(runKernel("linear_cross_entropy", {&hb, &wb, &tb}, {&evalLoss, &evalScratch},
                            a));
      EXPECT_EQ(evalLoss.toRef().data[0], loss.toRef().data[0]);
    }
  }
}

/// bf16 and f16 heads against the unfused kernels on the same values
/// (matmul, cross_entropy, cross_entropy_grad, the backward's matmuls): one
/// chunk is their result bit for bit; smaller chunks sum dw in another
/// order (and, rounding dh per chunk, nothing else).
TEST(LinearCrossEntropyKernels, HalfHeadsMatchTheUnfusedKernels) {
  uint64_t seed = 950;
  for (DType dtype : {DType::BF16, DType::F16})
    for (const HeadCase &c : kHeads) {
      std::vector<int64_t> hShape = c.rows;
      hShape.push_back(c.width);
      std::vector<int64_t> wShape = c.transposeB ? std::vector<int64_t>{c.vocab, c.width}
                                                 : std::vector<int64_t>{c.width, c.vocab};
      RefTensor targets = randomIds(c.rows, ++seed, 0, c.vocab);
      const int64_t rows = targets.numel(), ignore = -100;
      targets.data[1] = static_cast<double>(ignore);
      Buffer hb = Buffer::of(randomTensor(hShape, ++seed), dtype),
             wb = Buffer::of(randomTensor(wShape, ++seed, 0.5), dtype),
             tb = Buffer::of(targets, DType::I64),
             db = Buffer::of(RefTensor{{}, {0.7}}, DType::F32);
      // Unfused.
      std::vector<int64_t> logitsShape = c.rows;
      logitsShape.push_back(c.vocab);
      Buffer logits(dtype, logitsShape), loss(DType::F32, {}), g(dtype, logitsShape),
          dh(dtype, hShape), dw(dtype, wShape);
      ASSERT_TRUE(runKernel("matmul", {&hb, &wb}, {&logits},
                            attrs({}, {{"transpose_b", c.transposeB}})));
      ASSERT_TRUE(runKernel("cross_entropy", {&logits, &tb}, {&loss},
                            attrs({}, {{"ignore_index", ignore}})));
      ASSERT_TRUE(runKernel("cross_entropy_grad", {&logits, &tb, &db}, {&g},
                            attrs({}, {{"ignore_index", ignore}})));
      ASSERT_TRUE(runKernel("matmul", {&g, &wb}, {&dh},
                            attrs({}, {{"transpose_b", !c.transposeB}})));
      Buffer gRows = g, hRows = hb;
      gRows.shape = {rows, c.vocab};
      hRows.shape = {rows, c.width};
      if (c.transposeB)
        ASSERT_TRUE(runKernel("matmul", {&gRows, &hRows}, {&dw}, attrs({}, {{"transpose_a", 1}})));
      else
        ASSERT_TRUE(runKernel("matmul", {&hRows, &gRows}, {&dw}, attrs({}, {{"transpose_a", 1}})));
      for (int64_t chunk : {rows, int64_t{4}}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " V " + std::to_string(c.vocab) + " chunk " +
                     std::to_string(chunk));
        Buffer fusedLoss(DType::F32, {}), fusedDh(dtype, hShape), fusedDw(dtype, wShape),
            scratch = headScratch(rows, c.width, chunk, c.vocab, dtype, true),
            frozenScratch = headScratch(rows, c.width, chunk, c.vocab, dtype, false);
        fusedLoss.poison(), fusedDh.poison(), fusedDw.poison();
        KernelAttrs a = attrs({}, {{"chunk_rows", chunk}, {"transpose_b", c.transposeB},
                                   {"ignore_index", ignore}});
        ASSERT_TRUE(runKernel("linear_cross_entropy_train", {&hb, &wb, &tb, &db},
                              {&fusedLoss, &fusedDh, &fusedDw, &scratch}, a));
        EXPECT_EQ(fusedLoss.toRef().data, loss.toRef().data);
        Buffer frozenLoss(DType::F32, {}), frozenDh(dtype, hShape);
        frozenLoss.poison(), frozenDh.poison();
        ASSERT_TRUE(runKernel("linear_cross_entropy_train", {&hb, &wb, &tb, &db},
                              {&frozenLoss, &frozenDh, &frozenScratch}, withFrozenWeight(a)));
        EXPECT_EQ(frozenLoss.toRef().data, loss.toRef().data);
        EXPECT_EQ(frozenDh.toRef().data, fusedDh.toRef().data);
        if (chunk == rows) {
          EXPECT_EQ(fusedDh.toRef().data, dh.toRef().data);
          EXPECT_EQ(fusedDw.toRef().data, dw.toRef().data);
        } else {
          EXPECT_CLOSE(fusedDh.toRef(), dh.toRef(), Metric::Norm, tolerance(dtype));
          EXPECT_CLOSE(fusedDw.toRef(), dw.toRef(), Metric::Norm, tolerance(dtype));
        }
      }
    }
}

/// A padded vocabulary: w holds `padded` classes of which the first
/// `vocab` are real (num_classes), its padding filled with large values
/// that would dominate any row they were read in. In f32, bf16 and f16,
/// both weight layouts, one chunk and several, the loss, dh and dw's real
/// part equal the unpadded head's on the same chunks bit for bit (the CPU
/// computes the classes only, with the padded leading dimensions), dw's
/// padding is exactly 0, and the loss is the float64 reference's.
TEST(LinearCrossEntropyKernels, PaddedVocabularyMatchesTheUnpaddedHead) {
  uint64_t seed = 1500;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (const HeadCase &c : kHeads) {
      const int64_t padded = (c.vocab + 15) / 16 * 16 + 16; // always some padding
      std::vector<int64_t> hShape = c.rows;
      hShape.push_back(c.width);
      auto layout = [&](int64_t v) {
        return c.transposeB ? std::vector<int64_t>{v, c.width} : std::vector<int64_t>{c.width, v};
      };
      RefTensor h = roundTo(randomTensor(hShape, ++seed), dtype);
      RefTensor real = roundTo(randomTensor(layout(c.vocab), ++seed, 0.5), dtype);
      RefTensor full = RefTensor::zeros(layout(padded));
      for (int64_t i = 0; i < full.numel(); ++i) {
        const int64_t row = i / full.shape[1], col = i % full.shape[1];
        const bool isClass = (c.transposeB ? row : col) < c.vocab;
        full.data[i] = isClass ? real.data[c.transposeB ? i : row * c.vocab + col] : 40.0;
      }
      RefTensor targets = randomIds(c.rows, ++seed, 0, c.vocab);
      const int64_t rows = targets.numel(), ignore = -100;
      targets.data[1] = static_cast<double>(ignore);
      Buffer hb = Buffer::of(h, dtype), realW = Buffer::of(real, dtype),
             paddedW = Buffer::of(full, dtype), tb = Buffer::of(targets, DType::I64),
             db = Buffer::of(RefTensor{{}, {0.7}}, DType::F32);
      for (int64_t chunk : {rows, int64_t{4}}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " V " + std::to_string(c.vocab) + " of " +
                     std::to_string(padded) + " chunk " + std::to_string(chunk));
        KernelAttrs a = attrs({}, {{"chunk_rows", chunk}, {"transpose_b", c.transposeB},
                                   {"ignore_index", ignore}});
        KernelAttrs classes = a;
        classes.setInt("num_classes", c.vocab);
        Buffer loss(DType::F32, {}), dh(dtype, hShape), dw(dtype, layout(c.vocab)),
            scratch = headScratch(rows, c.width, chunk, c.vocab, dtype, true);
        ASSERT_TRUE(runKernel("linear_cross_entropy_train", {&hb, &realW, &tb, &db},
                              {&loss, &dh, &dw, &scratch}, a));
        Buffer paddedLoss(DType::F32, {}), paddedDh(dtype, hShape), paddedDw(dtype, layout(padded)),
            paddedScratch = headScratch(rows, c.width, chunk, padded, dtype, true);
        paddedLoss.poison(), paddedDh.poison(), paddedDw.poison();
        ASSERT_TRUE(runKernel("linear_cross_entropy_train", {&hb, &paddedW, &tb, &db},
                              {&paddedLoss, &paddedDh, &paddedDw, &paddedScratch}, classes));
        EXPECT_EQ(paddedLoss.toRef().data, loss.toRef().data);
        EXPECT_EQ(paddedDh.toRef().data, dh.toRef().data);
        RefTensor got = paddedDw.toRef(), want = dw.toRef();
        for (int64_t i = 0; i < got.numel(); ++i) {
          const int64_t row = i / got.shape[1], col = i % got.shape[1];
          const int64_t cls = c.transposeB ? row : col;
          if (cls >= c.vocab) {
            ASSERT_EQ(got.data[i], 0.0) << "dw's padding at " << i;
          } else {
            ASSERT_EQ(got.data[i], want.data[c.transposeB ? i : row * c.vocab + col])
                << "dw at " << i;
          }
        }
        Buffer evalLoss(DType::F32, {}), evalScratch(DType::F32, {chunk, padded});
        ASSERT_TRUE(runKernel("linear_cross_entropy", {&hb, &paddedW, &tb},
                              {&evalLoss, &evalScratch}, classes));
        EXPECT_EQ(evalLoss.toRef().data, loss.toRef().data);
        const double dloss = 0.7;
        std::vector<RefTensor> expected =
            ref::linearCrossEntropy(h, full, targets, c.transposeB, ignore, &dloss, c.vocab);
        EXPECT_CLOSE(paddedLoss.toRef(), expected[0], Metric::Elementwise,
                     dtype == DType::F32 ? 1e-5 : 1e-2);
        EXPECT_CLOSE(paddedDw.toRef(), expected[2], Metric::Norm, tolerance(dtype));
      }
    }
}

/// The unfused vocabulary-parallel head on one rank's shard: its logits and
/// their statistics, then (given the all-reduced shift, dsumexp and
/// dtarget_logit) the gradient's products.
struct UnfusedShard {
  Buffer logits, max;
  UnfusedShard(Buffer &h, Buffer &w, DType dtype, const std::vector<int64_t> &rows,
               int64_t width, const KernelAttrs &shard)
      : logits(dtype, {rows[0], rows[1], width}), max(DType::F32, rows) {
    EXPECT_TRUE(runKernel("matmul", {&h, &w}, {&logits}, attrs({}, {{"transpose_b", 1}})));
    EXPECT_TRUE(runKernel("reduce_max", {&logits}, {&max}, shard));
  }
};

/// linear_cross_entropy_partial(_grad) rank by rank against reduce_max,
/// cross_entropy_partial, cross_entropy_partial_grad and the products on
/// the same shard: GPT-2's vocabulary over 2 and 4 ranks (the last shard
/// padded) and 5 classes over 4 ranks (the last shard padding only),
/// ignored rows, f32 and bf16. With one chunk everything but the sum is
/// the unfused ops' bit for bit; the sum is relative to the shard's max
/// and matches once rescaled to the shared shift. In f32 the shards'
/// gradients also sum to the whole head's.
TEST(LinearCrossEntropyKernels, ShardsMatchTheUnfusedShardedKernels) {
  struct Split {
    int64_t vocab, ranks;
    int64_t padded = 0; ///< a padded vocabulary's columns (llmc-pad-vocab); 0: vocab
  };
  uint64_t seed = 980;
  const std::vector<int64_t> rows = {2, 5};
  const int64_t n = 10, width = 16, ignore = -100;
  const double dloss = 0.7;
  for (DType dtype : {DType::F32, DType::BF16})
    for (Split split : {Split{50257, 2}, Split{50257, 4}, Split{5, 4}, Split{50257, 2, 50304},
                        Split{5, 4, 16}}) {
      // Padded to 16 over 4 ranks, 5 classes leave rank 1 one class and
      // ranks 2 and 3 padding only.
      const int64_t columns = split.padded ? split.padded : split.vocab;
      const int64_t shard = (columns + split.ranks - 1) / split.ranks;
      RefTensor h = roundTo(randomTensor({2, 5, width}, ++seed), dtype);
      // The padded table: rows past the vocabulary are zeros, as ZeRO and
      // tensor parallelism initialise them.
      RefTensor w = roundTo(randomTensor({shard * split.ranks, width}, ++seed, 0.5), dtype);
      std::fill(w.data.begin() + split.vocab * width, w.data.end(), 0.0);
      RefTensor targets = randomIds(rows, ++seed, 0, split.vocab);
      targets.data[1] = static_cast<double>(ignore);
      Buffer hb = Buffer::of(h, dtype), tb = Buffer::of(targets, DType::I64);
      auto shardAttrs = [&](int64_t rank, int64_t chunk = 0) {
        return attrs({}, {{"class_offset", rank * shard}, {"num_classes", split.vocab},
                          {"ignore_index", ignore}, {"chunk_rows", chunk},
                          {"transpose_b", 1}});
      };
      std::vector<Buffer> wb;
      std::vector<UnfusedShard> unfused;
      RefTensor shift = RefTensor::zeros(rows);
      std::fill(shift.data.begin(), shift.data.end(), -INFINITY);
      for (int64_t rank = 0; rank < split.ranks; ++rank) {
        wb.push_back(Buffer::of(ref::slice(w, {rank * shard, 0}, {shard, width}), dtype));
        unfused.emplace_back(hb, wb.back(), dtype, rows, shard, shardAttrs(rank));
        for (int64_t r = 0; r < n; ++r)
          shift.data[r] = std::max(shift.data[r], unfused.back().max.toRef().data[r]);
      }
      Buffer shiftb = Buffer::of(shift, DType::F32);
      std::vector<RefTensor> sums, targetLogits;
      RefTensor sumexp = RefTensor::zeros(rows), targetLogit = RefTensor::zeros(rows);
      for (int64_t rank = 0; rank < split.ranks; ++rank) {
        Buffer se(DType::F32, rows), tl(DType::F32, rows);
        ASSERT_TRUE(runKernel("cross_entropy_partial", {&unfused[rank].logits, &tb, &shiftb},
                              {&se, &tl}, shardAttrs(rank)));
        sums.push_back(se.toRef());
        targetLogits.push_back(tl.toRef());
        for (int64_t r = 0; r < n; ++r) {
          sumexp.data[r] += sums.back().data[r];
          targetLogit.data[r] += targetLogits.back().data[r];
        }
      }
      Buffer seb = Buffer::of(sumexp, DType::F32), db = Buffer::of(RefTensor{{}, {dloss}}, DType::F32),
             ds(DType::F32, rows), dm(DType::F32, rows), dt(DType::F32, rows);
      ASSERT_TRUE(runKernel("cross_entropy_finish_grad", {&seb, &tb, &db}, {&ds, &dm, &dt},
                            attrs({}, {{"ignore_index", ignore}})));

      RefTensor dhSum = RefTensor::zeros(h.shape);
      std::vector<RefTensor> dwShards;
      for (int64_t rank = 0; rank < split.ranks; ++rank) {
        Buffer g(dtype, {2, 5, shard}), dh(dtype, h.shape), dw(dtype, {shard, width});
        ASSERT_TRUE(runKernel("cross_entropy_partial_grad",
                              {&unfused[rank].logits, &tb, &shiftb, &ds, &dt}, {&g},
                              shardAttrs(rank)));
        ASSERT_TRUE(runKernel("matmul", {&g, &wb[rank]}, {&dh}));
        Buffer gRows = g, hRows = hb;
        gRows.shape = {n, shard};
        hRows.shape = {n, width};
        ASSERT_TRUE(runKernel("matmul", {&gRows, &hRows}, {&dw}, attrs({}, {{"transpose_a", 1}})));
        for (int64_t chunk : {n, int64_t{3}}) {
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " V " + std::to_string(split.vocab) +
                       " padded " + std::to_string(columns) + " rank " + std::to_string(rank) +
                       "/" + std::to_string(split.ranks) + " chunk " + std::to_string(chunk));
          Buffer max(DType::F32, rows), se(DType::F32, rows), tl(DType::F32, rows),
              scratch(DType::F32, {chunk, shard}),
              gradScratch = headScratch(n, width, chunk, shard, dtype, true);
          max.poison(), se.poison(), tl.poison();
          ASSERT_TRUE(runKernel("linear_cross_entropy_partial", {&hb, &wb[rank], &tb},
                                {&max, &se, &tl, &scratch}, shardAttrs(rank, chunk)));
          RefTensor rescaled = se.toRef();
          for (int64_t r = 0; r < n; ++r)
            rescaled.data[r] *= std::exp(max.toRef().data[r] - shift.data[r]);
          EXPECT_CLOSE(rescaled, sums[rank], Metric::Elementwise, 1e-5);
          Buffer fusedDh(dtype, h.shape), fusedDw(dtype, {shard, width});
          fusedDh.poison(), fusedDw.poison();
          ASSERT_TRUE(runKernel("linear_cross_entropy_partial_grad",
                                {&hb, &wb[rank], &tb, &shiftb, &ds, &dt},
                                {&fusedDh, &fusedDw, &gradScratch}, shardAttrs(rank, chunk)));
          Buffer frozenDh(dtype, h.shape);
          frozenDh.poison();
          ASSERT_TRUE(runKernel("linear_cross_entropy_partial_grad",
                                {&hb, &wb[rank], &tb, &shiftb, &ds, &dt}, {&frozenDh, &scratch},
                                withFrozenWeight(shardAttrs(rank, chunk))));
          EXPECT_EQ(frozenDh.toRef().data, fusedDh.toRef().data);
          if (chunk == n) {
            EXPECT_EQ(max.toRef().data, unfused[rank].max.toRef().data);
            EXPECT_EQ(tl.toRef().data, targetLogits[rank].data);
            EXPECT_EQ(fusedDh.toRef().data, dh.toRef().data);
            EXPECT_EQ(fusedDw.toRef().data, dw.toRef().data);
          } else {
            // A chunk's logits are a product of fewer rows, which some sgemm
            // kernels (OpenBLAS's Prescott) sum in another order: equal to
            // the rounding of the logits' scale, not of each element's.
            EXPECT_CLOSE(max.toRef(), unfused[rank].max.toRef(), Metric::Norm, 1e-6);
            EXPECT_CLOSE(tl.toRef(), targetLogits[rank], Metric::Norm, 1e-6);
            EXPECT_CLOSE(fusedDh.toRef(), dh.toRef(), Metric::Norm, tolerance(dtype));
            EXPECT_CLOSE(fusedDw.toRef(), dw.toRef(), Metric::Norm, tolerance(dtype));
          }
        }
        for (int64_t i = 0; i < dhSum.numel(); ++i) dhSum.data[i] += dh.toRef().data[i];
        dwShards.push_back(dw.toRef());
      }
      if (dtype != DType::F32)
        continue;
      std::vector<RefTensor> whole = ref::linearCrossEntropy(
          h, ref::slice(w, {0, 0}, {split.vocab, width}), targets, true, ignore, &dloss);
      EXPECT_CLOSE(dhSum, whole[1], Metric::Norm, 1e-5);
      RefTensor dw = ref::concat(dwShards, 0);
      EXPECT_CLOSE(ref::slice(dw, {0, 0}, {split.vocab, width}), whole[2], Metric::Norm, 1e-5);
    }
}

TEST(LinearCrossEntropyKernels, AnInvalidTargetMakesTheLossNaN) {
  RefTensor h = randomTensor({4, 8}, 931), w = randomTensor({9, 8}, 932);
  RefTensor targets{{4}, {0, 9, 3, -1}}; // 9 is outside [0, 9); -1 is ignored
  Buffer hb = Buffer::of(h, DType::F32), wb = Buffer::of(w, DType::F32),
         tb = Buffer::of(targets, DType::I32), loss(DType::F32, {}), scratch(DType::F32, {2, 9});
  ASSERT_TRUE(runKernel("linear_cross_entropy", {&hb, &wb, &tb}, {&loss, &scratch},
                        attrs({}, {{"chunk_rows", 2}, {"transpose_b", 1}})));
  EXPECT_TRUE(std::isnan(loss.toRef().data[0]));
}

TEST(LinearCrossEntropyKernels, BindingErrorsNameTheOperand) {
  KernelAttrs a = attrs({}, {{"chunk_rows", 4}, {"transpose_b", 1}});
  TensorView h = typeOnly(DType::F32, {8, 16}), w = typeOnly(DType::F32, {32, 16}),
             t = typeOnly(DType::I32, {8}), loss = typeOnly(DType::F32, {}),
             scratch = typeOnly(DType::F32, {4, 32});
  EXPECT_EQ(bindError("linear_cross_entropy", {h, w, t}, {loss, scratch}, a), "");
  EXPECT_NE(bindError("linear_cross_entropy", {h, typeOnly(DType::F32, {32, 15}), t},
                      {loss, scratch}, a)
                .find("does not match h"),
            std::string::npos);
  EXPECT_NE(bindError("linear_cross_entropy", {h, w, t}, {loss, typeOnly(DType::F32, {8, 32})}, a)
                .find("scratch"),
            std::string::npos);
  EXPECT_NE(bindError("linear_cross_entropy", {typeOnly(DType::BF16, {8, 16}), w, t},
                      {loss, scratch}, a)
                .find("w"),
            std::string::npos);
  EXPECT_NE(bindError("linear_cross_entropy", {h, w, t}, {loss, scratch},
                      attrs({}, {{"chunk_rows", 0}, {"transpose_b", 1}}))
                .find("chunk_rows must be >= 1"),
            std::string::npos);
  // The training form: dw unless frozen_weight.
  TensorView dloss = typeOnly(DType::F32, {});
  EXPECT_EQ(bindError("linear_cross_entropy_train", {h, w, t, dloss}, {loss, h, w, scratch}, a),
            "");
  EXPECT_EQ(bindError("linear_cross_entropy_train", {h, w, t, dloss}, {loss, h, scratch},
                      withFrozenWeight(a)),
            "");
  expectBindErrorsMention("linear_cross_entropy_train",
                          {{{h, w, t, dloss}, {loss, h, scratch}, a, "4 output"},
                           {{h, w, t, dloss}, {loss, h, w, scratch}, withFrozenWeight(a),
                            "3 output"}});
  // num_classes leaves out at most w's last classes.
  KernelAttrs classes = a;
  classes.setInt("num_classes", 33);
  EXPECT_NE(bindError("linear_cross_entropy", {h, w, t}, {loss, scratch}, classes)
                .find("num_classes 33 must be in [0, 32]"),
            std::string::npos);
  // A bf16 weight's gradient over two chunks of 4 rows sums in 16 more
  // (D) fp32 scratch rows; a frozen head needs none.
  TensorView hb = typeOnly(DType::BF16, {8, 16}), wb = typeOnly(DType::BF16, {32, 16});
  TensorView summed = typeOnly(DType::F32, {4 + 16, 32});
  EXPECT_EQ(bindError("linear_cross_entropy_train", {hb, wb, t, dloss}, {loss, hb, wb, summed}, a),
            "");
  EXPECT_NE(bindError("linear_cross_entropy_train", {hb, wb, t, dloss}, {loss, hb, wb, scratch}, a)
                .find("scratch"),
            std::string::npos);
  EXPECT_EQ(bindError("linear_cross_entropy_train", {hb, wb, t, dloss}, {loss, hb, scratch},
                      withFrozenWeight(a)),
            "");
}

TEST(LinearCrossEntropyKernels, ShardBindingErrorsNameTheOperand) {
  KernelAttrs a = attrs({}, {{"chunk_rows", 4}, {"transpose_b", 1}, {"num_classes", 60}});
  TensorView h = typeOnly(DType::F32, {8, 16}), w = typeOnly(DType::F32, {32, 16}),
             t = typeOnly(DType::I32, {8}), stat = typeOnly(DType::F32, {8}),
             scratch = typeOnly(DType::F32, {4, 32});
  EXPECT_EQ(bindError("linear_cross_entropy_partial", {h, w, t}, {stat, stat, stat, scratch}, a),
            "");
  EXPECT_EQ(bindError("linear_cross_entropy_partial_grad", {h, w, t, stat, stat, stat},
                      {h, w, scratch}, a),
            "");
  EXPECT_EQ(bindError("linear_cross_entropy_partial_grad", {h, w, t, stat, stat, stat},
                      {h, scratch}, withFrozenWeight(a)),
            "");
  expectBindErrorsMention(
      "linear_cross_entropy_partial",
      {{{h, w, t}, {stat, stat, stat, scratch},
        attrs({}, {{"chunk_rows", 4}, {"transpose_b", 1}}), "num_classes"},
       {{h, w, t}, {stat, stat, stat, scratch},
        attrs({}, {{"chunk_rows", 4}, {"transpose_b", 1}, {"num_classes", 40},
                   {"class_offset", 20}}),
        "do not fit in num_classes 40"},
       {{h, w, t}, {stat, typeOnly(DType::F32, {4}), stat, scratch}, a, "sumexp"}});
  expectBindErrorsMention("linear_cross_entropy_partial_grad",
                          {{{h, w, t, stat, typeOnly(DType::BF16, {8}), stat}, {h, w, scratch},
                            a, "dsumexp"},
                           {{h, w, t, stat, stat, stat}, {h, w, typeOnly(DType::F32, {8, 32})},
                            a, "scratch"}});
}

} // namespace
} // namespace llmc::test
