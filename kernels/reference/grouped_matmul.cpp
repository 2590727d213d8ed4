//===- grouped_matmul.cpp - each group of rows times its own weight -------===//
//
// The experts of a mixture-of-experts layer as one op: row groups given by
// offsets (data), the groups' weights stacked [G, K, F] (or [G, F, K]), in
// float64 through matmul; rows past the last group are zero. The
// quantized forms (grouped_matmul_int, grouped_matmul_nf4) dequantize the
// stack first (matmul_int.cpp's and matmul_nf4.cpp's references): int
// storage expert after expert, each slice as matmul_int stores a weight of
// its shape; NF4 storage flat over the whole stack. The fp8 forms
// (qat.grouped_matmul_fp8 and its weight gradient) scale each group's rows
// and each expert's slice by their scales, then multiply.
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

/// Elements [begin, begin + n) of a flat tensor; empty when `t` is.
RefTensor flatRange(const RefTensor &t, int64_t begin, int64_t n) {
  if (t.data.empty())
    return RefTensor();
  RefTensor part = RefTensor::zeros({n});
  std::copy(t.data.begin() + begin, t.data.begin() + begin + n, part.data.begin());
  return part;
}

/// The stacked weight [G, rows, cols] grouped_matmul_int's storage holds.
RefTensor dequantizeIntStack(const RefCall &c, const std::vector<int64_t> &stack) {
  const RefTensor &codes = c.in(2), &scale = c.in(3);
  const RefTensor *zeroPoint = c.optional(4);
  const int bits = static_cast<int>(c.integer("bits"));
  const int64_t block = c.integer("block", 0), axis = c.integer("channel_axis", -1);
  const int64_t rows = stack[1], cols = stack[2], numel = rows * cols;
  const int64_t bytes = bits == 8 ? numel : (numel + 1) / 2;
  const int64_t groups = block > 0 ? numel / block : axis == 0 ? rows : axis == 1 ? cols : 1;
  RefTensor w = RefTensor::zeros(stack);
  for (int64_t g = 0; g < stack[0]; ++g) {
    RefTensor slice =
        dequantizeInt(flatRange(codes, g * bytes, bytes), flatRange(scale, g * groups, groups),
                      zeroPoint ? flatRange(*zeroPoint, g * groups, groups) : RefTensor(),
                      {rows, cols}, bits, block, axis, c.flag("fp8"));
    std::copy(slice.data.begin(), slice.data.end(), w.data.begin() + g * numel);
  }
  return w;
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

namespace {

/// Scale `i` of a list of one or one per group.
double scaleOf(const std::vector<double> &scales, int64_t i) {
  return scales.size() == 1 ? scales[0] : scales.at(static_cast<size_t>(i));
}

/// x [M, C] with group g's rows multiplied by scales[g].
RefTensor scaleRows(RefTensor x, const RefTensor &offsets, const std::vector<double> &scales) {
  const int64_t m = x.shape[0], c = x.shape[1];
  for (size_t g = 0; g + 1 < offsets.data.size(); ++g) {
    auto [begin, end] = groupRows(offsets, g, m, "groupedMatmulFp8");
    for (int64_t i = begin * c; i < end * c; ++i) x.data[i] *= scaleOf(scales, g);
  }
  return x;
}

/// The stacked [G, a, b] with slice g multiplied by scales[g].
RefTensor scaleSlices(RefTensor w, const std::vector<double> &scales) {
  const int64_t size = w.shape[1] * w.shape[2];
  for (int64_t i = 0; i < w.numel(); ++i) w.data[i] *= scaleOf(scales, i / size);
  return w;
}

/// The values of scale operand `i` of a call.
std::vector<double> scalesOf(const RefCall &c, size_t i) { return c.in(i).data; }

} // namespace

RefTensor groupedMatmulFp8(const RefTensor &x, const std::vector<double> &xScales,
                           const RefTensor &offsets, const RefTensor &weights,
                           const std::vector<double> &wScales, bool transposeB) {
  return groupedMatmul(scaleRows(x, offsets, xScales), offsets, scaleSlices(weights, wScales),
                       transposeB);
}

RefTensor groupedMatmulWeightGradFp8(const RefTensor &x, const std::vector<double> &xScales,
                                     const RefTensor &dy, const std::vector<double> &dyScales,
                                     const RefTensor &offsets, bool transposeB) {
  return groupedMatmulWeightGrad(scaleRows(x, offsets, xScales), scaleRows(dy, offsets, dyScales),
                                 offsets, transposeB);
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//

LLMC_REGISTER_EVALUATOR("llm.grouped_matmul", [](const RefCall &c) -> Results {
  return {groupedMatmul(c.in(0), c.in(1), c.in(2), c.flag("transpose_b"))};
});
LLMC_REGISTER_EVALUATOR("llm.grouped_matmul_int", [](const RefCall &c) -> Results {
  const std::vector<int64_t> stack = c.array("weight_shape");
  require(stack.size() == 3, "grouped_matmul_int", "weight_shape must be [G, rows, cols]");
  return {groupedMatmul(c.in(0), c.in(1), dequantizeIntStack(c, stack), c.flag("transpose_b"))};
});
LLMC_REGISTER_EVALUATOR("llm.grouped_matmul_nf4", [](const RefCall &c) -> Results {
  const std::vector<int64_t> stack = c.array("weight_shape");
  require(stack.size() == 3, "grouped_matmul_nf4", "weight_shape must be [G, rows, cols]");
  RefTensor w = dequantizeNf4(c.in(2), c.in(3), c.in(4), c.scalar(5),
                              {stack[0] * stack[1] * stack[2]}, c.integer("block"),
                              static_cast<quant::AbsmaxFormat>(c.integer("absmax_format", 0)));
  w.shape = stack;
  return {groupedMatmul(c.in(0), c.in(1), w, c.flag("transpose_b"))};
});
LLMC_REGISTER_EVALUATOR("llm.grouped_matmul_weight_grad", [](const RefCall &c) -> Results {
  return {groupedMatmulWeightGrad(c.in(0), c.in(1), c.in(2), c.flag("transpose_b"))};
});

// The fp8 forms: codes held as their values (qat.quantize_fp8's evaluator).
LLMC_REGISTER_EVALUATOR("qat.grouped_matmul_fp8", [](const RefCall &c) -> Results {
  return {groupedMatmulFp8(c.in(0), scalesOf(c, 1), c.in(2), c.in(3), scalesOf(c, 4),
                           c.flag("transpose_b"))};
});
LLMC_REGISTER_EVALUATOR("qat.grouped_matmul_weight_grad_fp8", [](const RefCall &c) -> Results {
  return {groupedMatmulWeightGradFp8(c.in(0), scalesOf(c, 1), c.in(2), scalesOf(c, 3), c.in(4),
                                     c.flag("transpose_b"))};
});

} // namespace llmc::ref
