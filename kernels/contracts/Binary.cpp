//===- Binary.cpp - binding contract of add, mul and scale ----------------===//
//
// Part of llmc: see Binary.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Binary.h"
#include "kernels/Validator.h"

#include <algorithm>

namespace llmc::contracts {
namespace {

bool bindBroadcast(const char *name, const KernelArgs &args, std::string &error,
                   BroadcastBinding *out) {
  Validator v(name, args, error);
  if (!v.arity(2, 1)) return false;
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

} // namespace

bool bindAdd(const KernelArgs &args, std::string &error, BroadcastBinding *out) {
  return bindBroadcast("add", args, error, out);
}

bool bindMul(const KernelArgs &args, std::string &error, BroadcastBinding *out) {
  return bindBroadcast("mul", args, error, out);
}

bool bindScale(const KernelArgs &args, std::string &error, ScaleBinding *out) {
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
