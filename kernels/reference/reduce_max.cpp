//===- reduce_max.cpp - maximum over the last dimension reference ---------===//
//
// The first piece of vocabulary-parallel cross-entropy
// (cross_entropy_sharded.cpp): each row's maximum, the shift that keeps the
// shards' exponentials finite.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

#include <algorithm>
#include <limits>

namespace llmc::ref {

RefTensor reduceMax(const RefTensor &x, int64_t classOffset, int64_t numClasses) {
  require(!x.shape.empty() && x.shape.back() > 0, "reduceMax", "x must have a last dimension");
  int64_t n = x.shape.back(), rows = x.numel() / n;
  // The classes past numClasses (when given) are a padded vocabulary's tail.
  int64_t valid = numClasses == 0 ? n : std::max<int64_t>(0, std::min(n, numClasses - classOffset));
  RefTensor out = RefTensor::zeros(std::vector<int64_t>(x.shape.begin(), x.shape.end() - 1));
  for (int64_t r = 0; r < rows; ++r)
    out.data[r] = valid == 0 ? -std::numeric_limits<double>::infinity()
                             : *std::max_element(x.data.begin() + r * n,
                                                 x.data.begin() + r * n + valid);
  return out;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.reduce_max", [](const RefCall &c) -> Results {
  return {reduceMax(c.in(0), c.integer("class_offset"), c.integer("num_classes"))};
});

} // namespace llmc::ref
