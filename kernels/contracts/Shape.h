//===- Shape.h - binding contract of the data-movement kernels -*- C++ -*-===//
//
// The checks and derived numbers of transpose, slice, pad, concat and
// reduce_sum, shared by the CPU factories (kernels/cpu/shape.cpp) and the
// CUDA ones (kernels/cuda/shape.cu). transpose, slice and pad each come down
// to one strided box copy from x into out, described here in elements; each
// backend then lays the box out its own way (merged dims, widened elements).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_SHAPE_H
#define LLMC_KERNELS_CONTRACTS_SHAPE_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

/// A box of `sizes` elements of x, read at `srcStrides` from element
/// `srcBase` of x and written at `dstStrides` from element `dstBase` of out
/// (strides in elements, one per dim of the box).
struct BoxCopyBinding {
  DType dtype = DType::F32; ///< x's and out's
  std::vector<int64_t> sizes, srcStrides, dstStrides;
  int64_t srcBase = 0, dstBase = 0;
};

/// transpose(x) -> out, attribute `permutation`.
inline bool bindTranspose(const KernelArgs &args, std::string &error, BoxCopyBinding *out);
/// slice(x) -> out, attribute `offsets` (of out within x).
inline bool bindSlice(const KernelArgs &args, std::string &error, BoxCopyBinding *out);
/// pad(x) -> out, attribute `offsets` (of x within out); out is zero elsewhere.
inline bool bindPad(const KernelArgs &args, std::string &error, BoxCopyBinding *out);

/// concat(inputs...) -> out, attribute `dim`.
struct ConcatBinding {
  DType dtype = DType::F32;
  int64_t dim = 0; ///< in [0, rank)
};
inline bool bindConcat(const KernelArgs &args, std::string &error, ConcatBinding *out);

/// reduce_sum(x) -> out, out's shape a suffix of x's.
struct ReduceSumBinding {
  DType dtype = DType::F32;
};
inline bool bindReduceSum(const KernelArgs &args, std::string &error, ReduceSumBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace shape_impl {

inline std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

inline bool sameDTypeAsX(Validator &v) {
  if (v.out(0).dtype != v.in(0).dtype)
    return v.fail("out must have x's dtype " + std::string(dtypeName(v.in(0).dtype)) + ", got " +
                  v.out(0).describe());
  return true;
}

} // namespace shape_impl
using namespace shape_impl;

inline bool bindTranspose(const KernelArgs &args, std::string &error, BoxCopyBinding *out) {
  Validator v("transpose", args, error);
  std::vector<int64_t> perm;
  if (!v.arity(1, 1) || !v.intsAttr("permutation", &perm) || !sameDTypeAsX(v))
    return false;
  const TensorView &x = v.in(0);
  size_t rank = x.shape.size();
  std::vector<bool> seen(rank, false);
  bool valid = perm.size() == rank;
  for (size_t i = 0; valid && i < rank; ++i) {
    valid = perm[i] >= 0 && perm[i] < static_cast<int64_t>(rank) && !seen[perm[i]];
    if (valid)
      seen[perm[i]] = true;
  }
  if (!valid) {
    std::string text;
    for (int64_t p : perm) text += (text.empty() ? "" : ", ") + std::to_string(p);
    return v.fail("attribute 'permutation' [" + text + "] is not a permutation of rank " +
                  std::to_string(rank));
  }
  std::vector<int64_t> shape(rank), srcStrides(rank);
  std::vector<int64_t> xStrides = rowMajorStrides(x.shape);
  for (size_t i = 0; i < rank; ++i) {
    shape[i] = x.shape[perm[i]];
    srcStrides[i] = xStrides[perm[i]];
  }
  if (!v.hasType(v.out(0), "out", x.dtype, shape))
    return false;
  out->dtype = x.dtype;
  out->dstStrides = rowMajorStrides(shape);
  out->sizes = std::move(shape);
  out->srcStrides = std::move(srcStrides);
  out->srcBase = out->dstBase = 0;
  return true;
}

namespace shape_impl {

/// slice (the box of x at offsets, out's shape) and pad (x placed at
/// offsets in out): one box of one tensor inside the other.
inline bool bindBox(const char *kernel, bool pad, const KernelArgs &args, std::string &error,
                    BoxCopyBinding *out) {
  Validator v(kernel, args, error);
  std::vector<int64_t> offsets;
  if (!v.arity(1, 1) || !v.intsAttr("offsets", &offsets) || !sameDTypeAsX(v))
    return false;
  const TensorView &x = v.in(0), &y = v.out(0);
  if (y.rank() != x.rank() || offsets.size() != x.shape.size())
    return v.fail("x " + x.describe() + ", out " + y.describe() + " and " +
                  std::to_string(offsets.size()) + " offsets must have one rank");
  const TensorView &box = pad ? x : y, &whole = pad ? y : x;
  for (int i = 0; i < x.rank(); ++i)
    if (offsets[i] < 0 || offsets[i] + box.shape[i] > whole.shape[i])
      return v.fail(pad ? "x " + x.describe() + " at offset " + std::to_string(offsets[i]) +
                              " in dim " + std::to_string(i) + " does not fit in out " +
                              y.describe()
                        : "out " + y.describe() + " at offset " + std::to_string(offsets[i]) +
                              " in dim " + std::to_string(i) + " lies outside x " + x.describe());
  out->dtype = x.dtype;
  out->sizes = box.shape;
  out->srcStrides = rowMajorStrides(x.shape);
  out->dstStrides = rowMajorStrides(y.shape);
  out->srcBase = out->dstBase = 0;
  const std::vector<int64_t> &wholeStrides = pad ? out->dstStrides : out->srcStrides;
  int64_t &base = pad ? out->dstBase : out->srcBase;
  for (int i = 0; i < x.rank(); ++i) base += offsets[i] * wholeStrides[i];
  return true;
}

} // namespace shape_impl

inline bool bindSlice(const KernelArgs &args, std::string &error, BoxCopyBinding *out) {
  return bindBox("slice", false, args, error, out);
}

inline bool bindPad(const KernelArgs &args, std::string &error, BoxCopyBinding *out) {
  return bindBox("pad", true, args, error, out);
}

inline bool bindConcat(const KernelArgs &args, std::string &error, ConcatBinding *out) {
  Validator v("concat", args, error);
  int64_t dim;
  if (!v.arity(1, SIZE_MAX, 1))
    return false;
  if (!args.attrs.hasInt("dim"))
    return v.fail("missing int attribute 'dim'");
  if (!v.intAttr("dim", &dim, 0))
    return false;
  const TensorView &first = v.in(0);
  int64_t rank = first.rank();
  if (dim < -rank || dim >= rank)
    return v.fail("attribute 'dim' = " + std::to_string(dim) + " is out of range for rank " +
                  std::to_string(rank));
  if (dim < 0)
    dim += rank;
  std::vector<int64_t> shape = first.shape;
  shape[dim] = 0;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const TensorView &x = v.in(i);
    std::string what = "input " + std::to_string(i);
    bool matches = x.dtype == first.dtype && x.rank() == rank;
    for (int64_t d = 0; matches && d < rank; ++d)
      matches = d == dim || x.shape[d] == first.shape[d];
    if (!matches)
      return v.fail(what + " " + x.describe() + " does not match input 0 " + first.describe() +
                    " outside dim " + std::to_string(dim));
    shape[dim] += x.shape[dim];
  }
  if (!v.hasType(v.out(0), "out", first.dtype, shape))
    return false;
  out->dtype = first.dtype;
  out->dim = dim;
  return true;
}

inline bool bindReduceSum(const KernelArgs &args, std::string &error, ReduceSumBinding *out) {
  Validator v("reduce_sum", args, error);
  if (!v.arity(1, 1))
    return false;
  const TensorView &x = v.in(0), &y = v.out(0);
  if (!v.isFloat(x, "x") || !v.hasDType(y, "out", x.dtype))
    return false;
  if (y.rank() > x.rank() || !std::equal(y.shape.begin(), y.shape.end(), x.shape.end() - y.rank()))
    return v.fail("out shape must be a suffix of x's shape: x " + x.describe() + ", out " +
                  y.describe());
  out->dtype = x.dtype;
  return true;
}

} // namespace llmc::contracts

#endif
