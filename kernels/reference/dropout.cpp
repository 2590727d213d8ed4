//===- dropout.cpp - inverted dropout reference ---------------------------===//
//
// The mask is the hash of kernels/DropoutHash.h (a pure function of seed,
// step and element index), so a reference can reproduce it exactly; with a
// global shape the index is the element's index in the whole tensor, which is
// what makes every sharded layout draw the same mask.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

#include "kernels/DropoutHash.h"

namespace llmc::ref {

RefTensor dropout(const RefTensor &x, double rate, int64_t seed, int64_t step,
                  const std::vector<int64_t> &globalShape, const std::vector<int64_t> &offsets) {
  require(rate >= 0.0 && rate < 1.0, "dropout", "rate must be in [0, 1)");
  bool global = !globalShape.empty();
  require(!global || (globalShape.size() == x.shape.size() && offsets.size() == x.shape.size()),
          "dropout", "global_shape and offsets need one entry per dimension");
  RefTensor out = like(x);
  size_t rank = x.shape.size();
  for (int64_t i = 0; i < x.numel(); ++i) {
    // Local multi-index of element i, then its flat index in the global tensor.
    uint64_t index = static_cast<uint64_t>(i);
    if (global) {
      int64_t rest = i, flat = 0, stride = 1;
      for (size_t d = rank; d-- > 0;) {
        int64_t coord = rest % x.shape[d] + offsets[d];
        rest /= x.shape[d];
        flat += coord * stride;
        stride *= globalShape[d];
      }
      index = static_cast<uint64_t>(flat);
    }
    out.data[i] = dropoutKeep(static_cast<uint64_t>(seed), static_cast<uint64_t>(step), index,
                              rate)
                      ? x.data[i] / (1.0 - rate)
                      : 0.0;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.dropout", [](const RefCall &c) -> Results {
  return {dropout(c.in(0), c.real("rate"), c.integer("seed"), c.step, c.array("global_shape"),
                  c.array("offsets"))};
});

} // namespace llmc::ref
