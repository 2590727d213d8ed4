//===- shape.cpp - transpose, slice, pad, concat, reduce_sum references ---===//
//
// Data movement by multi-index, one element at a time (the kernels merge
// dims into strided boxes and copy rows), and reduce_sum, the backward of a
// trailing broadcast.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

RefTensor transpose(const RefTensor &x, const std::vector<int64_t> &permutation) {
  size_t rank = x.shape.size();
  require(permutation.size() == rank, "transpose", "permutation length must equal rank");
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t p = permutation[i];
    require(p >= 0 && p < static_cast<int64_t>(rank) && !seen[p], "transpose", "not a permutation");
    seen[p] = true;
    shape[i] = x.shape[p];
  }
  std::vector<int64_t> xStrides = stridesOf(x.shape);
  RefTensor out = RefTensor::zeros(shape);
  int64_t flat = 0;
  forEachIndex(shape, [&](const std::vector<int64_t> &index) {
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += index[i] * xStrides[permutation[i]];
    out.data[flat++] = x.data[src];
  });
  return out;
}

RefTensor slice(const RefTensor &x, const std::vector<int64_t> &offsets,
                const std::vector<int64_t> &sizes) {
  size_t rank = x.shape.size();
  require(offsets.size() == rank && sizes.size() == rank, "slice", "offsets/sizes must match rank");
  for (size_t i = 0; i < rank; ++i)
    require(offsets[i] >= 0 && sizes[i] >= 0 && offsets[i] + sizes[i] <= x.shape[i], "slice",
            "box is outside x");
  std::vector<int64_t> xStrides = stridesOf(x.shape);
  RefTensor out = RefTensor::zeros(sizes);
  int64_t flat = 0;
  forEachIndex(sizes, [&](const std::vector<int64_t> &index) {
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += (offsets[i] + index[i]) * xStrides[i];
    out.data[flat++] = x.data[src];
  });
  return out;
}

RefTensor pad(const RefTensor &x, const std::vector<int64_t> &offsets,
              const std::vector<int64_t> &shape) {
  size_t rank = x.shape.size();
  require(offsets.size() == rank && shape.size() == rank, "pad", "offsets/shape must match rank");
  for (size_t i = 0; i < rank; ++i)
    require(offsets[i] >= 0 && offsets[i] + x.shape[i] <= shape[i], "pad", "x does not fit");
  std::vector<int64_t> outStrides = stridesOf(shape);
  RefTensor out = RefTensor::zeros(shape);
  int64_t flat = 0;
  forEachIndex(x.shape, [&](const std::vector<int64_t> &index) {
    int64_t dst = 0;
    for (size_t i = 0; i < rank; ++i) dst += (offsets[i] + index[i]) * outStrides[i];
    out.data[dst] = x.data[flat++];
  });
  return out;
}

RefTensor concat(const std::vector<RefTensor> &xs, int64_t dim) {
  require(!xs.empty(), "concat", "needs at least one input");
  int64_t rank = static_cast<int64_t>(xs[0].shape.size());
  if (dim < 0) dim += rank;
  require(dim >= 0 && dim < rank, "concat", "dim out of range");
  std::vector<int64_t> shape = xs[0].shape;
  shape[dim] = 0;
  for (const RefTensor &x : xs) {
    require(static_cast<int64_t>(x.shape.size()) == rank, "concat", "ranks differ");
    for (int64_t i = 0; i < rank; ++i)
      require(i == dim || x.shape[i] == xs[0].shape[i], "concat", "non-joined dims differ");
    shape[dim] += x.shape[dim];
  }
  RefTensor out = RefTensor::zeros(shape);
  int64_t outer = product(shape, 0, dim), outInner = product(shape, dim, rank);
  int64_t at = 0; // offset of the current input inside an output row
  for (const RefTensor &x : xs) {
    int64_t inner = product(x.shape, dim, rank);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) out.data[o * outInner + at + i] = x.data[o * inner + i];
    at += inner;
  }
  return out;
}

RefTensor reduceSum(const RefTensor &x, const std::vector<int64_t> &shape) {
  require(isSuffix(shape, x.shape), "reduceSum", "shape must be a suffix of x's shape");
  RefTensor out = RefTensor::zeros(shape);
  int64_t inner = out.numel();
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i % inner] += x.data[i];
  return out;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.transpose", [](const RefCall &c) -> Results {
  return {transpose(c.in(0), c.array("permutation"))};
});
LLMC_REGISTER_EVALUATOR("llm.slice", [](const RefCall &c) -> Results {
  return {slice(c.in(0), c.array("offsets"), c.zeroResult(0).shape)};
});
LLMC_REGISTER_EVALUATOR("llm.pad", [](const RefCall &c) -> Results {
  return {pad(c.in(0), c.array("offsets"), c.zeroResult(0).shape)};
});
LLMC_REGISTER_EVALUATOR("llm.concat", [](const RefCall &c) -> Results {
  return {concat(c.variadic(0), c.integer("dim"))};
});
LLMC_REGISTER_EVALUATOR("llm.reduce_sum", [](const RefCall &c) -> Results {
  return {reduceSum(c.in(0), c.zeroResult(0).shape)};
});
// Ops whose reference is a copy (in double a cast is exact) or a constant.
LLMC_REGISTER_EVALUATOR("llm.reshape", [](const RefCall &c) -> Results {
  RefTensor t = c.in(0);
  t.shape = c.zeroResult(0).shape;
  return {t};
});
LLMC_REGISTER_EVALUATOR("llm.cast", [](const RefCall &c) -> Results { return {c.in(0)}; });
LLMC_REGISTER_EVALUATOR("llm.stop_gradient", [](const RefCall &c) -> Results { return {c.in(0)}; });
// Activation offloading's copies between memories: the same values.
LLMC_REGISTER_EVALUATOR("llm.copy_to_host", [](const RefCall &c) -> Results { return {c.in(0)}; });
LLMC_REGISTER_EVALUATOR("llm.copy_to_device",
                        [](const RefCall &c) -> Results { return {c.in(0)}; });
LLMC_REGISTER_EVALUATOR("llm.fill", [](const RefCall &c) -> Results {
  RefTensor t = c.zeroResult(0);
  std::fill(t.data.begin(), t.data.end(), c.real("value"));
  return {t};
});

} // namespace llmc::ref
