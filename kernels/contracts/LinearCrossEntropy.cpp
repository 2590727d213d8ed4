//===- LinearCrossEntropy.cpp - contract of the fused head + loss ---------===//

#include "kernels/contracts/LinearCrossEntropy.h"

#include "common/HeadScratch.h"
#include "kernels/Validator.h"

#include <vector>

namespace llmc::contracts {
namespace {

/// h, w, targets (inputs 0-2) and the head's attributes, into `b`.
bool bindHead(Validator &v, LinearCrossEntropyBinding &b) {
  if (!v.flagAttr("transpose_b", &b.transposeB) ||
      !v.intAttr("ignore_index", &b.ignoreIndex, -1) || !v.intAttr("chunk_rows", &b.chunkRows, 0))
    return false;
  const TensorView &h = v.in(0), &w = v.in(1), &targets = v.in(2);
  if (!v.isFloat(h, "h") || !v.hasDType(w, "w", h.dtype) || !v.hasRank(w, "w", 2) ||
      !v.fitsInt(h, "h") || !v.fitsInt(w, "w"))
    return false;
  b.dtype = h.dtype;
  if (h.rank() < 2) return v.fail("h must be [..., D], got " + h.describe());
  b.width = h.dim(-1);
  b.vocab = w.dim(b.transposeB ? 0 : 1);
  if (w.dim(b.transposeB ? 1 : 0) != b.width)
    return v.fail("w " + w.describe() + " does not match h " + h.describe());
  std::vector<int64_t> rows(h.shape.begin(), h.shape.end() - 1);
  if (!v.isIndex(targets, "targets") || !v.hasType(targets, "targets", targets.dtype, rows))
    return false;
  b.rows = product(rows);
  if (b.chunkRows < 1) return v.fail("chunk_rows must be >= 1");
  b.shard = {b.vocab, 0, b.vocab, b.ignoreIndex};
  return true;
}

/// The scratch: the chunk's rows, and the fp32 sum of a 16-bit dw when it
/// spans several chunks (common/HeadScratch.h).
bool isScratch(Validator &v, const TensorView &t, LinearCrossEntropyBinding &b) {
  b.accumulatorRows = headAccumulatorRows(b.rows, b.width, b.chunkRows, b.dtype != DType::F32,
                                          b.train && b.weightGrad);
  return v.hasType(t, "scratch", DType::F32, {b.chunkRows + b.accumulatorRows, b.vocab});
}

/// The backward forms' frozen_weight flag, into `b`.
bool bindWeightGrad(Validator &v, LinearCrossEntropyBinding &b) {
  bool frozen = false;
  if (!v.flagAttr("frozen_weight", &frozen))
    return false;
  b.weightGrad = !frozen;
  return true;
}

/// dh (h's type and shape) as output `first` and, unless the weight is
/// frozen, dw (w's) after it.
bool areGrads(Validator &v, size_t first, const LinearCrossEntropyBinding &b) {
  const TensorView &h = v.in(0), &w = v.in(1);
  return v.hasType(v.out(first), "dh", h.dtype, h.shape) &&
         (!b.weightGrad || v.hasType(v.out(first + 1), "dw", h.dtype, w.shape));
}

} // namespace

bool bindLinearCrossEntropy(const KernelArgs &args, bool train, std::string &error,
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

bool bindLinearCrossEntropyPartial(const KernelArgs &args, bool grad, std::string &error,
                                   LinearCrossEntropyBinding *out) {
  Validator v(linearCrossEntropyPartialName(grad), args, error);
  LinearCrossEntropyBinding b;
  b.train = grad;
  CrossEntropyPartialBinding shard;
  if (grad && !bindWeightGrad(v, b))
    return false;
  const size_t scratch = grad ? (b.weightGrad ? 2 : 1) : 3;
  if (!v.arity(grad ? 6 : 3, scratch + 1) || !bindHead(v, b) ||
      !bindClassShard(v, b.vocab, &shard))
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
  if (!ok) return false;
  *out = b;
  return true;
}

} // namespace llmc::contracts
