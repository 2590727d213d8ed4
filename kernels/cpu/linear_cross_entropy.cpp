//===- linear_cross_entropy.cpp - the LM head and its loss, in row chunks -===//
//
// For each chunk of `chunk_rows` rows: the chunk's logits h_c · wᵀ (one
// sgemm into the [chunk_rows, V] scratch), then per row the stable
// log-sum-exp and the row's loss, as cross_entropy computes them. The
// training form then overwrites the chunk with (softmax − onehot)·dloss/
// count, as cross_entropy_grad would, and multiplies it into the chunk's
// rows of dh and into dw (accumulated over chunks, in chunk order; a
// frozen head has no dw and skips that product). The whole [rows, V]
// logits and their gradient are never stored: the arena holds one chunk.
//
// Under vocabulary parallelism a rank holds a shard of w and the log-sum-
// exp needs every shard, so the loop runs twice, with collectives between
// (passes/Fuse.cpp): linear_cross_entropy_partial keeps per row the
// shard's max, Σ exp(logit − max) and the target's logit (reduce_max and
// cross_entropy_partial, the sum relative to the shard's own max), and
// linear_cross_entropy_partial_grad computes the logits again and forms
// cross_entropy_partial_grad's gradient in their place before the two
// products: one GEMM more than the unfused ops, no [rows, V] tensor.
//
// bf16 and f16 are storage, as in matmul: h and w are widened into fp32
// copies, each chunk's logits rounded to the type (where the unfused
// matmul stores them) before the loss reads them, the gradient rounded
// (where cross_entropy_grad stores it) before the products read it, dh
// rounded per chunk and dw accumulated in fp32 over the chunks and rounded
// once — with one chunk, the unfused ops' values bit for bit.
//
// Row losses land in bind-time scratch and are summed in row order in
// double, so the loss does not depend on the thread count or the chunk
// size. A target outside [0, V) that is not ignored makes its row (and the
// loss) NaN, never an out-of-bounds read.
//
// A padded vocabulary (num_classes < V, llmc-pad-vocab) is computed on its
// classes only: the GEMMs run over the first num_classes columns of the
// logits (rows of w, or columns of a [D, V] w) with the padded leading
// dimensions, and dw's padding is set to 0. OpenBLAS's sums do not depend
// on the leading dimensions, so the loss, dh and dw's classes are the
// unpadded head's bit for bit.
//
// In bf16 or f16 with several chunks, dw's fp32 sum lives in the scratch's
// rows past the chunk (common/HeadScratch.h), in the arena.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/LinearCrossEntropy.h"
#include "kernels/cpu/Blas.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

/// The chunk loop every head kernel runs: each chunk's logits into the
/// scratch, a kernel-specific pass over its rows and, when training, the
/// gradient that pass left in the scratch multiplied into dh and dw.
template <typename T> class ChunkedHead : public Kernel {
protected:
  static constexpr bool kWide = std::is_same_v<T, float>;

  /// `columns`: the logits' columns the GEMMs compute (a padded
  /// vocabulary's classes; the others are never read and get gradient 0).
  ChunkedHead(const KernelArgs &args, const contracts::LinearCrossEntropyBinding &b,
              SgemmFn sgemm, T *dh, T *dw, float *scratch, int64_t columns)
      : b_(b), targets_(args.inputs[2]), threads_(bindThreads()), columns_(columns),
        sgemm_(sgemm), h_(args.inputs[0].as<T>()), w_(args.inputs[1].as<T>()), dh_(dh), dw_(dw),
        scratch_(scratch) {
    if constexpr (!kWide) {
      const int64_t chunk = std::min(b.chunkRows, b.rows) * b.width;
      wWide_.resize(b.vocab * b.width);
      hWide_.resize(chunk);
      if (b.train) dhWide_.resize(chunk);
      if (dw && !b.accumulatorRows) dwWide_.resize(b.vocab * b.width);
    }
  }

  /// Runs the chunks; `rows(r0, n)` sees rows r0 .. r0+n's logits in the
  /// scratch and, when training, leaves their gradient there.
  template <typename Rows> void forEachChunk(Rows &&rows) {
    const int64_t d = b_.width, vocab = b_.vocab;
    const int ldw = static_cast<int>(b_.transposeB ? d : vocab), ld = static_cast<int>(vocab);
    const int cols = static_cast<int>(columns_), dim = static_cast<int>(d);
    const float *w = wide(w_, wWide_, vocab * d);
    float *dw = kWide                ? reinterpret_cast<float *>(dw_)
                : b_.accumulatorRows ? scratch_ + b_.chunkRows * vocab
                                     : dwWide_.data();
    for (int64_t r0 = 0; r0 < b_.rows; r0 += b_.chunkRows) {
      const int n = static_cast<int>(std::min(b_.chunkRows, b_.rows - r0));
      const float *hc = wide(h_ + r0 * d, hWide_, n * d);
      // logits[n, V] = h_c · wᵀ (w [V, D]) or h_c · w (w [D, V]).
      sgemm_(CblasRowMajor, CblasNoTrans, b_.transposeB ? CblasTrans : CblasNoTrans, n, cols,
             dim, 1.0f, hc, dim, w, ldw, 0.0f, scratch_, ld);
      roundThrough(scratch_, n * vocab);
      rows(r0, n);
      if (!b_.train)
        continue;
      roundThrough(scratch_, n * vocab);
      // dh_c[n, D] = g · w (w [V, D]) or g · wᵀ (w [D, V]).
      float *dhc = kWide ? reinterpret_cast<float *>(dh_) + r0 * d : dhWide_.data();
      sgemm_(CblasRowMajor, CblasNoTrans, b_.transposeB ? CblasNoTrans : CblasTrans, n, dim,
             cols, 1.0f, scratch_, ld, w, ldw, 0.0f, dhc, dim);
      if constexpr (!kWide)
        narrowParallel(dhc, dh_ + r0 * d, n * d);
      if (!dw_)
        continue;
      // dw += gᵀ · h_c ([V, D]) or h_cᵀ · g ([D, V]); the first chunk sets it.
      const float beta = r0 == 0 ? 0.0f : 1.0f;
      if (b_.transposeB)
        sgemm_(CblasRowMajor, CblasTrans, CblasNoTrans, cols, dim, n, 1.0f, scratch_, ld, hc,
               dim, beta, dw, dim);
      else
        sgemm_(CblasRowMajor, CblasTrans, CblasNoTrans, dim, cols, n, 1.0f, hc, dim, scratch_,
               ld, beta, dw, ld);
    }
    if (dw_) {
      zeroPadding(dw);
      if constexpr (!kWide)
        narrowParallel(dw, dw_, vocab * d);
    }
  }

  /// The scratch row of chunk row `i`.
  float *scratchRow(int i) const { return scratch_ + i * b_.vocab; }

  contracts::LinearCrossEntropyBinding b_;
  IdView targets_;
  int threads_;

private:
  /// `n` values of x as fp32: x itself, or widened into `scratch`.
  static const float *wide(const T *x, std::vector<float> &scratch, int64_t n) {
    if constexpr (kWide) {
      return x;
    } else {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) scratch[i] = load(x, i);
      return scratch.data();
    }
  }

  /// dw's classes past `columns_` (a padded vocabulary's rows, or
  /// columns of a [D, V] w): no gradient.
  void zeroPadding(float *dw) const {
    const int64_t d = b_.width, vocab = b_.vocab;
    if (columns_ == vocab)
      return;
    if (b_.transposeB) {
      std::fill(dw + columns_ * d, dw + vocab * d, 0.0f);
      return;
    }
    for (int64_t i = 0; i < d; ++i)
      std::fill(dw + i * vocab + columns_, dw + (i + 1) * vocab, 0.0f);
  }

  /// Rounds fp32 values to T and back, in place (nothing for fp32).
  static void roundThrough(float *x, int64_t n) {
    if constexpr (!kWide) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        T v;
        store(&v, 0, x[i]);
        x[i] = load(&v, 0);
      }
    }
  }

  int64_t columns_;
  SgemmFn sgemm_;
  const T *h_, *w_;
  T *dh_, *dw_;
  float *scratch_;
  // bf16 / f16 only: fp32 copies of w and a chunk of h, a chunk of dh, dw
  // (dw in the scratch instead when it sums over chunks). dw_ is null
  // unless the kernel trains w.
  std::vector<float> wWide_, hWide_, dhWide_, dwWide_;
};

/// linear_cross_entropy(_train): the whole vocabulary, the loss (and its
/// gradient with dloss known up front).
template <typename T> class LinearCrossEntropyKernel final : public ChunkedHead<T> {
  using Base = ChunkedHead<T>;
  using Base::b_, Base::targets_, Base::threads_;

public:
  LinearCrossEntropyKernel(const KernelArgs &args, const contracts::LinearCrossEntropyBinding &b,
                           SgemmFn sgemm)
      : Base(args, b, sgemm, b.train ? args.outputs[1].as<T>() : nullptr,
             b.train && b.weightGrad ? args.outputs[2].as<T>() : nullptr,
             args.outputs.back().as<float>(), b.shard.valid()),
        dloss_(b.train ? args.inputs[3].as<float>() : nullptr), loss_(args.outputs[0].as<float>()),
        rowLoss_(static_cast<size_t>(b.rows)) {}

  void run(const StepContext &) override {
    int64_t count = 0;
    for (int64_t r = 0; r < b_.rows; ++r) count += targets_[r] != b_.ignoreIndex;
    const float factor = b_.train && count ? *dloss_ / static_cast<float>(count) : 0.0f;
    this->forEachChunk([&](int64_t r0, int n) { chunkRows(r0, n, factor); });
    double total = 0.0;
    for (int64_t r = 0; r < b_.rows; ++r) total += rowLoss_[r];
    *loss_ = count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
  }

private:
  /// The losses of rows r0 .. r0+n (whose logits are in the scratch) and,
  /// when training, their gradient in place of the logits.
  void chunkRows(int64_t r0, int n, float factor) {
    const int64_t vocab = b_.shard.valid(), width = b_.vocab; // the classes, then padding
#pragma omp parallel for num_threads(threads_) schedule(static) if (n * width > kParallelGrain)
    for (int i = 0; i < n; ++i) {
      const int64_t r = r0 + i, target = targets_[r];
      float *row = this->scratchRow(i);
      const bool ignored = target == b_.ignoreIndex;
      if (b_.train)
        std::fill(row + vocab, row + width, 0.0f); // the padding gets no gradient
      if (ignored || target < 0 || target >= vocab) {
        rowLoss_[r] = ignored ? 0.0 : static_cast<double>(kNaN);
        if (b_.train) {
          const float fillValue = ignored ? 0.0f : kNaN;
#pragma omp simd
          for (int64_t j = 0; j < vocab; ++j) row[j] = fillValue;
        }
        continue;
      }
      float m, lse = rowLogSumExp(row, vocab, &m);
      rowLoss_[r] = static_cast<double>(lse - row[target]);
      if (!b_.train)
        continue;
      const float targetProbability = expFast(row[target] - lse);
#pragma omp simd
      for (int64_t j = 0; j < vocab; ++j) row[j] = expFast(row[j] - lse) * factor;
      row[target] = (targetProbability - 1.0f) * factor;
    }
  }

  const float *dloss_;
  float *loss_;
  std::vector<double> rowLoss_;
};

/// linear_cross_entropy_partial(_grad): one vocabulary shard's statistics,
/// or its gradient from the statistics all-reduced over the shards.
template <typename T> class ShardedHeadKernel final : public ChunkedHead<T> {
  using Base = ChunkedHead<T>;
  using Base::b_, Base::targets_, Base::threads_;

public:
  ShardedHeadKernel(const KernelArgs &args, const contracts::LinearCrossEntropyBinding &b,
                    SgemmFn sgemm)
      : Base(args, b, sgemm, b.train ? args.outputs[0].as<T>() : nullptr,
             b.train && b.weightGrad ? args.outputs[1].as<T>() : nullptr,
             args.outputs.back().as<float>(), b.vocab),
        stats_{b.train ? args.inputs[3].as<float>() : args.outputs[0].as<float>(),
               b.train ? args.inputs[4].as<float>() : args.outputs[1].as<float>(),
               b.train ? args.inputs[5].as<float>() : args.outputs[2].as<float>()} {}

  void run(const StepContext &) override {
    this->forEachChunk([&](int64_t r0, int n) {
#pragma omp parallel for num_threads(threads_) schedule(static) if (n * b_.vocab > kParallelGrain)
      for (int i = 0; i < n; ++i) {
        if (b_.train)
          gradRow(r0 + i, this->scratchRow(i));
        else
          statsRow(r0 + i, this->scratchRow(i));
      }
    });
  }

private:
  /// reduce_max and cross_entropy_partial of one row, the sum relative to
  /// the row's max.
  void statsRow(int64_t r, const float *row) {
    const contracts::ClassShard &shard = b_.shard;
    float m;
    const float sum = rowSumExp(row, shard.valid(), &m); // padding past valid() counts for nothing
    stats_[0][r] = m;
    stats_[1][r] = sum;
    const int64_t column = shard.column(targets_[r]);
    stats_[2][r] = column >= 0 ? row[column] : column == -1 ? 0.0f : kNaN;
  }

  /// cross_entropy_partial_grad of one row, in place of its logits.
  void gradRow(int64_t r, float *row) {
    const contracts::ClassShard &shard = b_.shard;
    const int64_t column = shard.column(targets_[r]), valid = shard.valid();
    if (column == -2) {
#pragma omp simd
      for (int64_t j = 0; j < shard.width; ++j) row[j] = kNaN;
      return;
    }
    const float shift = stats_[0][r], ds = stats_[1][r];
    const float target = column >= 0 ? row[column] : 0.0f;
#pragma omp simd
    for (int64_t j = 0; j < valid; ++j) row[j] = ds * expFast(row[j] - shift);
    for (int64_t j = valid; j < shard.width; ++j) row[j] = 0.0f; // padding gets no gradient
    // cross_entropy_partial_grad's expression, so it rounds (and contracts) alike.
    if (column >= 0) row[column] = ds * expFast(target - shift) + stats_[2][r];
  }

  /// Forward: the outputs max, sumexp, target_logit. Backward: the inputs
  /// shift, dsumexp, dtarget_logit.
  float *stats_[3];
};

template <template <typename> class K, bool Train>
std::unique_ptr<Kernel> makeHead(const KernelArgs &args, std::string &error, bool sharded) {
  contracts::LinearCrossEntropyBinding b;
  const char *name = sharded ? contracts::linearCrossEntropyPartialName(Train)
                             : contracts::linearCrossEntropyName(Train);
  if (!(sharded ? contracts::bindLinearCrossEntropyPartial(args, Train, error, &b)
                : contracts::bindLinearCrossEntropy(args, Train, error, &b)))
    return nullptr;
  std::string blasError;
  SgemmFn sgemm = blasSgemm(blasError);
  if (!sgemm) {
    error = std::string(name) + ": " + blasError;
    return nullptr;
  }
  return makeFloatKernel<K>(b.dtype, args, b, sgemm);
}

std::unique_ptr<Kernel> makeLinearCrossEntropyForward(const KernelArgs &args, std::string &error) {
  return makeHead<LinearCrossEntropyKernel, false>(args, error, false);
}
std::unique_ptr<Kernel> makeLinearCrossEntropyTrain(const KernelArgs &args, std::string &error) {
  return makeHead<LinearCrossEntropyKernel, true>(args, error, false);
}
std::unique_ptr<Kernel> makeLinearCrossEntropyPartial(const KernelArgs &args, std::string &error) {
  return makeHead<ShardedHeadKernel, false>(args, error, true);
}
std::unique_ptr<Kernel> makeLinearCrossEntropyPartialGrad(const KernelArgs &args,
                                                          std::string &error) {
  return makeHead<ShardedHeadKernel, true>(args, error, true);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "linear_cross_entropy", makeLinearCrossEntropyForward);
LLMC_REGISTER_KERNEL(CPU, "linear_cross_entropy_train", makeLinearCrossEntropyTrain);
LLMC_REGISTER_KERNEL(CPU, "linear_cross_entropy_partial", makeLinearCrossEntropyPartial);
LLMC_REGISTER_KERNEL(CPU, "linear_cross_entropy_partial_grad", makeLinearCrossEntropyPartialGrad);

} // namespace llmc::cpu
