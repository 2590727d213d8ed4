//===- row_groups.cpp - ranges of a mixture of experts' row groups --------===//
//
// qat.group_ranges and qat.row_ranges as their definitions say: a group's
// range is the elementwise max of its rows' [−min, max] pairs ([0, 0] when
// it has no rows), and each row takes its group's back ([0, 0] past the
// last group).
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

#include <algorithm>

namespace llmc::ref {

RefTensor groupRanges(const RefTensor &rows, const RefTensor &offsets) {
  const int64_t groups = static_cast<int64_t>(offsets.data.size()) - 1;
  RefTensor out = RefTensor::zeros({groups, 2});
  for (int64_t g = 0; g < groups; ++g) {
    auto [begin, end] = groupRows(offsets, g, rows.shape[0], "groupRanges");
    for (int64_t r = begin; r < end; ++r)
      for (int j = 0; j < 2; ++j)
        out.data[2 * g + j] =
            r == begin ? rows.data[2 * r + j] : std::max(out.data[2 * g + j], rows.data[2 * r + j]);
  }
  return out;
}

RefTensor rowRanges(const RefTensor &groups, const RefTensor &offsets, int64_t rows) {
  RefTensor out = RefTensor::zeros({rows, 2});
  for (int64_t g = 0; g + 1 < static_cast<int64_t>(offsets.data.size()); ++g) {
    auto [begin, end] = groupRows(offsets, g, rows, "rowRanges");
    for (int64_t r = begin; r < end; ++r)
      for (int j = 0; j < 2; ++j) out.data[2 * r + j] = groups.data[2 * g + j];
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//

LLMC_REGISTER_EVALUATOR("qat.group_ranges", [](const RefCall &c) -> Results {
  return {groupRanges(c.in(0), c.in(1))};
});
LLMC_REGISTER_EVALUATOR("qat.row_ranges", [](const RefCall &c) -> Results {
  return {rowRanges(c.in(0), c.in(1), c.resultShapes.at(0).at(0))};
});

} // namespace llmc::ref
