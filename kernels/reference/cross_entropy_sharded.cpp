//===- cross_entropy_sharded.cpp - vocabulary-parallel cross-entropy ------===//
//
// The pieces of cross-entropy over a vocabulary split between ranks
// (Megatron's decomposition; reduce_max, the first piece, is reduce_max.cpp):
// per-row Σ exp(logits − shift) and the target's logit on one shard, then
// the loss from the summed statistics, and the backward of each piece. Run
// on every shard and summed they equal cross_entropy.cpp.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

namespace {
/// The column of `target` in a shard of classes [offset, offset + n), or -1.
int64_t shardColumn(double target, int64_t ignoreIndex, int64_t offset, int64_t n,
                    int64_t numClasses, const char *fn) {
  if (target == static_cast<double>(ignoreIndex)) return -1;
  int64_t column = toId(target, numClasses, fn) - offset;
  return column >= 0 && column < n ? column : -1;
}
} // namespace

std::vector<RefTensor> crossEntropyPartial(const RefTensor &logits, const RefTensor &targets,
                                           const RefTensor &shift, int64_t classOffset,
                                           int64_t numClasses, int64_t ignoreIndex) {
  int64_t n = logits.shape.back(), rows = targets.numel();
  require(shift.numel() == rows && logits.numel() == rows * n, "crossEntropyPartial",
          "logits must be rows x [V], targets and shift rows");
  RefTensor sumexp = like(shift), target = like(shift);
  // Classes past numClasses are padding (a padded vocabulary's last shard).
  int64_t valid = std::max<int64_t>(0, std::min(n, numClasses - classOffset));
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = logits.data.data() + r * n;
    for (int64_t j = 0; j < valid; ++j) sumexp.data[r] += std::exp(row[j] - shift.data[r]);
    int64_t column = shardColumn(targets.data[r], ignoreIndex, classOffset, n, numClasses,
                                 "crossEntropyPartial");
    if (column >= 0) target.data[r] = row[column];
  }
  return {sumexp, target};
}

RefTensor crossEntropyPartialGrad(const RefTensor &logits, const RefTensor &targets,
                                  const RefTensor &shift, const RefTensor &dsumexp,
                                  const RefTensor &dtargetLogit, int64_t classOffset,
                                  int64_t numClasses, int64_t ignoreIndex) {
  int64_t n = logits.shape.back(), rows = targets.numel();
  RefTensor dlogits = like(logits);
  int64_t valid = std::max<int64_t>(0, std::min(n, numClasses - classOffset)); // padding: 0
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < valid; ++j)
      dlogits.data[r * n + j] =
          dsumexp.data[r] * std::exp(logits.data[r * n + j] - shift.data[r]);
    int64_t column = shardColumn(targets.data[r], ignoreIndex, classOffset, n, numClasses,
                                 "crossEntropyPartialGrad");
    if (column >= 0) dlogits.data[r * n + column] += dtargetLogit.data[r];
  }
  return dlogits;
}

RefTensor crossEntropyFinish(const RefTensor &sumexp, const RefTensor &shift,
                             const RefTensor &targetLogit, const RefTensor &targets,
                             int64_t ignoreIndex) {
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = 0; r < targets.numel(); ++r) {
    if (targets.data[r] == static_cast<double>(ignoreIndex)) continue;
    total += std::log(sumexp.data[r]) + shift.data[r] - targetLogit.data[r];
    ++count;
  }
  return RefTensor{{}, {count ? total / count : 0.0}};
}

std::vector<RefTensor> crossEntropyFinishGrad(const RefTensor &sumexp, const RefTensor &targets,
                                              double dloss, int64_t ignoreIndex) {
  int64_t count = 0;
  for (int64_t r = 0; r < targets.numel(); ++r)
    count += targets.data[r] != static_cast<double>(ignoreIndex);
  RefTensor ds = like(sumexp), dshift = like(sumexp), dt = like(sumexp);
  for (int64_t r = 0; r < targets.numel(); ++r) {
    if (targets.data[r] == static_cast<double>(ignoreIndex)) continue;
    double g = dloss / count;
    ds.data[r] = g / sumexp.data[r];
    dshift.data[r] = g;
    dt.data[r] = -g;
  }
  return {ds, dshift, dt};
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.cross_entropy_partial", [](const RefCall &c) -> Results {
  return crossEntropyPartial(c.in(0), c.in(1), c.in(2), c.integer("class_offset"),
                             c.integer("num_classes"), c.integer("ignore_index"));
});
LLMC_REGISTER_EVALUATOR("llm.cross_entropy_partial_grad", [](const RefCall &c) -> Results {
  return {crossEntropyPartialGrad(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4),
                                  c.integer("class_offset"), c.integer("num_classes"),
                                  c.integer("ignore_index"))};
});
LLMC_REGISTER_EVALUATOR("llm.cross_entropy_finish", [](const RefCall &c) -> Results {
  return {crossEntropyFinish(c.in(0), c.in(1), c.in(2), c.in(3), c.integer("ignore_index"))};
});
LLMC_REGISTER_EVALUATOR("llm.cross_entropy_finish_grad", [](const RefCall &c) -> Results {
  return crossEntropyFinishGrad(c.in(0), c.in(1), c.scalar(2), c.integer("ignore_index"));
});

} // namespace llmc::ref
