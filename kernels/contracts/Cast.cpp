//===- Cast.cpp - binding contract of cast --------------------------------===//
//
// Part of llmc: see Cast.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Cast.h"
#include "kernels/Validator.h"

namespace llmc::contracts {
namespace {

bool isCastable(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

} // namespace

bool bindCast(const KernelArgs &args, std::string &error, CastBinding *out) {
  Validator v("cast", args, error);
  if (!v.arity(1, 1)) return false;
  const TensorView &x = v.in(0), &y = v.out(0);
  if (!isCastable(x.dtype)) return v.fail("x must be f32, bf16 or f16, got " + x.describe());
  if (!isCastable(y.dtype)) return v.fail("out must be f32, bf16 or f16, got " + y.describe());
  if (y.shape != x.shape)
    return v.fail("out must have x's shape " + x.describe() + ", got " + y.describe());
  out->from = x.dtype;
  out->to = y.dtype;
  return true;
}

} // namespace llmc::contracts
