//===- LinearCrossEntropy.h - contract of the fused head + loss -*- C++ -*-===//
//
// linear_cross_entropy: inputs h [rows × D] (any leading shape), w [V, D]
// (transpose_b) or [D, V], targets (one i32/i64 per row); outputs the f32
// scalar loss and the f32 scratch [chunk_rows (+ D, common/HeadScratch.h),
// V]; num_classes (0: V) leaves a padded vocabulary's last columns out of
// the loss, with gradient 0. linear_cross_entropy_train
// adds the f32 scalar dloss input and the dh (h's type) and dw (w's type)
// outputs before the scratch. h, w, dh and dw share one float type (f32,
// bf16 or f16: the logits and their gradient are then rounded to it where
// the unfused matmul and cross_entropy_grad store them).
//
// The vocabulary-parallel forms hold the classes [class_offset,
// class_offset + V) of num_classes (a rank's shard, as
// cross_entropy_partial's): linear_cross_entropy_partial has the same
// inputs and outputs the f32 per-row max, sumexp and target_logit (the
// targets' shape) before the scratch; linear_cross_entropy_partial_grad
// takes the f32 per-row shift, dsumexp and dtarget_logit after the targets
// and outputs dh, dw and the scratch. With the frozen_weight flag (a head
// that is not trained) the backward forms output no dw. Both backends bind
// through here.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_LINEARCROSSENTROPY_H
#define LLMC_KERNELS_CONTRACTS_LINEARCROSSENTROPY_H

#include "kernels/Kernel.h"
#include "kernels/contracts/CrossEntropySharded.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

struct LinearCrossEntropyBinding {
  int64_t rows = 0, width = 0, vocab = 0, chunkRows = 0, ignoreIndex = -1;
  bool transposeB = false;
  bool train = false; ///< the kernel forms the logits' gradient and dh, dw
  bool weightGrad = true; ///< with train: dw is an output (not frozen_weight)
  DType dtype = DType::F32; ///< h's, w's, dh's and dw's (the scratch and loss are fp32)
  /// The vocabulary-parallel forms' classes; else the first num_classes
  /// columns (all when it is 0).
  ClassShard shard{0, 0, 0, -1};
  /// Scratch rows past the chunk: D for dw's fp32 sum over chunks, else 0.
  int64_t accumulatorRows = 0;
};
/// "linear_cross_entropy" or "linear_cross_entropy_train": the kernel's
/// registry name, which its errors start with.
inline const char *linearCrossEntropyName(bool train) {
  return train ? "linear_cross_entropy_train" : "linear_cross_entropy";
}
bool bindLinearCrossEntropy(const KernelArgs &args, bool train, std::string &error,
                            LinearCrossEntropyBinding *out);

/// "linear_cross_entropy_partial" or "linear_cross_entropy_partial_grad".
inline const char *linearCrossEntropyPartialName(bool grad) {
  return grad ? "linear_cross_entropy_partial_grad" : "linear_cross_entropy_partial";
}
bool bindLinearCrossEntropyPartial(const KernelArgs &args, bool grad, std::string &error,
                                   LinearCrossEntropyBinding *out);

} // namespace llmc::contracts

#endif
