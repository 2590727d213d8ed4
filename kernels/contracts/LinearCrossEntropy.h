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

#include "common/HeadScratch.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"
#include "kernels/contracts/CrossEntropySharded.h"

#include <cstdint>
#include <string>
#include <vector>

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
inline bool bindLinearCrossEntropy(const KernelArgs &args, bool train, std::string &error,
                                   LinearCrossEntropyBinding *out);

/// "linear_cross_entropy_partial" or "linear_cross_entropy_partial_grad".
inline const char *linearCrossEntropyPartialName(bool grad) {
  return grad ? "linear_cross_entropy_partial_grad" : "linear_cross_entropy_partial";
}
inline bool bindLinearCrossEntropyPartial(const KernelArgs &args, bool grad, std::string &error,
                                          LinearCrossEntropyBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace linear_cross_entropy_impl {

/// h, w, targets (inputs 0-2) and the head's attributes, into `b`.
inline bool bindHead(Validator &v, LinearCrossEntropyBinding &b) {
  if (!v.flagAttr("transpose_b", &b.transposeB) || !v.intAttr("ignore_index", &b.ignoreIndex, -1) ||
      !v.intAttr("chunk_rows", &b.chunkRows, 0))
    return false;
  const TensorView &h = v.in(0), &w = v.in(1), &targets = v.in(2);
  if (!v.isFloat(h, "h") || !v.hasDType(w, "w", h.dtype) || !v.hasRank(w, "w", 2) ||
      !v.fitsInt(h, "h") || !v.fitsInt(w, "w"))
    return false;
  b.dtype = h.dtype;
  if (h.rank() < 2)
    return v.fail("h must be [..., D], got " + h.describe());
  b.width = h.dim(-1);
  b.vocab = w.dim(b.transposeB ? 0 : 1);
  if (w.dim(b.transposeB ? 1 : 0) != b.width)
    return v.fail("w " + w.describe() + " does not match h " + h.describe());
  std::vector<int64_t> rows(h.shape.begin(), h.shape.end() - 1);
  if (!v.isIndex(targets, "targets") || !v.hasType(targets, "targets", targets.dtype, rows))
    return false;
  b.rows = product(rows);
  if (b.chunkRows < 1)
    return v.fail("chunk_rows must be >= 1");
  b.shard = {b.vocab, 0, b.vocab, b.ignoreIndex};
  return true;
}

/// The scratch: the chunk's rows, and the fp32 sum of a 16-bit dw when it
/// spans several chunks (common/HeadScratch.h).
inline bool isScratch(Validator &v, const TensorView &t, LinearCrossEntropyBinding &b) {
  b.accumulatorRows = headAccumulatorRows(b.rows, b.width, b.chunkRows, b.dtype != DType::F32,
                                          b.train && b.weightGrad);
  return v.hasType(t, "scratch", DType::F32, {b.chunkRows + b.accumulatorRows, b.vocab});
}

/// The backward forms' frozen_weight flag, into `b`.
inline bool bindWeightGrad(Validator &v, LinearCrossEntropyBinding &b) {
  bool frozen = false;
  if (!v.flagAttr("frozen_weight", &frozen))
    return false;
  b.weightGrad = !frozen;
  return true;
}

/// dh (h's type and shape) as output `first` and, unless the weight is
/// frozen, dw (w's) after it.
inline bool areGrads(Validator &v, size_t first, const LinearCrossEntropyBinding &b) {
  const TensorView &h = v.in(0), &w = v.in(1);
  return v.hasType(v.out(first), "dh", h.dtype, h.shape) &&
         (!b.weightGrad || v.hasType(v.out(first + 1), "dw", h.dtype, w.shape));
}

} // namespace linear_cross_entropy_impl
using namespace linear_cross_entropy_impl;

inline bool bindLinearCrossEntropy(const KernelArgs &args, bool train, std::string &error,
                                   LinearCrossEntropyBinding *out) {
  Validator v(linearCrossEntropyName(train), args, error);
  LinearCrossEntropyBinding b;
  b.train = train;
  if (train && !bindWeightGrad(v, b))
    return false;
  const size_t scratch = train ? (b.weightGrad ? 3 : 2) : 1;
  int64_t numClasses = 0;
  if (!v.arity(train ? 4 : 3, scratch + 1) || !bindHead(v, b) ||
      !v.intAttr("num_classes", &numClasses, 0) || !v.isF32Scalar(v.out(0), "loss") ||
      !isScratch(v, v.out(scratch), b))
    return false;
  if (numClasses < 0 || numClasses > b.vocab)
    return v.fail("num_classes " + std::to_string(numClasses) + " must be in [0, " +
                  std::to_string(b.vocab) + "] (w's classes)");
  if (numClasses > 0)
    b.shard.total = numClasses; // the padding past it counts for nothing
  if (train && (!v.isF32Scalar(v.in(3), "dloss") || !areGrads(v, 1, b)))
    return false;
  *out = b;
  return true;
}

inline bool bindLinearCrossEntropyPartial(const KernelArgs &args, bool grad, std::string &error,
                                          LinearCrossEntropyBinding *out) {
  Validator v(linearCrossEntropyPartialName(grad), args, error);
  LinearCrossEntropyBinding b;
  b.train = grad;
  CrossEntropyPartialBinding shard;
  if (grad && !bindWeightGrad(v, b))
    return false;
  const size_t scratch = grad ? (b.weightGrad ? 2 : 1) : 3;
  if (!v.arity(grad ? 6 : 3, scratch + 1) || !bindHead(v, b) || !bindClassShard(v, b.vocab, &shard))
    return false;
  b.shard = {b.vocab, shard.classOffset, shard.numClasses, b.ignoreIndex};
  const std::vector<int64_t> &rows = v.in(2).shape;
  auto rowStat = [&](const TensorView &t, const char *what) {
    return v.hasType(t, what, DType::F32, rows);
  };
  bool ok = grad ? rowStat(v.in(3), "shift") && rowStat(v.in(4), "dsumexp") &&
                       rowStat(v.in(5), "dtarget_logit") && areGrads(v, 0, b) &&
                       isScratch(v, v.out(scratch), b)
                 : rowStat(v.out(0), "max") && rowStat(v.out(1), "sumexp") &&
                       rowStat(v.out(2), "target_logit") && isScratch(v, v.out(scratch), b);
  if (!ok)
    return false;
  *out = b;
  return true;
}

} // namespace llmc::contracts

#endif
