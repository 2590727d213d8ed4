//===- embedding.cpp - row lookup and its scatter-add backward ------------===//
//
// Forward copies table rows by id, one output row per OpenMP iteration.
//
// The backward must add every dy row into the row of its id, and ids repeat
// (common tokens). Instead of atomics or a per-thread copy of the table, a
// counting sort groups the positions of each id (stable, so rows are added
// in position order and the result is deterministic); then each table row is
// owned by one thread, summed in fp32 and written once — zero for ids that do
// not occur. The sum is taken in the order kEmbeddingGradSegment defines
// (contracts/Embedding.h): within each segment of the sorted positions,
// then over segments, which is the CUDA kernel's order, so the two agree
// bit for bit. The sort's arrays are sized at bind time.
//
// Ids outside [0, V) are the runtime's to report; here they are never used
// as addresses: the forward writes NaN rows (so the loss shows it) and the
// backward skips them.
//
// A vocabulary-parallel shard (`vocab_size` > 0) holds rows [row_offset,
// row_offset + rows) of the whole table: valid ids of other shards give
// zero rows forward and contribute nothing backward, so the shards' results
// summed over ranks equal the whole table's.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Embedding.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

/// Which rows of the whole vocabulary a table holds.
using contracts::VocabShard;
using contracts::vocabShard;

template <typename T> class EmbeddingKernel final : public Kernel {
public:
  EmbeddingKernel(const KernelArgs &args, VocabShard shard)
      : table_(args.inputs[0].as<T>()), ids_(args.inputs[1]), out_(args.outputs[0].as<T>()),
        shard_(shard), c_(args.inputs[0].dim(1)), n_(args.inputs[1].numel()) {}

  void run(const StepContext &) override {
#pragma omp parallel for schedule(static) if (n_ * c_ > kParallelGrain)
    for (int64_t n = 0; n < n_; ++n) {
      int64_t row = shard_.row(ids_[n]);
      T *out = out_ + n * c_;
      if (row >= 0) {
        std::memcpy(out, table_ + row * c_, c_ * sizeof(T));
      } else {
        float fillValue = row == -1 ? 0.0f : kNaN;
        for (int64_t i = 0; i < c_; ++i) store(out, i, fillValue);
      }
    }
  }

private:
  const T *table_;
  IdView ids_;
  T *out_;
  VocabShard shard_;
  int64_t c_, n_;
};

template <typename T> class EmbeddingGradKernel final : public Kernel {
public:
  EmbeddingGradKernel(const KernelArgs &args, VocabShard shard)
      : ids_(args.inputs[0]), dy_(args.inputs[1].as<T>()), dtable_(args.outputs[0].as<T>()),
        shard_(shard), vocab_(shard.rows), c_(args.outputs[0].dim(1)),
        n_(args.inputs[0].numel()), threads_(bindThreads()), start_(vocab_ + 1),
        cursor_(vocab_), order_(n_), acc_(threads_, 2 * c_) {}

  void run(const StepContext &) override {
    // Counting sort of positions by (local) row.
    std::fill(start_.begin(), start_.end(), 0);
    for (int64_t n = 0; n < n_; ++n) {
      int64_t row = shard_.row(ids_[n]);
      if (row >= 0) ++start_[row + 1];
    }
    for (int64_t v = 0; v < vocab_; ++v) start_[v + 1] += start_[v];
    std::copy(start_.begin(), start_.end() - 1, cursor_.begin());
    for (int64_t n = 0; n < n_; ++n) {
      int64_t row = shard_.row(ids_[n]);
      if (row >= 0) order_[cursor_[row]++] = n;
    }

    const int64_t c = c_;
#pragma omp parallel num_threads(threads_) if (vocab_ * c > kParallelGrain)
    {
      float *acc = acc_.at(omp_get_thread_num()), *piece = acc + c;
#pragma omp for schedule(dynamic, 16)
      for (int64_t v = 0; v < vocab_; ++v) {
        T *row = dtable_ + v * c;
        const int64_t begin = start_[v], end = start_[v + 1];
        if (begin == end) {
          std::memset(static_cast<void *>(row), 0, c * sizeof(T));
          continue;
        }
        // The first segment's sum lands in acc (0 + s = s), each later one
        // is summed apart and added.
        const int64_t firstEnd = std::min(end, (begin / kSegment + 1) * kSegment);
        std::fill(acc, acc + c, 0.0f);
        addRows(acc, begin, firstEnd);
        for (int64_t k = firstEnd; k < end; k += kSegment) {
          std::fill(piece, piece + c, 0.0f);
          addRows(piece, k, std::min(end, k + kSegment));
#pragma omp simd
          for (int64_t i = 0; i < c; ++i) acc[i] += piece[i];
        }
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) store(row, i, acc[i]);
      }
    }
  }

private:
  static constexpr int64_t kSegment = contracts::kEmbeddingGradSegment;

  /// sum += the dy rows of sorted positions [begin, end), in order.
  void addRows(float *sum, int64_t begin, int64_t end) const {
    const int64_t c = c_;
    for (int64_t k = begin; k < end; ++k) {
      const T *dy = dy_ + order_[k] * c;
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) sum[i] += load(dy, i);
    }
  }

  IdView ids_;
  const T *dy_;
  T *dtable_;
  VocabShard shard_;
  int64_t vocab_, c_, n_;
  int threads_;
  std::vector<int64_t> start_, cursor_, order_;
  ThreadScratch acc_;
};

std::unique_ptr<Kernel> makeEmbedding(const KernelArgs &args, std::string &error) {
  contracts::EmbeddingBinding b;
  if (!contracts::bindEmbedding(args, error, &b)) return nullptr;
  return makeFloatKernel<EmbeddingKernel>(b.dtype, args, vocabShard(b));
}

std::unique_ptr<Kernel> makeEmbeddingGrad(const KernelArgs &args, std::string &error) {
  contracts::EmbeddingBinding b;
  if (!contracts::bindEmbeddingGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<EmbeddingGradKernel>(b.dtype, args, vocabShard(b));
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "embedding", makeEmbedding);
LLMC_REGISTER_KERNEL(CPU, "embedding_grad", makeEmbeddingGrad);

} // namespace llmc::cpu
