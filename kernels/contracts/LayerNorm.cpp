//===- LayerNorm.cpp - binding contract of layernorm and layernorm_grad ---===//
//
// The checks and derivations kernels/cpu/layernorm.cpp and
// kernels/cuda/layernorm.cu share.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/LayerNorm.h"

#include "kernels/Validator.h"

#include <vector>

namespace llmc::contracts {

bool bindLayerNorm(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
  Validator v("layernorm", args, error);
  double eps;
  if (!v.arity(3, 1) || !v.floatAttr("epsilon", &eps)) return false;
  const TensorView &x = v.in(0);
  if (!v.isFloat(x, "x")) return false;
  if (x.rank() < 1) return v.fail("x must have rank >= 1, got " + x.describe());
  if (!v.hasType(v.in(1), "gamma", x.dtype, {x.dim(-1)}) ||
      !v.hasType(v.in(2), "beta", x.dtype, {x.dim(-1)}) ||
      !v.hasType(v.out(0), "out", x.dtype, x.shape))
    return false;
  *out = {x.dtype, product(x.shape, 0, x.shape.size() - 1), x.dim(-1), eps};
  return true;
}

bool bindLayerNormGrad(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
  Validator v("layernorm_grad", args, error);
  double eps;
  if (!v.arity(3, 3) || !v.floatAttr("epsilon", &eps)) return false;
  const TensorView &x = v.in(0);
  if (!v.isFloat(x, "x")) return false;
  if (x.rank() < 1) return v.fail("x must have rank >= 1, got " + x.describe());
  std::vector<int64_t> c{x.dim(-1)};
  if (!v.hasType(v.in(1), "gamma", x.dtype, c) || !v.hasType(v.in(2), "dy", x.dtype, x.shape) ||
      !v.hasType(v.out(0), "dx", x.dtype, x.shape) || !v.hasType(v.out(1), "dgamma", x.dtype, c) ||
      !v.hasType(v.out(2), "dbeta", x.dtype, c))
    return false;
  *out = {x.dtype, product(x.shape, 0, x.shape.size() - 1), x.dim(-1), eps};
  return true;
}

bool bindAddLayerNorm(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
  Validator v("add_layernorm", args, error);
  double eps;
  if (!v.arity(4, 2) || !v.floatAttr("epsilon", &eps)) return false;
  const TensorView &a = v.in(0);
  if (!v.isFloat(a, "a")) return false;
  if (a.rank() < 1) return v.fail("a must have rank >= 1, got " + a.describe());
  std::vector<int64_t> c{a.dim(-1)};
  if (!v.hasType(v.in(1), "b", a.dtype, a.shape) || !v.hasType(v.in(2), "gamma", a.dtype, c) ||
      !v.hasType(v.in(3), "beta", a.dtype, c) || !v.hasType(v.out(0), "sum", a.dtype, a.shape) ||
      !v.hasType(v.out(1), "y", a.dtype, a.shape))
    return false;
  *out = {a.dtype, product(a.shape, 0, a.shape.size() - 1), a.dim(-1), eps};
  return true;
}

bool bindLayerNormGradAdd(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
  Validator v("layernorm_grad_add", args, error);
  double eps;
  if (!v.arity(4, 3) || !v.floatAttr("epsilon", &eps)) return false;
  const TensorView &x = v.in(0);
  if (!v.isFloat(x, "x")) return false;
  if (x.rank() < 1) return v.fail("x must have rank >= 1, got " + x.describe());
  std::vector<int64_t> c{x.dim(-1)};
  if (!v.hasType(v.in(1), "gamma", x.dtype, c) || !v.hasType(v.in(2), "dy", x.dtype, x.shape) ||
      !v.hasType(v.in(3), "addend", x.dtype, x.shape) ||
      !v.hasType(v.out(0), "dx", x.dtype, x.shape) || !v.hasType(v.out(1), "dgamma", x.dtype, c) ||
      !v.hasType(v.out(2), "dbeta", x.dtype, c))
    return false;
  *out = {x.dtype, product(x.shape, 0, x.shape.size() - 1), x.dim(-1), eps};
  return true;
}

} // namespace llmc::contracts
