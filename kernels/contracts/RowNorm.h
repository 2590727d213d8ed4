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
};

/// Checks `kernel`'s arity, its epsilon, input 0 (named `first`: a float
/// tensor of rank >= 1) and every operand of `rest` against it.
bool bindRowNorm(const char *kernel, const KernelArgs &args, std::string &error, size_t inputs,
                 size_t outputs, const char *first, const std::vector<RowNormOperand> &rest,
                 RowNormShape *out);

} // namespace llmc::contracts

#endif
