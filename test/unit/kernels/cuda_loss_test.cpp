//===- cuda_loss_test.cpp - CUDA cross-entropy family against the CPU -----===//
//
// The cross-entropy kernels (whole, padded, sharded) are conformance cases
// (loss_test.cpp). Here: exact zeros on the GPU (padding, all rows
// ignored), the fused heads (linear_cross_entropy*), and binding errors.
// Losses are scalars (relative error 1e-5 for either logits dtype: they are
// f32 sums of f32 row values); gradients use the norm metric.
// Targets stay in range (an invalid target makes NaN rows on both
// backends, which no metric compares).

#include "CudaConformance.h"

#include "common/HeadScratch.h"

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

TEST(CudaLossKernels, LinearCrossEntropyMatchesCpu) {
  // The fused head + loss: one chunk, several, a short last one; both
  // weight layouts; GPT-2's vocabulary. The scratch holds the last chunk's
  // gradient on both backends.
  LLMC_REQUIRE_GPU();
  uint64_t seed = 10130;
  for (bool transposeB : {true, false})
    for (int64_t chunk : {int64_t{1}, int64_t{5}, int64_t{64}}) {
      SCOPED_TRACE(std::string(transposeB ? "w [V, D]" : "w [D, V]") + " chunk " +
                   std::to_string(chunk));
      const int64_t rows = 64, width = 48, vocab = 50257;
      std::vector<int64_t> wShape = transposeB ? std::vector<int64_t>{vocab, width}
                                               : std::vector<int64_t>{width, vocab};
      Buffer h = Buffer::of(randomTensor({4, 16, width}, ++seed), DType::F32);
      Buffer w = Buffer::of(randomTensor(wShape, ++seed, 0.1), DType::F32);
      RefTensor ids = randomIds({4, 16}, ++seed, 0, vocab);
      ids.data[3] = -1;
      Buffer targets = Buffer::of(ids, DType::I32);
      Buffer dloss = Buffer::of(RefTensor{{}, {0.7}}, DType::F32);
      Buffer loss(DType::F32, {}), dh(DType::F32, {4, 16, width}), dw(DType::F32, wShape),
          scratch(DType::F32, {std::min(chunk, rows), vocab});
      KernelAttrs a = attrs({}, {{"chunk_rows", chunk}, {"transpose_b", transposeB}});
      expectCudaMatchesCpu("linear_cross_entropy_train", {&h, &w, &targets, &dloss},
                           {&loss, &dh, &dw, &scratch}, a, {Metric::Norm, {1e-5}});
      // A frozen head: no dw output and no product for it.
      KernelAttrs frozen = a;
      frozen.setInt("frozen_weight", 1);
      expectCudaMatchesCpu("linear_cross_entropy_train", {&h, &w, &targets, &dloss},
                           {&loss, &dh, &scratch}, frozen, {Metric::Norm, {1e-5}});
      Buffer evalLoss(DType::F32, {});
      expectCudaMatchesCpu("linear_cross_entropy", {&h, &w, &targets}, {&evalLoss, &scratch}, a,
                           {Metric::Norm, {1e-5}});
    }
}

TEST(CudaLossKernels, HalfLinearCrossEntropyMatchesCpu) {
  // bf16 and f16 heads: the logits and gradient rounded to the type on both
  // backends; one chunk and several (both sum dw over chunks in fp32, in
  // the scratch's rows past the chunk, and round it once). The scratch's
  // contents differ by design (the GPU holds the chunk in the type) and
  // are not compared.
  LLMC_REQUIRE_GPU();
  uint64_t seed = 10170;
  const double skip = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::BF16, DType::F16})
    for (int64_t chunk : {int64_t{5}, int64_t{64}}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " chunk " + std::to_string(chunk));
      const int64_t width = 48, vocab = 50257;
      Buffer h = Buffer::of(randomTensor({4, 16, width}, ++seed), dtype);
      Buffer w = Buffer::of(randomTensor({vocab, width}, ++seed, 0.1), dtype);
      Buffer targets = Buffer::of(randomIds({4, 16}, ++seed, 0, vocab), DType::I32);
      Buffer dloss = Buffer::of(RefTensor{{}, {0.7}}, DType::F32);
      Buffer loss(DType::F32, {}), dh(dtype, {4, 16, width}), dw(dtype, {vocab, width}),
          scratch = headScratch(64, width, chunk, vocab, dtype, true);
      KernelAttrs a = attrs({}, {{"chunk_rows", chunk}, {"transpose_b", 1}});
      expectCudaMatchesCpu("linear_cross_entropy_train", {&h, &w, &targets, &dloss},
                           {&loss, &dh, &dw, &scratch}, a,
                           {Metric::Norm, {1e-3, tolerance(dtype), tolerance(dtype), skip}});
    }
}

TEST(CudaLossKernels, ShardedLinearCrossEntropyMatchesCpu) {
  // The vocabulary-parallel head on each shard of GPT-2's vocabulary over 2
  // ranks (the second padded): its statistics elementwise, dh and dw by
  // norm; one chunk and several; f32 and bf16 (whose chunk the GPU holds
  // in the type, so the scratch is not compared). The backward's shift,
  // dsumexp and dtarget_logit are made-up row values in their ranges.
  LLMC_REQUIRE_GPU();
  uint64_t seed = 10190;
  const int64_t vocab = 50257, shard = 25129, width = 48;
  const double skip = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t rank : {0, 1})
      for (int64_t chunk : {int64_t{5}, int64_t{64}}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " rank " + std::to_string(rank) +
                     " chunk " + std::to_string(chunk));
        RefTensor w = randomTensor({shard, width}, ++seed, 0.1);
        if (rank == 1) // the padded table's rows past the vocabulary are zeros
          std::fill(w.data.begin() + (vocab - shard) * width, w.data.end(), 0.0);
        Buffer h = Buffer::of(randomTensor({4, 16, width}, ++seed), dtype);
        Buffer wb = Buffer::of(w, dtype);
        RefTensor ids = randomIds({4, 16}, ++seed, 0, vocab);
        ids.data[3] = -1;
        Buffer targets = Buffer::of(ids, DType::I32);
        KernelAttrs a = attrs({}, {{"chunk_rows", chunk}, {"transpose_b", 1},
                                   {"class_offset", rank * shard}, {"num_classes", vocab}});
        Buffer max(DType::F32, {4, 16}), sumexp(DType::F32, {4, 16}),
            target(DType::F32, {4, 16}), scratch(DType::F32, {chunk, shard});
        // bf16 logits may round to neighbours on the two backends' GEMMs.
        const double stat = dtype == DType::F32 ? 1e-5 : tolerance(dtype);
        expectCudaMatchesCpu("linear_cross_entropy_partial", {&h, &wb, &targets},
                             {&max, &sumexp, &target, &scratch}, a,
                             {Metric::Elementwise, {stat, stat, stat, skip}});
        Buffer shift = Buffer::of(randomTensor({4, 16}, ++seed, 0.1, 1.0), DType::F32);
        Buffer ds = Buffer::of(randomTensor({4, 16}, ++seed, 1e-3), DType::F32);
        Buffer dt = Buffer::of(randomTensor({4, 16}, ++seed, 1e-2), DType::F32);
        Buffer dh(dtype, {4, 16, width}), dw(dtype, {shard, width}),
            gradScratch = headScratch(64, width, chunk, shard, dtype, true);
        expectCudaMatchesCpu("linear_cross_entropy_partial_grad",
                             {&h, &wb, &targets, &shift, &ds, &dt}, {&dh, &dw, &gradScratch}, a,
                             {Metric::Norm, {tolerance(dtype), tolerance(dtype), skip}});
        KernelAttrs frozen = a;
        frozen.setInt("frozen_weight", 1);
        expectCudaMatchesCpu("linear_cross_entropy_partial_grad",
                             {&h, &wb, &targets, &shift, &ds, &dt}, {&dh, &scratch}, frozen,
                             {Metric::Norm, {tolerance(dtype), skip}});
      }
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
