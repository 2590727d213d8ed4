//===- Common.h - helpers shared by the references (private) ----*- C++ -*-===//
//
// What the reference sources share and their callers never see: the abort
// on a broken contract (the compiler that links the references is built
// without exceptions), shape arithmetic, a row-major multi-index walk, and
// reading an id held in a double.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_REFERENCE_COMMON_H
#define LLMC_KERNELS_REFERENCE_COMMON_H

#include "kernels/reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace llmc::ref {

/// The references run inside the compiler, which is built without
/// exceptions: a call that breaks its contract is a bug in the caller.
[[noreturn]] inline void fail(const char *fn, const std::string &why) {
  std::fprintf(stderr, "llmc::ref::%s: %s\n", fn, why.c_str());
  std::abort();
}

inline void require(bool ok, const char *fn, const char *why) {
  if (!ok) fail(fn, why);
}

inline int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

inline int64_t product(const std::vector<int64_t> &shape) {
  return product(shape, 0, shape.size());
}

inline RefTensor like(const RefTensor &x) { return RefTensor::zeros(x.shape); }

inline bool isSuffix(const std::vector<int64_t> &suffix, const std::vector<int64_t> &shape) {
  if (suffix.size() > shape.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), shape.end() - suffix.size());
}

/// Row-major strides of `shape`.
inline std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Calls fn(index) for every multi-index of `shape`, in row-major order.
template <typename Fn> void forEachIndex(const std::vector<int64_t> &shape, Fn fn) {
  if (product(shape) == 0) return;
  std::vector<int64_t> index(shape.size(), 0);
  while (true) {
    fn(index);
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

/// An id held in a double: must be integral and in [0, bound).
inline int64_t toId(double value, int64_t bound, const char *fn) {
  int64_t id = static_cast<int64_t>(value);
  if (static_cast<double>(id) != value || id < 0 || id >= bound)
    fail(fn, "id " + std::to_string(value) + " is outside [0, " + std::to_string(bound) + ")");
  return id;
}

/// Group g's rows [begin, end) of `rows` rows from offsets [G + 1] (a
/// mixture of experts' row groups), checked: each offset within the rows,
/// offsets[0] = 0, never decreasing.
inline std::pair<int64_t, int64_t> groupRows(const RefTensor &offsets, size_t g, int64_t rows,
                                             const char *fn) {
  int64_t begin = toId(offsets.data[g], rows + 1, fn),
          end = toId(offsets.data[g + 1], rows + 1, fn);
  require(begin <= end, fn, "offsets must not decrease");
  require(g != 0 || begin == 0, fn, "offsets[0] must be 0");
  return {begin, end};
}

/// x [..., K] times a 2-D weight w ([K, N], or [N, K] with transposeB):
/// [..., N]. The product of the quantized matmuls once their weight is
/// expanded.
inline RefTensor productWithWeight(const RefTensor &x, const RefTensor &w, bool transposeB) {
  int64_t k = x.shape.back();
  RefTensor rows = x;
  rows.shape = {x.numel() / k, k};
  RefTensor y = matmul(rows, w, false, transposeB);
  y.shape = x.shape;
  y.shape.back() = transposeB ? w.shape[0] : w.shape[1];
  return y;
}

} // namespace llmc::ref

#endif
