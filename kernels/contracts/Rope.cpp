//===- Rope.cpp - binding contract of rope --------------------------------===//
//
// Part of llmc: see Rope.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Rope.h"
#include "kernels/Validator.h"

namespace llmc::contracts {

bool bindRope(const KernelArgs &args, std::string &error, RopeBinding *out) {
  Validator v("rope", args, error);
  double theta;
  bool inverse;
  if (!v.arity(1, 2, 1) || !v.floatAttr("theta", &theta) || !v.flagAttr("inverse", &inverse))
    return false;
  const TensorView &x = v.in(0);
  if (!v.isFloat(x, "x") || !v.hasRank(x, "x", 4)) return false;
  if (x.dim(3) % 2 != 0) return v.fail("x head dim D must be even, got " + x.describe());
  if (!(theta > 0.0)) return v.fail("attribute 'theta' must be positive");
  if (!v.hasType(v.out(0), "out", x.dtype, x.shape)) return false;
  out->positions = args.inputs.size() > 1;
  if (out->positions &&
      (!v.isIndex(v.in(1), "positions") ||
       !v.hasType(v.in(1), "positions", v.in(1).dtype, {x.dim(0), x.dim(1)})))
    return false;
  out->rows = args.attrs.getInt("position_limit", x.dim(1));
  if (out->rows < x.dim(1))
    return v.fail("attribute 'position_limit' (" + std::to_string(out->rows) +
                  ") must be at least T = " + std::to_string(x.dim(1)));
  out->dtype = x.dtype;
  out->theta = theta;
  out->inverse = inverse;
  return true;
}

} // namespace llmc::contracts
