//===- cross_entropy.cpp - softmax cross-entropy reference ----------------===//
//
// Mean −log softmax(logits)[target] over the rows whose target is not
// ignore_index, each row a stable log-sum-exp, and its gradient
// (softmax − onehot)·dloss/count. With num_classes the columns past it
// (a padded vocabulary) are no classes: left out of the max and the sum,
// gradient 0.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

namespace {

/// The classes of logits [..., width]: numClasses, or every column.
int64_t classesOf(const char *op, const RefTensor &logits, int64_t numClasses) {
  int64_t width = logits.shape.back();
  require(numClasses >= 0 && numClasses <= width, op, "num_classes must be in [0, width]");
  return numClasses ? numClasses : width;
}

} // namespace

RefTensor crossEntropy(const RefTensor &logits, const RefTensor &targets, int64_t ignoreIndex,
                       int64_t numClasses) {
  require(!logits.shape.empty() &&
              std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1) == targets.shape,
          "crossEntropy", "targets must be logits.shape minus the last dim");
  int64_t width = logits.shape.back(), rows = targets.numel();
  int64_t vocab = classesOf("crossEntropy", logits, numClasses);
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets.data[r] == static_cast<double>(ignoreIndex)) continue;
    int64_t target = toId(targets.data[r], vocab, "crossEntropy");
    const double *row = logits.data.data() + r * width;
    double m = *std::max_element(row, row + vocab), sum = 0.0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - m);
    total += m + std::log(sum) - row[target];
    ++count;
  }
  return RefTensor{{}, {count ? total / count : 0.0}};
}

RefTensor crossEntropyGrad(const RefTensor &logits, const RefTensor &targets, double dloss,
                           int64_t ignoreIndex, int64_t numClasses) {
  require(!logits.shape.empty() &&
              std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1) == targets.shape,
          "crossEntropyGrad", "targets must be logits.shape minus the last dim");
  int64_t width = logits.shape.back(), rows = targets.numel(), count = 0;
  int64_t vocab = classesOf("crossEntropyGrad", logits, numClasses);
  for (int64_t r = 0; r < rows; ++r) count += targets.data[r] != static_cast<double>(ignoreIndex);
  RefTensor dlogits = like(logits); // zeros: ignored rows and padding columns
  for (int64_t r = 0; r < rows; ++r) {
    if (targets.data[r] == static_cast<double>(ignoreIndex)) continue;
    int64_t target = toId(targets.data[r], vocab, "crossEntropyGrad");
    const double *row = logits.data.data() + r * width;
    double m = *std::max_element(row, row + vocab), sum = 0.0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - m);
    for (int64_t j = 0; j < vocab; ++j)
      dlogits.data[r * width + j] =
          (std::exp(row[j] - m) / sum - (j == target ? 1.0 : 0.0)) * dloss / count;
  }
  return dlogits;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
// The op's defaults: ignore_index -1, every column a class (num_classes 0).
LLMC_REGISTER_EVALUATOR("llm.cross_entropy", [](const RefCall &c) -> Results {
  return {crossEntropy(c.in(0), c.in(1), c.integer("ignore_index"), c.integer("num_classes"))};
});
LLMC_REGISTER_EVALUATOR("llm.cross_entropy_grad", [](const RefCall &c) -> Results {
  return {crossEntropyGrad(c.in(0), c.in(1), c.scalar(2), c.integer("ignore_index"),
                           c.integer("num_classes"))};
});

} // namespace llmc::ref
