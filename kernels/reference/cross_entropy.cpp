//===- cross_entropy.cpp - softmax cross-entropy reference ----------------===//
//
// Mean −log softmax(logits)[target] over the rows whose target is not
// ignore_index, each row a stable log-sum-exp, and its gradient
// (softmax − onehot)·dloss/count.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"

namespace llmc::ref {

RefTensor crossEntropy(const RefTensor &logits, const RefTensor &targets, int64_t ignoreIndex) {
  require(!logits.shape.empty() &&
              std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1) == targets.shape,
          "crossEntropy", "targets must be logits.shape minus the last dim");
  int64_t vocab = logits.shape.back(), rows = targets.numel();
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets.data[r] == static_cast<double>(ignoreIndex)) continue;
    int64_t target = toId(targets.data[r], vocab, "crossEntropy");
    const double *row = logits.data.data() + r * vocab;
    double m = *std::max_element(row, row + vocab), sum = 0.0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - m);
    total += m + std::log(sum) - row[target];
    ++count;
  }
  return RefTensor{{}, {count ? total / count : 0.0}};
}

RefTensor crossEntropyGrad(const RefTensor &logits, const RefTensor &targets, double dloss,
                           int64_t ignoreIndex) {
  require(!logits.shape.empty() &&
              std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1) == targets.shape,
          "crossEntropyGrad", "targets must be logits.shape minus the last dim");
  int64_t vocab = logits.shape.back(), rows = targets.numel(), count = 0;
  for (int64_t r = 0; r < rows; ++r) count += targets.data[r] != static_cast<double>(ignoreIndex);
  RefTensor dlogits = like(logits);
  for (int64_t r = 0; r < rows; ++r) {
    if (targets.data[r] == static_cast<double>(ignoreIndex)) continue;
    int64_t target = toId(targets.data[r], vocab, "crossEntropyGrad");
    const double *row = logits.data.data() + r * vocab;
    double m = *std::max_element(row, row + vocab), sum = 0.0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - m);
    for (int64_t j = 0; j < vocab; ++j)
      dlogits.data[r * vocab + j] =
          (std::exp(row[j] - m) / sum - (j == target ? 1.0 : 0.0)) * dloss / count;
  }
  return dlogits;
}

} // namespace llmc::ref
