//===- linear_cross_entropy.cpp - the fused head + loss, unfused ----------===//
//
// What the fused kernels must equal: the head's matmul, cross_entropy and,
// for training, cross_entropy_grad and the two matmuls of its backward,
// each by its own reference, over h flattened to [rows, D]; for a
// vocabulary shard, reduce_max and cross_entropy_partial, and
// cross_entropy_partial_grad with the two matmuls.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

namespace {

/// h as [rows, D], targets as [rows] and the head's logits [rows, V].
struct Head {
  RefTensor rows, targets, logits;
};

Head head(const char *op, const RefTensor &h, const RefTensor &w, const RefTensor &targets,
          bool transposeB) {
  require(h.shape.size() >= 2 && w.shape.size() == 2, op, "h must be [..., D] and w a matrix");
  Head out{h, targets, {}};
  out.rows.shape = {h.numel() / h.shape.back(), h.shape.back()};
  out.targets.shape = {out.rows.shape[0]};
  out.logits = matmul(out.rows, w, false, transposeB);
  return out;
}

/// {dh, dw} from the logits' gradient g [rows, V].
std::vector<RefTensor> backward(const Head &x, const RefTensor &h, const RefTensor &w,
                                const RefTensor &g, bool transposeB) {
  RefTensor dh = matmul(g, w, false, !transposeB);
  dh.shape = h.shape;
  return {dh, transposeB ? matmul(g, x.rows, true, false) : matmul(x.rows, g, true, false)};
}

/// A per-row statistic with the rows shaped as `like`'s.
RefTensor perRow(RefTensor stat, const RefTensor &like) {
  stat.shape = like.shape;
  return stat;
}

} // namespace

std::vector<RefTensor> linearCrossEntropy(const RefTensor &h, const RefTensor &w,
                                          const RefTensor &targets, bool transposeB,
                                          int64_t ignoreIndex, const double *dloss,
                                          int64_t numClasses) {
  Head x = head("linear_cross_entropy", h, w, targets, transposeB);
  std::vector<RefTensor> out{crossEntropy(x.logits, x.targets, ignoreIndex, numClasses)};
  if (!dloss)
    return out;
  RefTensor g = crossEntropyGrad(x.logits, x.targets, *dloss, ignoreIndex, numClasses);
  for (RefTensor &grad : backward(x, h, w, g, transposeB))
    out.push_back(std::move(grad));
  return out;
}

std::vector<RefTensor> linearCrossEntropyPartial(const RefTensor &h, const RefTensor &w,
                                                 const RefTensor &targets, bool transposeB,
                                                 int64_t classOffset, int64_t numClasses,
                                                 int64_t ignoreIndex) {
  Head x = head("linear_cross_entropy_partial", h, w, targets, transposeB);
  RefTensor max = reduceMax(x.logits, classOffset, numClasses);
  std::vector<RefTensor> stats =
      crossEntropyPartial(x.logits, x.targets, max, classOffset, numClasses, ignoreIndex);
  return {perRow(max, targets), perRow(stats[0], targets), perRow(stats[1], targets)};
}

std::vector<RefTensor> linearCrossEntropyPartialGrad(
    const RefTensor &h, const RefTensor &w, const RefTensor &targets, const RefTensor &shift,
    const RefTensor &dsumexp, const RefTensor &dtargetLogit, bool transposeB,
    int64_t classOffset, int64_t numClasses, int64_t ignoreIndex) {
  Head x = head("linear_cross_entropy_partial_grad", h, w, targets, transposeB);
  RefTensor g = crossEntropyPartialGrad(
      x.logits, x.targets, perRow(shift, x.targets), perRow(dsumexp, x.targets),
      perRow(dtargetLogit, x.targets), classOffset, numClasses, ignoreIndex);
  return backward(x, h, w, g, transposeB);
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
// The last result of each is the kernels' scratch, zeros here.
LLMC_REGISTER_EVALUATOR("llm.linear_cross_entropy", [](const RefCall &c) -> Results {
  Results results =
      linearCrossEntropy(c.in(0), c.in(1), c.in(2), c.flag("transpose_b"),
                         c.integer("ignore_index"), nullptr, c.integer("num_classes"));
  return {results[0], c.zeroResult(1)};
});
LLMC_REGISTER_EVALUATOR("llm.linear_cross_entropy_train", [](const RefCall &c) -> Results {
  double dloss = c.scalar(3);
  Results results = linearCrossEntropy(c.in(0), c.in(1), c.in(2), c.flag("transpose_b"),
                                       c.integer("ignore_index"), &dloss, c.integer("num_classes"));
  if (c.flag("frozen_weight"))
    results.pop_back(); // no dw
  results.push_back(c.zeroResult(c.resultShapes.size() - 1));
  return results;
});
LLMC_REGISTER_EVALUATOR("llm.linear_cross_entropy_partial", [](const RefCall &c) -> Results {
  Results results = linearCrossEntropyPartial(c.in(0), c.in(1), c.in(2), c.flag("transpose_b"),
                                              c.integer("class_offset"), c.integer("num_classes"),
                                              c.integer("ignore_index"));
  results.push_back(c.zeroResult(3));
  return results;
});
LLMC_REGISTER_EVALUATOR("llm.linear_cross_entropy_partial_grad", [](const RefCall &c) -> Results {
  Results results = linearCrossEntropyPartialGrad(
      c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), c.in(5), c.flag("transpose_b"),
      c.integer("class_offset"), c.integer("num_classes"), c.integer("ignore_index"));
  if (c.flag("frozen_weight"))
    results.pop_back(); // no dw
  results.push_back(c.zeroResult(c.resultShapes.size() - 1));
  return results;
});

} // namespace llmc::ref
