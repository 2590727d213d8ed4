//===- cross_entropy.cpp - softmax cross-entropy and its gradient ---------===//
//
// logits [..., V], targets [...] (i32/i64). Per row, a stable log-sum-exp
// (max, then Σ exp(x − max) with the vectorised exp) gives
//   loss_row = lse − logits[target],
// and the loss is the mean over rows whose target is not `ignore_index`
// (0 when every target is ignored). Rows are independent and run in
// parallel; the row losses land in bind-time scratch and are summed in row
// order in double, so the loss does not depend on the thread count.
//
// The gradient is (softmax − onehot)·dloss/count per non-ignored row and 0
// for ignored rows; count is recounted from the targets (cheap) so the
// kernel needs nothing from the forward. A target outside [0, V) that is not
// ignored makes its row NaN (never an out-of-bounds read): the runtime
// reports bad data, the kernel only keeps it visible.
//
// With num_classes < V (a padded vocabulary, llmc-pad-vocab) the rows are V
// apart but only their first num_classes columns are classes: the padding
// is read by nothing and its gradient is 0, so the losses and the classes'
// gradient are the unpadded kernel's bit for bit.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/CrossEntropy.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

template <typename T> class CrossEntropyKernel final : public Kernel {
public:
  CrossEntropyKernel(const KernelArgs &args, const contracts::CrossEntropyBinding &b)
      : logits_(args.inputs[0].as<T>()), targets_(args.inputs[1]),
        loss_(args.outputs[0].as<float>()), width_(b.width), vocab_(b.classes), rows_(b.rows),
        ignoreIndex_(b.ignoreIndex), threads_(bindThreads()), rowLoss_(rows_),
        rowScratch_(threads_, vocab_) {}

  void run(const StepContext &) override {
#pragma omp parallel num_threads(threads_) if (rows_ * vocab_ > kParallelGrain)
    {
      float *scratch = rowScratch_.at(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) {
        int64_t target = targets_[r];
        if (target == ignoreIndex_) {
          rowLoss_[r] = 0.0;
          continue;
        }
        if (target < 0 || target >= vocab_) {
          rowLoss_[r] = kNaN;
          continue;
        }
        const float *row = rowAsFloat(logits_ + r * width_, 0, vocab_, scratch);
        float m;
        rowLoss_[r] = static_cast<double>(rowLogSumExp(row, vocab_, &m) - row[target]);
      }
    }
    double total = 0.0;
    int64_t count = 0;
    for (int64_t r = 0; r < rows_; ++r) {
      total += rowLoss_[r];
      count += targets_[r] != ignoreIndex_;
    }
    *loss_ = count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
  }

private:
  const T *logits_;
  IdView targets_;
  float *loss_;
  int64_t width_, vocab_, rows_, ignoreIndex_; // vocab_: the classes of each width_-wide row
  int threads_;
  std::vector<double> rowLoss_;
  ThreadScratch rowScratch_;
};

template <typename T> class CrossEntropyGradKernel final : public Kernel {
public:
  CrossEntropyGradKernel(const KernelArgs &args, const contracts::CrossEntropyBinding &b)
      : logits_(args.inputs[0].as<T>()), targets_(args.inputs[1]),
        dloss_(args.inputs[2].as<float>()), dlogits_(args.outputs[0].as<T>()), width_(b.width),
        vocab_(b.classes), rows_(b.rows), ignoreIndex_(b.ignoreIndex), threads_(bindThreads()),
        rowScratch_(threads_, vocab_) {}

  void run(const StepContext &) override {
    int64_t count = 0;
    for (int64_t r = 0; r < rows_; ++r) count += targets_[r] != ignoreIndex_;
    const float factor = count ? *dloss_ / static_cast<float>(count) : 0.0f;
    const int64_t vocab = vocab_, width = width_;
#pragma omp parallel num_threads(threads_) if (rows_ * width > kParallelGrain)
    {
      float *scratch = rowScratch_.at(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) {
        int64_t target = targets_[r];
        T *out = dlogits_ + r * width;
#pragma omp simd
        for (int64_t j = vocab; j < width; ++j) store(out, j, 0.0f); // padding: no gradient
        if (target == ignoreIndex_ || target < 0 || target >= vocab) {
          float fillValue = target == ignoreIndex_ ? 0.0f : kNaN;
#pragma omp simd
          for (int64_t j = 0; j < vocab; ++j) store(out, j, fillValue);
          continue;
        }
        const float *row = rowAsFloat(logits_ + r * width, 0, vocab, scratch);
        float m, lse = rowLogSumExp(row, vocab, &m);
#pragma omp simd
        for (int64_t j = 0; j < vocab; ++j) store(out, j, expFast(row[j] - lse) * factor);
        store(out, target, (expFast(row[target] - lse) - 1.0f) * factor);
      }
    }
  }

private:
  const T *logits_;
  IdView targets_;
  const float *dloss_;
  T *dlogits_;
  int64_t width_, vocab_, rows_, ignoreIndex_; // vocab_: the classes of each width_-wide row
  int threads_;
  ThreadScratch rowScratch_;
};

std::unique_ptr<Kernel> makeCrossEntropy(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyBinding b;
  if (!contracts::bindCrossEntropy(args, error, &b)) return nullptr;
  return makeFloatKernel<CrossEntropyKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeCrossEntropyGrad(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyBinding b;
  if (!contracts::bindCrossEntropyGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<CrossEntropyGradKernel>(b.dtype, args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "cross_entropy", makeCrossEntropy);
LLMC_REGISTER_KERNEL(CPU, "cross_entropy_grad", makeCrossEntropyGrad);

} // namespace llmc::cpu
