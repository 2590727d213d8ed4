//===- linear_cross_entropy_test.cpp - the fused head + loss --------------===//
//
// The fused kernel against the unfused reference (the head's product,
// cross_entropy, cross_entropy_grad and the backward's products): every
// chunk size from one row to all of them and a size that leaves a short
// last chunk, both weight layouts, ignored and invalid targets, and a
// result that does not depend on the chunk size beyond rounding; bf16 and
// f16 heads against the unfused kernels themselves.

#include "KernelTest.h"

#include <cmath>

namespace llmc::test {
namespace {

struct HeadCase {
  std::vector<int64_t> rows;
  int64_t width, vocab;
  bool transposeB;
};

const std::vector<HeadCase> kHeads = {
    {{3, 7}, 16, 33, true},   // tied layout, w [V, D]
    {{2, 5}, 24, 257, false}, // untied, w [D, V]
    {{13}, 8, 1031, true},
};

TEST(LinearCrossEntropyKernels, MatchTheUnfusedReferenceAtEveryChunkSize) {
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
    std::vector<RefTensor> expected =
        ref::linearCrossEntropy(h, w, targets, c.transposeB, ignore, &dloss);
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
      EXPECT_CLOSE(loss.toRef(), expected[0], Metric::Elementwise, 1e-5);
      EXPECT_CLOSE(dh.toRef(), expected[1], Metric::Norm, 1e-5);
      EXPECT_CLOSE(dw.toRef(), expected[2], Metric::Norm, 1e-5);
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
            scratch(DType::F32, {chunk, c.vocab});
        fusedLoss.poison(), fusedDh.poison(), fusedDw.poison();
        KernelAttrs a = attrs({}, {{"chunk_rows", chunk}, {"transpose_b", c.transposeB},
                                   {"ignore_index", ignore}});
        ASSERT_TRUE(runKernel("linear_cross_entropy_train", {&hb, &wb, &tb, &db},
                              {&fusedLoss, &fusedDh, &fusedDw, &scratch}, a));
        EXPECT_EQ(fusedLoss.toRef().data, loss.toRef().data);
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
}

} // namespace
} // namespace llmc::test
