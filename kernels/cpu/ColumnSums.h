//===- ColumnSums.h - reduce_sum's order of summation -----------*- C++ -*-===//
//
// The column sums of an [outer, inner] tensor as reduce_sum computes them:
// the rows split into a number of chunks chosen from the shape alone, each
// (chunk, column block) task summing its rows in order in double, then the
// chunks added in order. The order depends on the shape only, so the sums
// are the same whatever the thread count, and a kernel that makes the
// values (matmul_gelu_grad's bias gradient) gets reduce_sum's sums bit for
// bit by summing them in this order as it stores them.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_COLUMNSUMS_H
#define LLMC_KERNELS_CPU_COLUMNSUMS_H

#include "kernels/cpu/Common.h"

#include <algorithm>
#include <vector>

namespace llmc::cpu {

class ColumnSums {
public:
  static constexpr int64_t kColumnBlock = 256;

  ColumnSums(int64_t outer, int64_t inner) : outer_(outer), inner_(inner) {
    // A wide row has enough column parallelism on its own; a narrow one
    // splits the rows.
    chunks_ = inner_ >= 4096 ? 1 : std::clamp<int64_t>(outer_ / 256, 1, 64);
    if (chunks_ > 1) partial_.resize(chunks_ * inner_);
  }

  /// Calls `row(r, j0, cols, acc)` for every row r of every task, which
  /// adds the row's values at columns [j0, j0 + cols) into acc[0, cols)
  /// (making or storing them on the way if it likes); then writes the
  /// column sums to `out`.
  template <typename T, typename RowFn> void run(RowFn row, T *out) {
    const int64_t blocks = (inner_ + kColumnBlock - 1) / kColumnBlock;
    const int64_t rowsPerChunk = (outer_ + chunks_ - 1) / chunks_;
    const int64_t chunks = chunks_, inner = inner_, outer = outer_;
#pragma omp parallel for collapse(2) schedule(static) if (outer * inner > kParallelGrain)
    for (int64_t chunk = 0; chunk < chunks; ++chunk)
      for (int64_t block = 0; block < blocks; ++block) {
        int64_t j0 = block * kColumnBlock, cols = std::min(kColumnBlock, inner - j0);
        int64_t r0 = chunk * rowsPerChunk, r1 = std::min(outer, r0 + rowsPerChunk);
        double acc[kColumnBlock] = {};
        for (int64_t r = r0; r < r1; ++r) row(r, j0, cols, acc);
        if (chunks == 1) {
          for (int64_t j = 0; j < cols; ++j) store(out, j0 + j, static_cast<float>(acc[j]));
        } else {
          std::copy(acc, acc + cols, partial_.data() + chunk * inner + j0);
        }
      }
    if (chunks == 1) return;
#pragma omp parallel for schedule(static) if (inner * chunks > kParallelGrain)
    for (int64_t j = 0; j < inner; ++j) {
      double sum = 0.0;
      for (int64_t chunk = 0; chunk < chunks; ++chunk) sum += partial_[chunk * inner + j];
      store(out, j, static_cast<float>(sum));
    }
  }

private:
  int64_t outer_, inner_, chunks_ = 1;
  std::vector<double> partial_; // [chunks, inner]
};

} // namespace llmc::cpu

#endif
