//===- RowNorm.cpp - the binding checks every row-norm kernel shares ------===//
//
// Part of llmc: see RowNorm.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/RowNorm.h"

#include "kernels/Validator.h"

#include <vector>

namespace llmc::contracts {

bool bindRowNorm(const char *kernel, const KernelArgs &args, std::string &error, size_t inputs,
                 size_t outputs, const char *first, const std::vector<RowNormOperand> &rest,
                 RowNormShape *out) {
  Validator v(kernel, args, error);
  double eps;
  if (!v.arity(inputs, outputs) || !v.floatAttr("epsilon", &eps)) return false;
  const TensorView &x = v.in(0);
  if (!v.isFloat(x, first)) return false;
  if (x.rank() < 1) return v.fail(std::string(first) + " must have rank >= 1, got " + x.describe());
  const std::vector<int64_t> channel{x.dim(-1)};
  for (const RowNormOperand &o : rest)
    if (!v.hasType(o.output ? v.out(o.index) : v.in(o.index), o.name, x.dtype,
                   o.channel ? channel : x.shape))
      return false;
  *out = {x.dtype, product(x.shape, 0, x.shape.size() - 1), x.dim(-1), eps};
  return true;
}

} // namespace llmc::contracts
