//===- Binary.h - binding contract of add, mul and scale --------*- C++ -*-===//
//
// The checks and derived numbers of add, mul (rhs broadcast over lhs) and
// scale, shared by the CPU factories (kernels/cpu/binary.cpp) and the CUDA
// ones (kernels/cuda/binary.cu).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_BINARY_H
#define LLMC_KERNELS_CONTRACTS_BINARY_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <algorithm>
#include <string>

namespace llmc::contracts {

/// add(lhs, rhs) -> out and mul(lhs, rhs) -> out: rhs's shape a suffix of
/// lhs's, out lhs's type.
struct BroadcastBinding {
  DType dtype = DType::F32;
};
inline bool bindAdd(const KernelArgs &args, std::string &error, BroadcastBinding *out);
inline bool bindMul(const KernelArgs &args, std::string &error, BroadcastBinding *out);

/// scale(x) -> out = factor · x.
struct ScaleBinding {
  DType dtype = DType::F32;
  double factor = 0;
};
inline bool bindScale(const KernelArgs &args, std::string &error, ScaleBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace binary_impl {

inline bool bindBroadcast(const char *name, const KernelArgs &args, std::string &error,
                          BroadcastBinding *out) {
  Validator v(name, args, error);
  if (!v.arity(2, 1))
    return false;
  const TensorView &lhs = v.in(0), &rhs = v.in(1);
  if (!v.isFloat(lhs, "lhs") || !v.hasDType(rhs, "rhs", lhs.dtype) ||
      !v.hasType(v.out(0), "out", lhs.dtype, lhs.shape))
    return false;
  if (rhs.rank() > lhs.rank() ||
      !std::equal(rhs.shape.begin(), rhs.shape.end(), lhs.shape.end() - rhs.rank()))
    return v.fail("rhs shape must be a suffix of lhs shape: lhs " + lhs.describe() + ", rhs " +
                  rhs.describe());
  out->dtype = lhs.dtype;
  return true;
}

} // namespace binary_impl
using namespace binary_impl;

inline bool bindAdd(const KernelArgs &args, std::string &error, BroadcastBinding *out) {
  return bindBroadcast("add", args, error, out);
}

inline bool bindMul(const KernelArgs &args, std::string &error, BroadcastBinding *out) {
  return bindBroadcast("mul", args, error, out);
}

inline bool bindScale(const KernelArgs &args, std::string &error, ScaleBinding *out) {
  Validator v("scale", args, error);
  double factor;
  if (!v.arity(1, 1) || !v.floatAttr("factor", &factor) || !v.isFloat(v.in(0), "x") ||
      !v.hasType(v.out(0), "out", v.in(0).dtype, v.in(0).shape))
    return false;
  out->dtype = v.in(0).dtype;
  out->factor = factor;
  return true;
}

} // namespace llmc::contracts

#endif
