//===- linear_cross_entropy.cu - the LM head and its loss, in row chunks ---===//
//
// The CPU kernel's algorithm (kernels/cpu/linear_cross_entropy.cpp) on one
// stream: per chunk of rows, a cuBLASLt GEMM writes the chunk's logits into
// the [chunk_rows, V] scratch; one block per row forms its loss (the
// cross_entropy kernel's online log-sum-exp) and, when training, its
// gradient (softmax − onehot)·dloss/count in place; two more GEMMs multiply
// it into the chunk's rows of dh and into dw (accumulating after the first
// chunk; a frozen head has no dw and no such GEMM). Every GEMM is planned
// at bind time, up to three per chunk.
//
// The vocabulary-parallel forms run the same chunks over a shard of w:
// linear_cross_entropy_partial keeps each row's max, Σ exp(logit − max)
// and target logit; linear_cross_entropy_partial_grad forms
// cross_entropy_partial_grad's gradient in place before the two products
// (one block per row for both, in 16-byte pieces where rows allow).
//
// bf16 and f16 GEMMs read and write their operands' type, so there the
// chunk is held in that type (from the start of the fp32 scratch): the
// logits rounded where the unfused matmul stores them, the gradient where
// cross_entropy_grad does. With one chunk dw is the GEMM's product, the
// unfused ops' rounding exactly; over several chunks the wgrad GEMMs write
// fp32 (cuBLASLt's f32 C/D beside bf16/f16 operands) and accumulate into
// the scratch's rows past the chunk (common/HeadScratch.h), which are
// rounded into dw once: the sum is never rounded before its end, as on the
// CPU.
//
// A padded vocabulary (num_classes < V, llmc-pad-vocab) keeps the GEMMs at
// the padded width, whose aligned leading dimensions are what cuBLASLt's
// fastest kernels need: the padding's logits (of zero weights) are never
// read, its gradient is 0, so dh gains nothing from it and dw's padded
// rows are exactly 0. With rows 16-byte aligned the row pass moves 16
// bytes per thread at a time (CrossEntropyCommon.cuh).
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/LinearCrossEntropy.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/CrossEntropyCommon.cuh"
#include "kernels/cuda/LtGemm.h"

#include <vector>

namespace llmc::cuda {
namespace {

/// Losses of rows [r0, r0 + n) from their logits in `chunk` (rows `width`
/// apart, the first `classes` columns classes); with a scale, the chunk
/// becomes their gradient.
template <typename I, typename T, bool Vector>
__global__ void chunkRowsKernel(T *chunk, const I *targets, float *rowLoss, int64_t r0,
                                int64_t n, int64_t width, int64_t classes, int64_t ignoreIndex,
                                const float *scale) {
  __shared__ float red[32];
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const int64_t target = static_cast<int64_t>(targets[r0 + i]); // uniform over the block
    T *row = chunk + i * width;
    const bool ignored = target == ignoreIndex;
    if (ignored || target < 0 || target >= classes) {
      const float fill = ignored ? 0.0f : __int_as_float(0x7fc00000);
      if (threadIdx.x == 0) rowLoss[r0 + i] = fill;
      if (scale)
        for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
          store(row, j, j < classes ? fill : 0.0f);
      continue;
    }
    const float lse = rowLogSumExpOf<T, Vector>(row, classes, red);
    const float targetLogit = load(row, target);
    __syncthreads(); // every thread read the target's logit before it is overwritten
    if (threadIdx.x == 0) rowLoss[r0 + i] = lse - targetLogit;
    if (!scale) continue;
    writeRowGrad<T, Vector>(row, row, classes, width, target, lse, *scale);
  }
}

/// dw = round(sum) over n elements: the weight gradient's fp32 sum over
/// the chunks, rounded to the weight's type once; 16 bytes of dw at a time
/// when `Vector`.
template <typename T, bool Vector>
__global__ void roundSumKernel(T *dw, const float *sum, int64_t n) {
  constexpr int V = Vector ? kVec<T> : 1;
  LLMC_GRID_STRIDE(p, n / V) {
    float x[kVec<T>];
#pragma unroll
    for (int k = 0; k < V; ++k) x[k] = sum[p * V + k];
    if constexpr (Vector)
      storeVec(dw, p * V, x);
    else
      store(dw, p, x[0]);
  }
}

constexpr float kNaN = __builtin_nanf("");

/// fn(j, x) for each of the first `valid` columns of a row: 16 bytes per
/// thread at a time when `Vector` (the row 16-byte aligned), else one
/// element.
template <typename T, bool Vector, typename Fn>
__device__ __forceinline__ void forEachClass(const T *row, int64_t valid, Fn &&fn) {
  if constexpr (Vector) {
    constexpr int V = kVec<T>;
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * V; j < valid;
         j += static_cast<int64_t>(blockDim.x) * V) {
      float x[V];
      loadVec(row, j, x);
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (j + k < valid) fn(j + k, x[k]);
    }
  } else {
    for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) fn(j, load(row, j));
  }
}

/// One vocabulary shard's statistics of rows [r0, r0 + n) from their
/// logits in `chunk`: max, Σ exp(logit − max) and the target's logit.
template <typename I, typename T, bool Vector>
__global__ void shardStatsKernel(const T *chunk, const I *targets, int64_t r0, int64_t n,
                                 contracts::ClassShard shard, float *max, float *sumexp,
                                 float *targetLogit) {
  __shared__ float red[32];
  const int64_t valid = shard.valid(); // padding past it counts for nothing
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const T *row = chunk + i * shard.width;
    float m = -INFINITY;
    forEachClass<T, Vector>(row, valid, [&](int64_t, float x) { m = fmaxf(m, x); });
    m = blockMax(m, red);
    float sum = 0.0f;
    forEachClass<T, Vector>(row, valid, [&](int64_t, float x) { sum += expf(x - m); });
    sum = blockSum(sum, red);
    if (threadIdx.x == 0) {
      const int64_t r = r0 + i, column = shard.column(static_cast<int64_t>(targets[r]));
      max[r] = m;
      sumexp[r] = sum;
      targetLogit[r] = column >= 0 ? load(row, column) : column == -1 ? 0.0f : kNaN;
    }
  }
}

/// cross_entropy_partial_grad of rows [r0, r0 + n) in place of their
/// logits in `chunk`, one block per row: 16 bytes per thread at a time
/// when `Vector`.
template <typename I, typename T, bool Vector>
__global__ void shardGradKernel(T *chunk, const I *targets, int64_t r0, int64_t n,
                                contracts::ClassShard shard, const float *shift,
                                const float *dsumexp, const float *dtarget) {
  constexpr int V = Vector ? kVec<T> : 1;
  const int64_t valid = shard.valid(); // padding gets no gradient
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const int64_t r = r0 + i, column = shard.column(static_cast<int64_t>(targets[r]));
    const float ds = dsumexp[r], m = shift[r], dt = dtarget[r];
    T *row = chunk + i * shard.width;
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * V; j < shard.width;
         j += static_cast<int64_t>(blockDim.x) * V) {
      float x[kVec<T>];
      if constexpr (Vector)
        loadVec(row, j, x);
      else
        x[0] = load(row, j);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float g = column == -2 ? kNaN : j + k < valid ? ds * expf(x[k] - m) : 0.0f;
        if (j + k == column) g += dt;
        x[k] = g;
      }
      if constexpr (Vector)
        storeVec(row, j, x);
      else
        store(row, j, x[0]);
    }
  }
}

/// The chunk loop every head kernel runs: per chunk, the logits' GEMM, a
/// kernel-specific pass over the chunk's rows and, when training, the two
/// GEMMs of the gradient that pass left in the scratch.
template <typename T> class ChunkedHead : public Kernel {
protected:
  /// `scratch`: the f32 scratch, whose rows past the chunk hold dw's fp32
  /// sum when it has them.
  ChunkedHead(const contracts::LinearCrossEntropyBinding &b, float *scratch)
      : b_(b), scratch_(reinterpret_cast<T *>(scratch)),
        dwSum_(b.accumulatorRows ? scratch + b.chunkRows * b.vocab : nullptr),
        vector_(vectorRows<T>(scratch, b.vocab)) {}

  /// Plans the chunk GEMMs; false with `error` set when cuBLASLt refuses.
  bool planChunks(const T *h, const T *w, T *dh, T *dw, std::string &error) {
    for (int64_t r0 = 0; r0 < b_.rows; r0 += b_.chunkRows) {
      const int64_t n = std::min(b_.chunkRows, b_.rows - r0);
      GemmDesc logits; // [n, V] = h_c · wᵀ or h_c · w
      logits.dtype = b_.dtype;
      logits.m = n, logits.n = b_.vocab, logits.k = b_.width;
      logits.transposeB = b_.transposeB;
      logits.a = h + r0 * b_.width, logits.b = w, logits.c = scratch_;
      if (!add(logits, error)) return false;
      if (!b_.train) continue;
      GemmDesc dgrad; // [n, D] = g · w or g · wᵀ
      dgrad.dtype = b_.dtype;
      dgrad.m = n, dgrad.n = b_.width, dgrad.k = b_.vocab;
      dgrad.transposeB = !b_.transposeB;
      dgrad.a = scratch_, dgrad.b = w, dgrad.c = dh + r0 * b_.width;
      // dw (+)= gᵀ · h_c ([V, D]) or h_cᵀ · g ([D, V]), into the fp32 sum
      // when there is one.
      GemmDesc wgrad;
      wgrad.dtype = b_.dtype;
      wgrad.transposeA = true;
      wgrad.accumulate = r0 > 0;
      wgrad.f32Output = dwSum_ != nullptr;
      wgrad.k = n;
      if (b_.transposeB) {
        wgrad.m = b_.vocab, wgrad.n = b_.width;
        wgrad.a = scratch_, wgrad.b = h + r0 * b_.width;
      } else {
        wgrad.m = b_.width, wgrad.n = b_.vocab;
        wgrad.a = h + r0 * b_.width, wgrad.b = scratch_;
      }
      wgrad.c = dwSum_ ? static_cast<void *>(dwSum_) : dw;
      if (!add(dgrad, error) || (dw && !add(wgrad, error))) return false;
    }
    return true;
  }

  /// Runs the chunks; `rows(r0, n)` launches the pass over rows
  /// r0 .. r0+n, whose logits are in the scratch.
  template <typename Rows> void forEachChunk(cudaStream_t stream, T *dw, Rows &&rows) {
    size_t g = 0;
    for (int64_t r0 = 0; r0 < b_.rows; r0 += b_.chunkRows) {
      const int64_t n = std::min(b_.chunkRows, b_.rows - r0);
      gemms_[g++]->run(stream);
      rows(r0, n);
      LLMC_CUDA_CHECK_LAUNCH();
      if (b_.train) gemms_[g++]->run(stream);
      if (b_.train && b_.weightGrad)
        gemms_[g++]->run(stream);
    }
    if (b_.train && b_.weightGrad && dwSum_)
      roundSum(stream, dw);
  }

  /// dw = the fp32 sum of its chunks' products, rounded once.
  void roundSum(cudaStream_t stream, T *dw) {
    const int64_t n = b_.vocab * b_.width;
    if (vectorRows<T>(dw, n, dwSum_))
      roundSumKernel<T, true><<<gridFor(n / kVec<T>), kBlock, 0, stream>>>(dw, dwSum_, n);
    else
      roundSumKernel<T, false><<<gridFor(n), kBlock, 0, stream>>>(dw, dwSum_, n);
    LLMC_CUDA_CHECK_LAUNCH();
  }

  contracts::LinearCrossEntropyBinding b_;
  T *scratch_;   // the chunk, in h's type
  float *dwSum_; // dw's fp32 sum over chunks (16-bit types, several chunks), or null
  bool vector_;  // every chunk row 16-byte aligned

private:
  bool add(const GemmDesc &desc, std::string &error) {
    std::unique_ptr<LtGemm> gemm = LtGemm::create(desc, error);
    if (!gemm) return false;
    gemms_.push_back(std::move(gemm));
    return true;
  }

  std::vector<std::unique_ptr<LtGemm>> gemms_;
};

/// linear_cross_entropy(_train): the whole vocabulary.
template <typename T> class LinearCrossEntropyKernel final : public ChunkedHead<T> {
  using ChunkedHead<T>::b_, ChunkedHead<T>::scratch_;

public:
  LinearCrossEntropyKernel(const KernelArgs &args, const contracts::LinearCrossEntropyBinding &b)
      : ChunkedHead<T>(b, args.outputs.back().as<float>()), targets_(args.inputs[2]),
        dw_(b.train && b.weightGrad ? args.outputs[2].as<T>() : nullptr),
        dloss_(b.train ? args.inputs[3].as<float>() : nullptr),
        loss_(args.outputs[0].as<float>()),
        rowLoss_(static_cast<size_t>(b.rows) * sizeof(float)), scale_(sizeof(float)) {}

  bool plan(const KernelArgs &args, std::string &error) {
    const bool train = b_.train;
    return this->planChunks(args.inputs[0].as<T>(), args.inputs[1].as<T>(),
                            train ? args.outputs[1].as<T>() : nullptr,
                            train && b_.weightGrad ? args.outputs[2].as<T>() : nullptr, error);
  }

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    float *rowLoss = rowLoss_.as<float>(), *scale = b_.train ? scale_.as<float>() : nullptr;
    if (scale) {
      if (targets_.wide)
        gradScaleKernel<int64_t><<<1, kLossThreads, 0, stream>>>(targets_.wide64(), b_.rows,
                                                                 b_.ignoreIndex, dloss_, scale);
      else
        gradScaleKernel<int32_t><<<1, kLossThreads, 0, stream>>>(targets_.narrow(), b_.rows,
                                                                 b_.ignoreIndex, dloss_, scale);
      LLMC_CUDA_CHECK_LAUNCH();
    }
    this->forEachChunk(stream, dw_, [&](int64_t r0, int64_t n) {
      if (targets_.wide)
        launchRows(stream, targets_.wide64(), rowLoss, r0, n, scale);
      else
        launchRows(stream, targets_.narrow(), rowLoss, r0, n, scale);
    });
    if (targets_.wide)
      meanLossKernel<int64_t><<<1, kLossThreads, 0, stream>>>(rowLoss, targets_.wide64(), b_.rows,
                                                              b_.ignoreIndex, loss_);
    else
      meanLossKernel<int32_t><<<1, kLossThreads, 0, stream>>>(rowLoss, targets_.narrow(), b_.rows,
                                                              b_.ignoreIndex, loss_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  template <typename I>
  void launchRows(cudaStream_t stream, const I *targets, float *rowLoss, int64_t r0, int64_t n,
                  const float *scale) {
    const int grid = lossRowGrid(n), threads = rowThreads<T>(b_.vocab, this->vector_);
    const int64_t classes = b_.shard.valid();
    if (this->vector_)
      chunkRowsKernel<I, T, true><<<grid, threads, 0, stream>>>(
          scratch_, targets, rowLoss, r0, n, b_.vocab, classes, b_.ignoreIndex, scale);
    else
      chunkRowsKernel<I, T, false><<<grid, threads, 0, stream>>>(
          scratch_, targets, rowLoss, r0, n, b_.vocab, classes, b_.ignoreIndex, scale);
  }

  Ids targets_;
  T *dw_; // null unless the weight trains
  const float *dloss_;
  float *loss_;
  BindScratch rowLoss_; // [rows] f32
  BindScratch scale_;   // dloss / count
};

/// linear_cross_entropy_partial(_grad): one vocabulary shard.
template <typename T> class ShardedHeadKernel final : public ChunkedHead<T> {
  using ChunkedHead<T>::b_, ChunkedHead<T>::scratch_;

public:
  ShardedHeadKernel(const KernelArgs &args, const contracts::LinearCrossEntropyBinding &b)
      : ChunkedHead<T>(b, args.outputs.back().as<float>()), targets_(args.inputs[2]),
        dw_(b.train && b.weightGrad ? args.outputs[1].as<T>() : nullptr),
        stats_{b.train ? args.inputs[3].as<float>() : args.outputs[0].as<float>(),
               b.train ? args.inputs[4].as<float>() : args.outputs[1].as<float>(),
               b.train ? args.inputs[5].as<float>() : args.outputs[2].as<float>()} {}

  bool plan(const KernelArgs &args, std::string &error) {
    const bool train = b_.train;
    return this->planChunks(args.inputs[0].as<T>(), args.inputs[1].as<T>(),
                            train ? args.outputs[0].as<T>() : nullptr,
                            train && b_.weightGrad ? args.outputs[1].as<T>() : nullptr, error);
  }

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    this->forEachChunk(stream, dw_, [&](int64_t r0, int64_t n) {
      if (targets_.wide)
        launch(stream, targets_.wide64(), r0, n);
      else
        launch(stream, targets_.narrow(), r0, n);
    });
  }

private:
  template <typename I> void launch(cudaStream_t stream, const I *targets, int64_t r0, int64_t n) {
    if (this->vector_)
      launch<I, true>(stream, targets, r0, n);
    else
      launch<I, false>(stream, targets, r0, n);
  }
  template <typename I, bool Vector>
  void launch(cudaStream_t stream, const I *targets, int64_t r0, int64_t n) {
    const int grid = lossRowGrid(n), threads = rowThreads<T>(b_.vocab, Vector);
    if (b_.train)
      shardGradKernel<I, T, Vector><<<grid, threads, 0, stream>>>(
          scratch_, targets, r0, n, b_.shard, stats_[0], stats_[1], stats_[2]);
    else
      shardStatsKernel<I, T, Vector><<<grid, threads, 0, stream>>>(
          scratch_, targets, r0, n, b_.shard, stats_[0], stats_[1], stats_[2]);
  }

  Ids targets_;
  T *dw_; // null unless the weight trains
  /// Forward: the outputs max, sumexp, target_logit. Backward: the inputs
  /// shift, dsumexp, dtarget_logit.
  float *stats_[3];
};

template <template <typename> class K, bool Train>
std::unique_ptr<Kernel> makeCudaHead(const KernelArgs &args, std::string &error, bool sharded) {
  contracts::LinearCrossEntropyBinding b;
  const char *name = sharded ? contracts::linearCrossEntropyPartialName(Train)
                             : contracts::linearCrossEntropyName(Train);
  if (!(sharded ? contracts::bindLinearCrossEntropyPartial(args, Train, error, &b)
                : contracts::bindLinearCrossEntropy(args, Train, error, &b)))
    return nullptr;
  auto planned = [&](auto kernel) -> std::unique_ptr<Kernel> {
    std::string gemmError;
    if (!kernel->plan(args, gemmError)) {
      error = std::string(name) + ": " + gemmError;
      return nullptr;
    }
    return kernel;
  };
  return dispatchFloat<FloatTypes>(b.dtype, [&](auto tag) {
    return planned(std::make_unique<K<typename decltype(tag)::type>>(args, b));
  });
}

std::unique_ptr<Kernel> makeCudaLinearCrossEntropyForward(const KernelArgs &args, std::string &error) {
  return makeCudaHead<LinearCrossEntropyKernel, false>(args, error, false);
}
std::unique_ptr<Kernel> makeCudaLinearCrossEntropyTrain(const KernelArgs &args, std::string &error) {
  return makeCudaHead<LinearCrossEntropyKernel, true>(args, error, false);
}
std::unique_ptr<Kernel> makeCudaLinearCrossEntropyPartial(const KernelArgs &args,
                                                          std::string &error) {
  return makeCudaHead<ShardedHeadKernel, false>(args, error, true);
}
std::unique_ptr<Kernel> makeCudaLinearCrossEntropyPartialGrad(const KernelArgs &args,
                                                              std::string &error) {
  return makeCudaHead<ShardedHeadKernel, true>(args, error, true);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "linear_cross_entropy", makeCudaLinearCrossEntropyForward);
LLMC_REGISTER_KERNEL(CUDA, "linear_cross_entropy_train", makeCudaLinearCrossEntropyTrain);
LLMC_REGISTER_KERNEL(CUDA, "linear_cross_entropy_partial", makeCudaLinearCrossEntropyPartial);
LLMC_REGISTER_KERNEL(CUDA, "linear_cross_entropy_partial_grad",
                     makeCudaLinearCrossEntropyPartialGrad);

} // namespace llmc::cuda
