//===- cross_entropy.cu - softmax cross-entropy and its gradient on the GPU ===//
//
// logits [..., V], targets [...] (i32/i64). One thread block per row (up
// to 1024 threads striding over V). The forward reads the row once with an
// online log-sum-exp: each thread keeps a running max m and Σ exp(x − m),
// rescaling its sum when the max grows; the block then takes the max M of
// the threads' maxima and sums their sums rescaled to M. loss_row = M +
// log Σ − logits[target]. Row losses go to bind-time scratch, and one block
// sums them in a fixed order (in double, with the count of non-ignored
// targets), so the mean is the same on every run: 0 rows' losses for
// ignored targets, NaN for a target outside [0, V) that is not ignored.
//
// The gradient is (softmax − onehot)·dloss/count per non-ignored row and 0
// for ignored rows (NaN rows for invalid targets, as on the CPU). count and
// dloss live on the device, so a one-block kernel forms dloss/count first;
// then each row's block recomputes M and Σ (one read) and writes
// exp(x − lse)·scale in a second read, the target's element by the thread
// that owns its column, so no element is written twice.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/CrossEntropy.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/CrossEntropyCommon.cuh"

namespace llmc::cuda {
namespace {

template <typename T, typename I>
__global__ void rowLossKernel(const T *logits, const I *targets, float *rowLoss, int64_t rows,
                              int64_t vocab, int64_t ignoreIndex) {
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t target = static_cast<int64_t>(targets[r]); // uniform over the block
    if (target == ignoreIndex || target < 0 || target >= vocab) {
      if (threadIdx.x == 0) rowLoss[r] = target == ignoreIndex ? 0.0f : __int_as_float(0x7fc00000);
      continue;
    }
    const T *row = logits + r * vocab;
    const float lse = rowLogSumExp(row, vocab, red);
    if (threadIdx.x == 0) rowLoss[r] = lse - load(row, target);
  }
}

template <typename T, typename I>
__global__ void crossEntropyGradKernel(const T *logits, const I *targets, const float *scale,
                                       T *dlogits, int64_t rows, int64_t vocab,
                                       int64_t ignoreIndex) {
  __shared__ float red[32];
  const float factor = *scale;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t target = static_cast<int64_t>(targets[r]); // uniform over the block
    T *out = dlogits + r * vocab;
    if (target == ignoreIndex || target < 0 || target >= vocab) {
      const float fill = target == ignoreIndex ? 0.0f : __int_as_float(0x7fc00000);
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) store(out, j, fill);
      continue;
    }
    const T *row = logits + r * vocab;
    const float lse = rowLogSumExp(row, vocab, red);
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float p = expf(load(row, j) - lse);
      store(out, j, (j == target ? p - 1.0f : p) * factor);
    }
  }
}

template <typename T> class CrossEntropyKernel final : public Kernel {
public:
  CrossEntropyKernel(const KernelArgs &args, int64_t ignoreIndex)
      : logits_(args.inputs[0].as<T>()),
        targets_(args.inputs[1]),
        loss_(args.outputs[0].as<float>()), vocab_(args.inputs[0].dim(-1)),
        rows_(args.inputs[1].numel()), ignoreIndex_(ignoreIndex),
        rowLoss_(static_cast<size_t>(rows_) * sizeof(float)) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    float *rowLoss = rowLoss_.as<float>();
    if (rows_ > 0) {
      const int grid = lossRowGrid(rows_), threads = lossRowThreads(vocab_);
      if (targets_.wide)
        rowLossKernel<T, int64_t><<<grid, threads, 0, stream>>>(logits_, targets_.wide64(),
                                                                rowLoss, rows_, vocab_, ignoreIndex_);
      else
        rowLossKernel<T, int32_t><<<grid, threads, 0, stream>>>(logits_, targets_.narrow(),
                                                                rowLoss, rows_, vocab_, ignoreIndex_);
      LLMC_CUDA_CHECK_LAUNCH();
    }
    if (targets_.wide)
      meanLossKernel<int64_t><<<1, kLossThreads, 0, stream>>>(rowLoss, targets_.wide64(), rows_,
                                                              ignoreIndex_, loss_);
    else
      meanLossKernel<int32_t><<<1, kLossThreads, 0, stream>>>(rowLoss, targets_.narrow(), rows_,
                                                              ignoreIndex_, loss_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *logits_;
  Ids targets_;
  float *loss_;
  int64_t vocab_, rows_, ignoreIndex_;
  BindScratch rowLoss_; // [rows] f32
};

template <typename T> class CrossEntropyGradKernel final : public Kernel {
public:
  CrossEntropyGradKernel(const KernelArgs &args, int64_t ignoreIndex)
      : logits_(args.inputs[0].as<T>()),
        targets_(args.inputs[1]),
        dloss_(args.inputs[2].as<float>()), dlogits_(args.outputs[0].as<T>()),
        vocab_(args.inputs[0].dim(-1)), rows_(args.inputs[1].numel()), ignoreIndex_(ignoreIndex),
        scale_(sizeof(float)) {}

  void run(const StepContext &ctx) override {
    if (rows_ == 0 || vocab_ == 0) return;
    cudaStream_t stream = streamOf(ctx);
    float *scale = scale_.as<float>();
    const int grid = lossRowGrid(rows_), threads = lossRowThreads(vocab_);
    if (targets_.wide) {
      gradScaleKernel<int64_t><<<1, kLossThreads, 0, stream>>>(targets_.wide64(), rows_,
                                                               ignoreIndex_, dloss_, scale);
      LLMC_CUDA_CHECK_LAUNCH();
      crossEntropyGradKernel<T, int64_t><<<grid, threads, 0, stream>>>(
          logits_, targets_.wide64(), scale, dlogits_, rows_, vocab_, ignoreIndex_);
    } else {
      gradScaleKernel<int32_t><<<1, kLossThreads, 0, stream>>>(targets_.narrow(), rows_,
                                                               ignoreIndex_, dloss_, scale);
      LLMC_CUDA_CHECK_LAUNCH();
      crossEntropyGradKernel<T, int32_t><<<grid, threads, 0, stream>>>(
          logits_, targets_.narrow(), scale, dlogits_, rows_, vocab_, ignoreIndex_);
    }
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *logits_;
  Ids targets_;
  const float *dloss_;
  T *dlogits_;
  int64_t vocab_, rows_, ignoreIndex_;
  BindScratch scale_; // dloss / count
};

std::unique_ptr<Kernel> makeCudaCrossEntropy(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyBinding b;
  if (!contracts::bindCrossEntropy(args, error, &b)) return nullptr;
  return makeFloatKernel<CrossEntropyKernel>(b.dtype, args, b.ignoreIndex);
}

std::unique_ptr<Kernel> makeCudaCrossEntropyGrad(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyBinding b;
  if (!contracts::bindCrossEntropyGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<CrossEntropyGradKernel>(b.dtype, args, b.ignoreIndex);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "cross_entropy", makeCudaCrossEntropy);
LLMC_REGISTER_KERNEL(CUDA, "cross_entropy_grad", makeCudaCrossEntropyGrad);

} // namespace llmc::cuda
