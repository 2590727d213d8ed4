//===- cross_entropy_sharded.cu - vocabulary-parallel cross-entropy (GPU) -===//
//
// The pieces of kernels/cpu/cross_entropy_sharded.cpp (Megatron's
// decomposition: a rank holds classes [class_offset, class_offset + V) of
// num_classes; per-row statistics are all-reduced between the pieces):
//   cross_entropy_partial       sumexp_r = Σ_j exp(logits[r, j] − shift_r),
//                               target_r = logits[r, target − offset] or 0
//     one block per row, Σ a block reduction; thread 0 writes both;
//   cross_entropy_partial_grad  dsumexp_r·exp(logits − shift) (+ dtarget_r at
//                               the target's column): a grid-stride loop
//                               over elements, each written once;
//   cross_entropy_finish        mean over non-ignored rows of log(sumexp) +
//                               shift − target: one block, in double, rows
//                               in a fixed order (deterministic);
//   cross_entropy_finish_grad   one block: count the non-ignored rows, then
//                               write g/sumexp, g, −g (0 on ignored rows).
// Statistics are f32; logits f32 or bf16; targets i32 or i64. (reduce_max,
// the first piece, is reduce_max.cu.)
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/CrossEntropySharded.h"
#include "kernels/cuda/CrossEntropyCommon.cuh"

namespace llmc::cuda {
namespace {

/// The classes a logits shard holds: [offset, offset + width) of total.
using contracts::ClassShard;
using contracts::classShard;

constexpr float kNaN = __builtin_nanf("");

//===----------------------------------------------------------------------===//
// cross_entropy_partial and its gradient
//===----------------------------------------------------------------------===//

template <typename T, typename I>
__global__ void partialKernel(const T *logits, const I *targets, const float *shift,
                              float *sumexp, float *targetLogit, int64_t rows, ClassShard shard) {
  __shared__ float red[32];
  const int64_t width = shard.width;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = logits + r * width;
    const float s = shift[r];
    float sum = 0.0f;
    // Padding past the shard's valid classes adds nothing.
    for (int64_t j = threadIdx.x; j < shard.valid(); j += blockDim.x) sum += expf(load(row, j) - s);
    sum = blockSum(sum, red);
    if (threadIdx.x == 0) {
      sumexp[r] = sum;
      const int64_t column = shard.column(static_cast<int64_t>(targets[r]));
      targetLogit[r] = column >= 0 ? load(row, column) : column == -1 ? 0.0f : kNaN;
    }
  }
}

template <typename T, typename I>
__global__ void partialGradKernel(const T *logits, const I *targets, const float *shift,
                                  const float *dsumexp, const float *dtarget, T *dlogits,
                                  int64_t rows, ClassShard shard) {
  const int64_t width = shard.width;
  LLMC_GRID_STRIDE(e, rows * width) {
    const int64_t r = e / width, j = e % width;
    const int64_t column = shard.column(static_cast<int64_t>(targets[r]));
    if (column == -2) {
      store(dlogits, e, kNaN);
      continue;
    }
    if (j >= shard.valid()) { // padding gets no gradient
      store(dlogits, e, 0.0f);
      continue;
    }
    float g = dsumexp[r] * expf(load(logits, e) - shift[r]);
    if (j == column) g += dtarget[r];
    store(dlogits, e, g);
  }
}

template <typename T> class PartialKernel final : public Kernel {
public:
  PartialKernel(const KernelArgs &args, ClassShard shard)
      : logits_(args.inputs[0].as<T>()), targets_(args.inputs[1]),
        shift_(args.inputs[2].as<float>()), sumexp_(args.outputs[0].as<float>()),
        target_(args.outputs[1].as<float>()), shard_(shard), rows_(args.inputs[1].numel()) {}

  void run(const StepContext &ctx) override {
    if (rows_ == 0) return;
    const int grid = lossRowGrid(rows_), threads = lossRowThreads(shard_.width);
    if (targets_.wide)
      partialKernel<T, int64_t><<<grid, threads, 0, streamOf(ctx)>>>(
          logits_, targets_.wide64(), shift_, sumexp_, target_, rows_, shard_);
    else
      partialKernel<T, int32_t><<<grid, threads, 0, streamOf(ctx)>>>(
          logits_, targets_.narrow(), shift_, sumexp_, target_, rows_, shard_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *logits_;
  Ids targets_;
  const float *shift_;
  float *sumexp_, *target_;
  ClassShard shard_;
  int64_t rows_;
};

template <typename T> class PartialGradKernel final : public Kernel {
public:
  PartialGradKernel(const KernelArgs &args, ClassShard shard)
      : logits_(args.inputs[0].as<T>()), targets_(args.inputs[1]),
        shift_(args.inputs[2].as<float>()), dsumexp_(args.inputs[3].as<float>()),
        dtarget_(args.inputs[4].as<float>()), dlogits_(args.outputs[0].as<T>()), shard_(shard),
        rows_(args.inputs[1].numel()) {}

  void run(const StepContext &ctx) override {
    const int64_t n = rows_ * shard_.width;
    if (n == 0) return;
    if (targets_.wide)
      partialGradKernel<T, int64_t><<<gridFor(n), kBlock, 0, streamOf(ctx)>>>(
          logits_, targets_.wide64(), shift_, dsumexp_, dtarget_, dlogits_, rows_, shard_);
    else
      partialGradKernel<T, int32_t><<<gridFor(n), kBlock, 0, streamOf(ctx)>>>(
          logits_, targets_.narrow(), shift_, dsumexp_, dtarget_, dlogits_, rows_, shard_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *logits_;
  Ids targets_;
  const float *shift_, *dsumexp_, *dtarget_;
  T *dlogits_;
  ClassShard shard_;
  int64_t rows_;
};

std::unique_ptr<Kernel> makeCudaCrossEntropyPartial(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyPartialBinding b;
  if (!contracts::bindCrossEntropyPartial(args, error, &b)) return nullptr;
  return makeFloatKernel<PartialKernel>(b.dtype, args, classShard(b));
}

std::unique_ptr<Kernel> makeCudaCrossEntropyPartialGrad(const KernelArgs &args,
                                                        std::string &error) {
  contracts::CrossEntropyPartialBinding b;
  if (!contracts::bindCrossEntropyPartialGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<PartialGradKernel>(b.dtype, args, classShard(b));
}

//===----------------------------------------------------------------------===//
// cross_entropy_finish and its gradient
//===----------------------------------------------------------------------===//

template <typename I>
__global__ void finishKernel(const float *sumexp, const float *shift, const float *target,
                             const I *targets, int64_t rows, int64_t ignoreIndex, float *loss) {
  __shared__ double sums[32];
  __shared__ long long counts[32];
  double total = 0.0;
  long long count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    if (static_cast<int64_t>(targets[r]) == ignoreIndex) continue;
    total += static_cast<double>(logf(sumexp[r]) + shift[r] - target[r]);
    ++count;
  }
  total = blockSum(total, sums);
  count = blockSum(count, counts);
  if (threadIdx.x == 0)
    *loss = count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
}

template <typename I>
__global__ void finishGradKernel(const float *sumexp, const I *targets, const float *dloss,
                                 float *dsumexp, float *dshift, float *dtarget, int64_t rows,
                                 int64_t ignoreIndex) {
  __shared__ long long counts[32];
  const long long count = countTargets(targets, rows, ignoreIndex, counts);
  const float g = count ? *dloss / static_cast<float>(count) : 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const bool ignored = static_cast<int64_t>(targets[r]) == ignoreIndex;
    dsumexp[r] = ignored ? 0.0f : g / sumexp[r];
    dshift[r] = ignored ? 0.0f : g;
    dtarget[r] = ignored ? 0.0f : -g;
  }
}

class FinishKernel final : public Kernel {
public:
  FinishKernel(const KernelArgs &args, int64_t ignoreIndex)
      : sumexp_(args.inputs[0].as<float>()), shift_(args.inputs[1].as<float>()),
        target_(args.inputs[2].as<float>()), targets_(args.inputs[3]),
        loss_(args.outputs[0].as<float>()), rows_(args.inputs[3].numel()),
        ignoreIndex_(ignoreIndex) {}

  void run(const StepContext &ctx) override {
    if (targets_.wide)
      finishKernel<int64_t><<<1, kLossThreads, 0, streamOf(ctx)>>>(
          sumexp_, shift_, target_, targets_.wide64(), rows_, ignoreIndex_, loss_);
    else
      finishKernel<int32_t><<<1, kLossThreads, 0, streamOf(ctx)>>>(
          sumexp_, shift_, target_, targets_.narrow(), rows_, ignoreIndex_, loss_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const float *sumexp_, *shift_, *target_;
  Ids targets_;
  float *loss_;
  int64_t rows_, ignoreIndex_;
};

class FinishGradKernel final : public Kernel {
public:
  FinishGradKernel(const KernelArgs &args, int64_t ignoreIndex)
      : sumexp_(args.inputs[0].as<float>()), targets_(args.inputs[1]),
        dloss_(args.inputs[2].as<float>()), dsumexp_(args.outputs[0].as<float>()),
        dshift_(args.outputs[1].as<float>()), dtarget_(args.outputs[2].as<float>()),
        rows_(args.inputs[1].numel()), ignoreIndex_(ignoreIndex) {}

  void run(const StepContext &ctx) override {
    if (rows_ == 0) return;
    if (targets_.wide)
      finishGradKernel<int64_t><<<1, kLossThreads, 0, streamOf(ctx)>>>(
          sumexp_, targets_.wide64(), dloss_, dsumexp_, dshift_, dtarget_, rows_, ignoreIndex_);
    else
      finishGradKernel<int32_t><<<1, kLossThreads, 0, streamOf(ctx)>>>(
          sumexp_, targets_.narrow(), dloss_, dsumexp_, dshift_, dtarget_, rows_, ignoreIndex_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const float *sumexp_;
  Ids targets_;
  const float *dloss_;
  float *dsumexp_, *dshift_, *dtarget_;
  int64_t rows_, ignoreIndex_;
};

std::unique_ptr<Kernel> makeCudaCrossEntropyFinish(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyFinishBinding b;
  if (!contracts::bindCrossEntropyFinish(args, error, &b)) return nullptr;
  return std::make_unique<FinishKernel>(args, b.ignoreIndex);
}

std::unique_ptr<Kernel> makeCudaCrossEntropyFinishGrad(const KernelArgs &args,
                                                       std::string &error) {
  contracts::CrossEntropyFinishBinding b;
  if (!contracts::bindCrossEntropyFinishGrad(args, error, &b)) return nullptr;
  return std::make_unique<FinishGradKernel>(args, b.ignoreIndex);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "cross_entropy_partial", makeCudaCrossEntropyPartial);
LLMC_REGISTER_KERNEL(CUDA, "cross_entropy_partial_grad", makeCudaCrossEntropyPartialGrad);
LLMC_REGISTER_KERNEL(CUDA, "cross_entropy_finish", makeCudaCrossEntropyFinish);
LLMC_REGISTER_KERNEL(CUDA, "cross_entropy_finish_grad", makeCudaCrossEntropyFinishGrad);

} // namespace llmc::cuda
