//===- Fill.h - binding contract of fill ------------------------*- C++ -*-===//
//
// The checks of fill, shared by the CPU factory (kernels/cpu/fill.cpp) and
// the CUDA one (kernels/cuda/fill.cu): no inputs, one f32, bf16 or f16
// output, and a finite float attribute `value` (an integer is read as one).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_FILL_H
#define LLMC_KERNELS_CONTRACTS_FILL_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <string>

namespace llmc::contracts {

/// fill -> out: every element `value`, rounded to out's type.
inline bool bindFill(const KernelArgs &args, std::string &error, float *value) {
  Validator v("fill", args, error);
  double attr;
  if (!v.arity(0, 1) || !v.floatAttr("value", &attr) || !v.isFloat(v.out(0), "out"))
    return false;
  *value = static_cast<float>(attr);
  return true;
}

} // namespace llmc::contracts

#endif
