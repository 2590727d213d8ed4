//===- cuda_loss_test.cpp - CUDA cross-entropy family against the CPU -----===//
//
// The cross-entropy kernels (whole, padded, sharded) and the fused heads
// (linear_cross_entropy*) are conformance cases (loss_test.cpp,
// linear_cross_entropy_test.cpp). Here: exact zeros on the GPU (padding,
// the fused head over a padded vocabulary, all rows ignored), NaN where
// the CPU has it, and binding errors.
// Losses are scalars (relative error 1e-5 for either logits dtype: they are
// f32 sums of f32 row values); gradients use the norm metric.
// Targets stay in range (an invalid target makes NaN rows on both
// backends, which no metric compares).

#include "CudaConformance.h"

#include "common/HeadScratch.h"

#include <cmath>
#include <limits>

namespace llmc::test {
namespace {

/// The fused head's scratch: the chunk's rows, and a 16-bit trained
/// weight's fp32 sum over several chunks (common/HeadScratch.h).
Buffer headScratch(int64_t rows, int64_t width, int64_t chunk, int64_t vocab, DType dtype,
                   bool weightGrad) {
  return Buffer(DType::F32, {chunk + headAccumulatorRows(rows, width, chunk, dtype != DType::F32,
                                                         weightGrad),
                             vocab});
}

TEST(CudaLossKernels, PaddingGetsExactlyZeroGradient) {
  // A padded vocabulary (num_classes): rows whose width makes them 16-byte
  // aligned (the vectorised path: 136 bf16 columns, GPT-2's 50304) and
  // rows that are not (133 columns), the padding holding values the loss
  // must never read; the padding's gradient is exactly 0 on the GPU (the
  // conformance cases compare the rest).
  LLMC_REQUIRE_GPU();
  struct Padded {
    std::vector<int64_t> rows;
    int64_t classes, width;
  };
  uint64_t seed = 10300;
  for (DType t : kFloatTypes)
    for (const Padded &c : {Padded{{3, 37}, 129, 136}, Padded{{3, 37}, 129, 133},
                            Padded{{2, 1024}, 50257, 50304}, Padded{{5}, 1, 8}}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " classes " + std::to_string(c.classes) + " of " +
                   std::to_string(c.width));
      std::vector<int64_t> shape = c.rows;
      shape.push_back(c.width);
      RefTensor values = randomTensor(shape, ++seed, 3.0);
      const int64_t rows = values.numel() / c.width;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = c.classes; j < c.width; ++j) values.data[r * c.width + j] = 50.0;
      Buffer logits = Buffer::of(values, t);
      RefTensor ids = randomIds(c.rows, ++seed, 0, c.classes);
      ids.data[0] = -1;
      Buffer targets = Buffer::of(ids, DType::I32);
      Buffer dloss = Buffer::of(RefTensor{{}, {0.7}}, DType::F32);
      Buffer dlogits(t, shape);
      KernelAttrs a = attrs({}, {{"num_classes", c.classes}});
      std::vector<RefTensor> got =
          expectCudaMatchesCpu("cross_entropy_grad", {&logits, &targets, &dloss}, {&dlogits}, a,
                               {Metric::Norm, {tolerance(t)}});
      ASSERT_EQ(got.size(), 1u);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = c.classes; j < c.width; ++j)
          ASSERT_EQ(got[0].data[r * c.width + j], 0.0) << "row " << r << " column " << j;
    }
}

TEST(CudaLossKernels, PaddedLinearCrossEntropyMatchesCpu) {
  // The fused head over GPT-2's vocabulary padded to 50304 (num_classes
  // 50257, the padded rows of w zero as the artifact keeps them): f32,
  // bf16 and f16, one chunk and several (the 16-bit ones summing dw in
  // fp32); the GPU runs its GEMMs at the padded width and its row pass in
  // 16-byte pieces, and dw's padded rows come out exactly 0.
  LLMC_REQUIRE_GPU();
  uint64_t seed = 10330;
  const double skip = std::numeric_limits<double>::infinity();
  const int64_t vocab = 50257, padded = 50304, width = 64, rows = 64;
  for (DType dtype : kFloatTypes)
    for (int64_t chunk : {int64_t{16}, int64_t{64}}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " chunk " + std::to_string(chunk));
      RefTensor w = randomTensor({padded, width}, ++seed, 0.1);
      std::fill(w.data.begin() + vocab * width, w.data.end(), 0.0);
      Buffer h = Buffer::of(randomTensor({4, 16, width}, ++seed), dtype);
      Buffer wb = Buffer::of(w, dtype);
      RefTensor ids = randomIds({4, 16}, ++seed, 0, vocab);
      ids.data[5] = -1;
      Buffer targets = Buffer::of(ids, DType::I32);
      Buffer dloss = Buffer::of(RefTensor{{}, {0.7}}, DType::F32);
      Buffer loss(DType::F32, {}), dh(dtype, {4, 16, width}), dw(dtype, {padded, width}),
          scratch = headScratch(rows, width, chunk, padded, dtype, true);
      KernelAttrs a = attrs({}, {{"chunk_rows", chunk}, {"transpose_b", 1},
                                 {"num_classes", vocab}});
      const double tol = dtype == DType::F32 ? 1e-5 : tolerance(dtype);
      std::vector<RefTensor> got = expectCudaMatchesCpu(
          "linear_cross_entropy_train", {&h, &wb, &targets, &dloss}, {&loss, &dh, &dw, &scratch},
          a, {Metric::Norm, {dtype == DType::F32 ? 1e-5 : 1e-3, tol, tol, skip}});
      ASSERT_EQ(got.size(), 4u);
      for (int64_t i = vocab * width; i < padded * width; ++i)
        ASSERT_EQ(got[2].data[i], 0.0) << "dw's padding at " << i;
      Buffer evalLoss(DType::F32, {}), evalScratch(DType::F32, {chunk, padded});
      expectCudaMatchesCpu("linear_cross_entropy", {&h, &wb, &targets}, {&evalLoss, &evalScratch},
                           a, {Metric::Norm, {dtype == DType::F32 ? 1e-5 : 1e-3, skip}});
    }
}

TEST(CudaLossKernels, NaNLogitsAndDlossStayWhereTheCpuPutsThem) {
  // A NaN logit makes the loss NaN, as on the CPU, wherever it sits: the
  // first value a thread sees, a whole 16-byte piece of them (which a max
  // passes over), one inside a piece, or the last class; 16-byte rows
  // (136 columns) and rows that are not (133). With a NaN dloss the
  // padding's gradient is still exactly 0.
  LLMC_REQUIRE_GPU();
  const double nan = std::numeric_limits<double>::quiet_NaN(), skip = HUGE_VAL;
  uint64_t seed = 10400;
  for (DType t : kFloatTypes)
    for (int64_t width : {136, 133})
      for (std::vector<int64_t> columns :
           {std::vector<int64_t>{0}, {0, 1, 2, 3, 4, 5, 6, 7}, {5}, {128}}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " width " + std::to_string(width) +
                     " first NaN at " + std::to_string(columns[0]));
        RefTensor values = randomTensor({2, width}, ++seed, 3.0);
        for (int64_t j : columns) values.data[width + j] = nan;
        Buffer logits = Buffer::of(values, t);
        Buffer targets = Buffer::of(RefTensor{{2}, {3, 7}}, DType::I32), loss(DType::F32, {});
        KernelAttrs a = attrs({}, {{"num_classes", 129}});
        std::vector<RefTensor> got = expectCudaMatchesCpu("cross_entropy", {&logits, &targets},
                                                          {&loss}, a, {Metric::Norm, {skip}});
        ASSERT_EQ(got.size(), 1u);
        EXPECT_TRUE(std::isnan(got[0].data[0])) << got[0].data[0];
      }
  for (DType t : kFloatTypes)
    for (int64_t width : {136, 133}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " NaN dloss, width " + std::to_string(width));
      Buffer logits = Buffer::of(randomTensor({3, width}, ++seed, 3.0), t);
      Buffer targets = Buffer::of(RefTensor{{3}, {0, 128, -1}}, DType::I32);
      Buffer dloss = Buffer::of(RefTensor{{}, {nan}}, DType::F32), dlogits(t, {3, width});
      KernelAttrs a = attrs({}, {{"num_classes", 129}});
      std::vector<RefTensor> got = expectCudaMatchesCpu(
          "cross_entropy_grad", {&logits, &targets, &dloss}, {&dlogits}, a, {Metric::Norm, {skip}});
      ASSERT_EQ(got.size(), 1u);
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t j = 129; j < width; ++j)
          ASSERT_EQ(got[0].data[r * width + j], 0.0) << "row " << r << " column " << j;
    }
}

TEST(CudaLossKernels, AllIgnoredGivesZeroLossAndGradient) {
  LLMC_REQUIRE_GPU();
  Buffer logits = Buffer::of(randomTensor({4, 9}, 10150), DType::F32);
  Buffer targets = Buffer::of(RefTensor{{4}, {-1, -1, -1, -1}}, DType::I32);
  Buffer dloss = Buffer::of(RefTensor{{}, {1.0}}, DType::F32);
  Buffer loss(DType::F32, {}), dlogits(DType::F32, {4, 9});
  auto got = expectCudaMatchesCpu("cross_entropy", {&logits, &targets}, {&loss}, {},
                                  {Metric::Elementwise, {0.0}});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data[0], 0.0);
  expectCudaMatchesCpu("cross_entropy_grad", {&logits, &targets, &dloss}, {&dlogits}, {},
                       {Metric::Elementwise, {0.0}});
}

TEST(CudaLossKernels, BindErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  TensorView logits = typeOnly(DType::F32, {4, 10}), targets = typeOnly(DType::I32, {5});
  TensorView loss = typeOnly(DType::F32, {});
  EXPECT_EQ(cudaBindError("cross_entropy", {logits, targets}, {loss}),
            bindError("cross_entropy", {logits, targets}, {loss}));
  TensorView goodTargets = typeOnly(DType::I32, {4}), shift = typeOnly(DType::F32, {4});
  KernelAttrs noClasses = attrs({}, {{"class_offset", 0}});
  EXPECT_EQ(cudaBindError("cross_entropy_partial", {logits, goodTargets, shift}, {shift, shift},
                          noClasses),
            "cross_entropy_partial: missing int attribute 'num_classes'");
  KernelAttrs tooFew = attrs({}, {{"class_offset", 5}, {"num_classes", 12}});
  EXPECT_EQ(cudaBindError("cross_entropy_partial", {logits, goodTargets, shift}, {shift, shift},
                          tooFew),
            bindError("cross_entropy_partial", {logits, goodTargets, shift}, {shift, shift},
                      tooFew));
  EXPECT_EQ(cudaBindError("cross_entropy_finish_grad", {shift, goodTargets, shift},
                          {shift, shift, shift}),
            bindError("cross_entropy_finish_grad", {shift, goodTargets, shift},
                      {shift, shift, shift}));
}

} // namespace
} // namespace llmc::test
