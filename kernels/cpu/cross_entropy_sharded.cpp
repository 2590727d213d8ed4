//===- cross_entropy_sharded.cpp - vocabulary-parallel cross-entropy ------===//
//
// When the output head is split over the vocabulary, no rank holds a whole
// row of logits. Megatron's decomposition keeps the loss exact with three
// all-reduces of one number per row:
//
//   reduce_max               m_r   = max_j logits[r, j]          (→ max over ranks = shift)
//   cross_entropy_partial    s_r   = Σ_j exp(logits[r, j] − shift_r),
//                            t_r   = logits[r, target_r − offset] or 0   (→ sums over ranks)
//   cross_entropy_finish     loss  = mean_r (log s_r + shift_r − t_r)
//
// and the backward of each piece. reduce_max is a kernel of its own
// (reduce_max.cpp); the others are here. Every kernel is row-parallel; the
// loss, like llm.cross_entropy's, sums per-row values in row order in double
// so it does not depend on the thread count. The statistics are f32; the
// logits f32 or bf16.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/CrossEntropySharded.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

/// The classes a logits shard holds: [offset, offset + width) of total.
using contracts::ClassShard;
using contracts::classShard;

//===----------------------------------------------------------------------===//
// cross_entropy_partial and its gradient
//===----------------------------------------------------------------------===//

template <typename T> class CrossEntropyPartialKernel final : public Kernel {
public:
  CrossEntropyPartialKernel(const KernelArgs &args, ClassShard shard)
      : logits_(args.inputs[0].as<T>()), targets_(args.inputs[1]),
        shift_(args.inputs[2].as<float>()), sumexp_(args.outputs[0].as<float>()),
        target_(args.outputs[1].as<float>()), shard_(shard), rows_(args.inputs[1].numel()),
        threads_(bindThreads()), rowScratch_(threads_, shard.width) {}

  void run(const StepContext &) override {
    const int64_t width = shard_.width;
#pragma omp parallel num_threads(threads_) if (rows_ * width > kParallelGrain)
    {
      float *scratch = rowScratch_.at(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) {
        const float *row = rowAsFloat(logits_, r, width, scratch);
        const float shift = shift_[r];
        const int64_t valid = shard_.valid(); // padding past it adds nothing
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < valid; ++j) sum += expFast(row[j] - shift);
        sumexp_[r] = sum;
        int64_t column = shard_.column(targets_[r]);
        target_[r] = column >= 0 ? row[column] : column == -1 ? 0.0f : kNaN;
      }
    }
  }

private:
  const T *logits_;
  IdView targets_;
  const float *shift_;
  float *sumexp_, *target_;
  ClassShard shard_;
  int64_t rows_;
  int threads_;
  ThreadScratch rowScratch_;
};

template <typename T> class CrossEntropyPartialGradKernel final : public Kernel {
public:
  CrossEntropyPartialGradKernel(const KernelArgs &args, ClassShard shard)
      : logits_(args.inputs[0].as<T>()), targets_(args.inputs[1]),
        shift_(args.inputs[2].as<float>()), dsumexp_(args.inputs[3].as<float>()),
        dtarget_(args.inputs[4].as<float>()), dlogits_(args.outputs[0].as<T>()), shard_(shard),
        rows_(args.inputs[1].numel()), threads_(bindThreads()),
        rowScratch_(threads_, shard.width) {}

  void run(const StepContext &) override {
    const int64_t width = shard_.width;
#pragma omp parallel num_threads(threads_) if (rows_ * width > kParallelGrain)
    {
      float *scratch = rowScratch_.at(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows_; ++r) {
        const float *row = rowAsFloat(logits_, r, width, scratch);
        const float shift = shift_[r], ds = dsumexp_[r];
        T *out = dlogits_ + r * width;
        int64_t column = shard_.column(targets_[r]);
        if (column == -2) {
          for (int64_t j = 0; j < width; ++j) store(out, j, kNaN);
          continue;
        }
        const int64_t valid = shard_.valid(); // padding gets no gradient
#pragma omp simd
        for (int64_t j = 0; j < valid; ++j) store(out, j, ds * expFast(row[j] - shift));
        for (int64_t j = valid; j < width; ++j) store(out, j, 0.0f);
        if (column >= 0) store(out, column, ds * expFast(row[column] - shift) + dtarget_[r]);
      }
    }
  }

private:
  const T *logits_;
  IdView targets_;
  const float *shift_, *dsumexp_, *dtarget_;
  T *dlogits_;
  ClassShard shard_;
  int64_t rows_;
  int threads_;
  ThreadScratch rowScratch_;
};

std::unique_ptr<Kernel> makeCrossEntropyPartial(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyPartialBinding b;
  if (!contracts::bindCrossEntropyPartial(args, error, &b)) return nullptr;
  return makeFloatKernel<CrossEntropyPartialKernel>(b.dtype, args, classShard(b));
}

std::unique_ptr<Kernel> makeCrossEntropyPartialGrad(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyPartialBinding b;
  if (!contracts::bindCrossEntropyPartialGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<CrossEntropyPartialGradKernel>(b.dtype, args, classShard(b));
}

//===----------------------------------------------------------------------===//
// cross_entropy_finish and its gradient
//===----------------------------------------------------------------------===//

class CrossEntropyFinishKernel final : public Kernel {
public:
  CrossEntropyFinishKernel(const KernelArgs &args, int64_t ignoreIndex)
      : sumexp_(args.inputs[0].as<float>()), shift_(args.inputs[1].as<float>()),
        target_(args.inputs[2].as<float>()), targets_(args.inputs[3]),
        loss_(args.outputs[0].as<float>()), rows_(args.inputs[3].numel()),
        ignoreIndex_(ignoreIndex) {}

  void run(const StepContext &) override {
    double total = 0.0;
    int64_t count = 0;
    for (int64_t r = 0; r < rows_; ++r) {
      if (targets_[r] == ignoreIndex_) continue;
      total += static_cast<double>(std::log(sumexp_[r]) + shift_[r] - target_[r]);
      ++count;
    }
    *loss_ = count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
  }

private:
  const float *sumexp_, *shift_, *target_;
  IdView targets_;
  float *loss_;
  int64_t rows_, ignoreIndex_;
};

class CrossEntropyFinishGradKernel final : public Kernel {
public:
  CrossEntropyFinishGradKernel(const KernelArgs &args, int64_t ignoreIndex)
      : sumexp_(args.inputs[0].as<float>()), targets_(args.inputs[1]),
        dloss_(args.inputs[2].as<float>()), dsumexp_(args.outputs[0].as<float>()),
        dshift_(args.outputs[1].as<float>()), dtarget_(args.outputs[2].as<float>()),
        rows_(args.inputs[1].numel()), ignoreIndex_(ignoreIndex) {}

  void run(const StepContext &) override {
    int64_t count = 0;
    for (int64_t r = 0; r < rows_; ++r) count += targets_[r] != ignoreIndex_;
    const float g = count ? *dloss_ / static_cast<float>(count) : 0.0f;
    for (int64_t r = 0; r < rows_; ++r) {
      bool ignored = targets_[r] == ignoreIndex_;
      dsumexp_[r] = ignored ? 0.0f : g / sumexp_[r];
      dshift_[r] = ignored ? 0.0f : g;
      dtarget_[r] = ignored ? 0.0f : -g;
    }
  }

private:
  const float *sumexp_;
  IdView targets_;
  const float *dloss_;
  float *dsumexp_, *dshift_, *dtarget_;
  int64_t rows_, ignoreIndex_;
};

std::unique_ptr<Kernel> makeCrossEntropyFinish(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyFinishBinding b;
  if (!contracts::bindCrossEntropyFinish(args, error, &b)) return nullptr;
  return std::make_unique<CrossEntropyFinishKernel>(args, b.ignoreIndex);
}

std::unique_ptr<Kernel> makeCrossEntropyFinishGrad(const KernelArgs &args, std::string &error) {
  contracts::CrossEntropyFinishBinding b;
  if (!contracts::bindCrossEntropyFinishGrad(args, error, &b)) return nullptr;
  return std::make_unique<CrossEntropyFinishGradKernel>(args, b.ignoreIndex);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "cross_entropy_partial", makeCrossEntropyPartial);
LLMC_REGISTER_KERNEL(CPU, "cross_entropy_partial_grad", makeCrossEntropyPartialGrad);
LLMC_REGISTER_KERNEL(CPU, "cross_entropy_finish", makeCrossEntropyFinish);
LLMC_REGISTER_KERNEL(CPU, "cross_entropy_finish_grad", makeCrossEntropyFinishGrad);

} // namespace llmc::cpu
