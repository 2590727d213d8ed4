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
// A padded vocabulary (num_classes < V, llmc-pad-vocab) has rows V apart of
// which the first num_classes columns are classes: the padding is left out
// of the max and the sum and gets gradient 0. When every row starts 16-byte
// aligned (V a multiple of 8 in bf16 and f16, of 4 in f32, as the padding
// makes GPT-2's 50257 classes), each thread moves 16 bytes at a time.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/CrossEntropy.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/CrossEntropyCommon.cuh"

namespace llmc::cuda {
namespace {

/// `classes` classes in each of `rows` rows `width` apart.
struct Rows {
  int64_t rows, width, classes, ignoreIndex;
};

template <typename T, typename I, bool Vector>
__global__ void rowLossKernel(const T *logits, const I *targets, float *rowLoss, Rows shape) {
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < shape.rows; r += gridDim.x) {
    const int64_t target = static_cast<int64_t>(targets[r]); // uniform over the block
    if (target == shape.ignoreIndex || target < 0 || target >= shape.classes) {
      if (threadIdx.x == 0)
        rowLoss[r] = target == shape.ignoreIndex ? 0.0f : __int_as_float(0x7fc00000);
      continue;
    }
    const T *row = logits + r * shape.width;
    const float lse = rowLogSumExpOf<T, Vector>(row, shape.classes, red);
    if (threadIdx.x == 0) rowLoss[r] = lse - load(row, target);
  }
}

template <typename T, typename I, bool Vector>
__global__ void crossEntropyGradKernel(const T *logits, const I *targets, const float *scale,
                                       T *dlogits, Rows shape) {
  __shared__ float red[32];
  const float factor = *scale;
  for (int64_t r = blockIdx.x; r < shape.rows; r += gridDim.x) {
    const int64_t target = static_cast<int64_t>(targets[r]); // uniform over the block
    T *out = dlogits + r * shape.width;
    if (target == shape.ignoreIndex || target < 0 || target >= shape.classes) {
      const float fill = target == shape.ignoreIndex ? 0.0f : __int_as_float(0x7fc00000);
      for (int64_t j = threadIdx.x; j < shape.width; j += blockDim.x)
        store(out, j, j < shape.classes ? fill : 0.0f);
      continue;
    }
    const T *row = logits + r * shape.width;
    const float lse = rowLogSumExpOf<T, Vector>(row, shape.classes, red);
    writeRowGrad<T, Vector>(row, out, shape.classes, shape.width, target, lse, factor);
  }
}

template <typename T> class CrossEntropyKernel final : public Kernel {
public:
  CrossEntropyKernel(const KernelArgs &args, const contracts::CrossEntropyBinding &b)
      : logits_(args.inputs[0].as<T>()), targets_(args.inputs[1]),
        loss_(args.outputs[0].as<float>()), shape_{b.rows, b.width, b.classes, b.ignoreIndex},
        vector_(vectorRows<T>(logits_, b.width)),
        rowLoss_(static_cast<size_t>(b.rows) * sizeof(float)) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    float *rowLoss = rowLoss_.as<float>();
    if (shape_.rows > 0) {
      if (targets_.wide)
        launch(stream, targets_.wide64(), rowLoss);
      else
        launch(stream, targets_.narrow(), rowLoss);
      LLMC_CUDA_CHECK_LAUNCH();
    }
    if (targets_.wide)
      meanLossKernel<int64_t><<<1, kLossThreads, 0, stream>>>(rowLoss, targets_.wide64(),
                                                              shape_.rows, shape_.ignoreIndex,
                                                              loss_);
    else
      meanLossKernel<int32_t><<<1, kLossThreads, 0, stream>>>(rowLoss, targets_.narrow(),
                                                              shape_.rows, shape_.ignoreIndex,
                                                              loss_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  template <typename I> void launch(cudaStream_t stream, const I *targets, float *rowLoss) {
    const int grid = lossRowGrid(shape_.rows), threads = rowThreads<T>(shape_.width, vector_);
    if (vector_)
      rowLossKernel<T, I, true><<<grid, threads, 0, stream>>>(logits_, targets, rowLoss, shape_);
    else
      rowLossKernel<T, I, false><<<grid, threads, 0, stream>>>(logits_, targets, rowLoss, shape_);
  }

  const T *logits_;
  Ids targets_;
  float *loss_;
  Rows shape_;
  bool vector_; ///< every row 16-byte aligned
  BindScratch rowLoss_; // [rows] f32
};

template <typename T> class CrossEntropyGradKernel final : public Kernel {
public:
  CrossEntropyGradKernel(const KernelArgs &args, const contracts::CrossEntropyBinding &b)
      : logits_(args.inputs[0].as<T>()), targets_(args.inputs[1]),
        dloss_(args.inputs[2].as<float>()), dlogits_(args.outputs[0].as<T>()),
        shape_{b.rows, b.width, b.classes, b.ignoreIndex},
        vector_(vectorRows<T>(logits_, b.width, dlogits_)), scale_(sizeof(float)) {}

  void run(const StepContext &ctx) override {
    if (shape_.rows == 0 || shape_.width == 0) return;
    cudaStream_t stream = streamOf(ctx);
    if (targets_.wide)
      launch(stream, targets_.wide64());
    else
      launch(stream, targets_.narrow());
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  template <typename I> void launch(cudaStream_t stream, const I *targets) {
    float *scale = scale_.as<float>();
    gradScaleKernel<I><<<1, kLossThreads, 0, stream>>>(targets, shape_.rows, shape_.ignoreIndex,
                                                       dloss_, scale);
    LLMC_CUDA_CHECK_LAUNCH();
    const int grid = lossRowGrid(shape_.rows), threads = rowThreads<T>(shape_.width, vector_);
    if (vector_)
      crossEntropyGradKernel<T, I, true>
          <<<grid, threads, 0, stream>>>(logits_, targets, scale, dlogits_, shape_);
    else
      crossEntropyGradKernel<T, I, false>
          <<<grid, threads, 0, stream>>>(logits_, targets, scale, dlogits_, shape_);
  }

  const T *logits_;
  Ids targets_;
  const float *dloss_;
  T *dlogits_;
  Rows shape_;
  bool vector_; ///< every row of the logits and their gradient 16-byte aligned
  BindScratch scale_; // dloss / count
};

std::unique_ptr<Kernel> makeCudaCrossEntropy(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyBinding b;
  if (!contracts::bindCrossEntropy(args, error, &b)) return nullptr;
  return makeFloatKernel<CrossEntropyKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeCudaCrossEntropyGrad(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyBinding b;
  if (!contracts::bindCrossEntropyGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<CrossEntropyGradKernel>(b.dtype, args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "cross_entropy", makeCudaCrossEntropy);
LLMC_REGISTER_KERNEL(CUDA, "cross_entropy_grad", makeCudaCrossEntropyGrad);

} // namespace llmc::cuda
