//===- grouped_matmul.cpp - each group of rows times its own weight -------===//
//
// The experts of a mixture-of-experts layer as one op: row groups given by
// offsets (data), the groups' weights stacked [G, K, F] (or [G, F, K]), in
// float64 through matmul; rows past the last group are zero.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

#include <algorithm>

namespace llmc::ref {

namespace {

/// Rows [begin, end) of a [M, C] tensor.
RefTensor rowsOf(const RefTensor &x, int64_t begin, int64_t end) {
  const int64_t c = x.shape[1];
  RefTensor part = RefTensor::zeros({end - begin, c});
  std::copy(x.data.begin() + begin * c, x.data.begin() + end * c, part.data.begin());
  return part;
}

/// Slice g of a stacked [G, a, b] tensor, as [a, b].
RefTensor sliceOf(const RefTensor &stacked, int64_t g) {
  const int64_t a = stacked.shape[1], b = stacked.shape[2];
  RefTensor part = RefTensor::zeros({a, b});
  std::copy(stacked.data.begin() + g * a * b, stacked.data.begin() + (g + 1) * a * b,
            part.data.begin());
  return part;
}

/// Group g's rows [begin, end) from offsets [G + 1], checked (each offset
/// within the rows, offsets[0] = 0, never decreasing).
std::pair<int64_t, int64_t> groupRows(const RefTensor &offsets, size_t g, int64_t rows,
                                      const char *fn) {
  int64_t begin = toId(offsets.data[g], rows + 1, fn),
          end = toId(offsets.data[g + 1], rows + 1, fn);
  require(begin <= end, fn, "offsets must not decrease");
  require(g != 0 || begin == 0, fn, "offsets[0] must be 0");
  return {begin, end};
}

} // namespace

RefTensor groupedMatmul(const RefTensor &x, const RefTensor &offsets, const RefTensor &weights,
                        bool transposeB) {
  const int64_t m = x.shape[0];
  const int64_t f = transposeB ? weights.shape.at(1) : weights.shape.at(2);
  RefTensor y = RefTensor::zeros({m, f});
  for (int64_t g = 0; g < weights.shape[0]; ++g) {
    auto [begin, end] = groupRows(offsets, g, m, "groupedMatmul");
    if (begin == end)
      continue;
    RefTensor part = matmul(rowsOf(x, begin, end), sliceOf(weights, g), false, transposeB);
    std::copy(part.data.begin(), part.data.end(), y.data.begin() + begin * f);
  }
  return y;
}

RefTensor groupedMatmulWeightGrad(const RefTensor &x, const RefTensor &dy, const RefTensor &offsets,
                                  bool transposeB) {
  const int64_t m = x.shape[0], k = x.shape[1], f = dy.shape[1];
  const int64_t groups = static_cast<int64_t>(offsets.data.size()) - 1, size = k * f;
  RefTensor grads = RefTensor::zeros(transposeB ? std::vector<int64_t>{groups, f, k}
                                                : std::vector<int64_t>{groups, k, f});
  for (int64_t g = 0; g < groups; ++g) {
    auto [begin, end] = groupRows(offsets, g, m, "groupedMatmulWeightGrad");
    if (begin == end)
      continue;
    RefTensor xs = rowsOf(x, begin, end), dys = rowsOf(dy, begin, end);
    RefTensor dw = transposeB ? matmul(dys, xs, true, false) : matmul(xs, dys, true, false);
    std::copy(dw.data.begin(), dw.data.end(), grads.data.begin() + g * size);
  }
  return grads;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//

LLMC_REGISTER_EVALUATOR("llm.grouped_matmul", [](const RefCall &c) -> Results {
  return {groupedMatmul(c.in(0), c.in(1), c.in(2), c.flag("transpose_b"))};
});
LLMC_REGISTER_EVALUATOR("llm.grouped_matmul_weight_grad", [](const RefCall &c) -> Results {
  return {groupedMatmulWeightGrad(c.in(0), c.in(1), c.in(2), c.flag("transpose_b"))};
});

} // namespace llmc::ref
