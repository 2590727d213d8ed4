//===- RowNorm.h - the binding checks every row-norm kernel shares -*- C++ -*-===//
//
// layernorm, rmsnorm, their gradients and their residual forms (add_*,
// *_grad_add) all normalize the rows of a float tensor of any rank: every
// operand has that tensor's type, either its whole shape (a row operand)
// or [C], its last dimension (a per-channel one), and the kernel takes an
// `epsilon`. One table per kernel says which is which.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ROWNORM_H
#define LLMC_KERNELS_CONTRACTS_ROWNORM_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

/// One operand after the first input: an input or output by position, its
/// name in errors, and whether it is [C] (else the first input's shape).
struct RowNormOperand {
  bool output;
  size_t index;
  const char *name;
  bool channel;
};

/// What a row-norm binding derives.
struct RowNormShape {
  DType dtype = DType::F32; ///< of every operand
  int64_t rows = 0, width = 0;
  double epsilon = 0;
  /// rmsnorm's `unit_offset` (Gemma): scale by 1 + gamma, not gamma.
  bool unitOffset = false;
};

/// Checks `kernel`'s arity, its epsilon, input 0 (named `first`: a float
/// tensor of rank >= 1) and every operand of `rest` against it.
inline bool bindRowNorm(const char *kernel, const KernelArgs &args, std::string &error,
                        size_t inputs, size_t outputs, const char *first,
                        const std::vector<RowNormOperand> &rest, RowNormShape *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

inline bool bindRowNorm(const char *kernel, const KernelArgs &args, std::string &error,
                        size_t inputs, size_t outputs, const char *first,
                        const std::vector<RowNormOperand> &rest, RowNormShape *out) {
  Validator v(kernel, args, error);
  double eps;
  if (!v.arity(inputs, outputs) || !v.floatAttr("epsilon", &eps))
    return false;
  const TensorView &x = v.in(0);
  if (!v.isFloat(x, first))
    return false;
  if (x.rank() < 1)
    return v.fail(std::string(first) + " must have rank >= 1, got " + x.describe());
  const std::vector<int64_t> channel{x.dim(-1)};
  for (const RowNormOperand &o : rest)
    if (!v.hasType(o.output ? v.out(o.index) : v.in(o.index), o.name, x.dtype,
                   o.channel ? channel : x.shape))
      return false;
  *out = {x.dtype, product(x.shape, 0, x.shape.size() - 1), x.dim(-1), eps};
  return true;
}

} // namespace llmc::contracts

#endif
