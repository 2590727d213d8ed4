//===- Cast.h - binding contract of cast ------------------------*- C++ -*-===//
//
// The checks of cast, shared by the CPU factory (kernels/cpu/cast.cpp) and
// the CUDA one (kernels/cuda/cast.cu): x and out each f32, bf16 or f16, of
// one shape.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_CAST_H
#define LLMC_KERNELS_CONTRACTS_CAST_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <string>

namespace llmc::contracts {

/// cast(x) -> out.
struct CastBinding {
  DType from = DType::F32, to = DType::F32;
};
inline bool bindCast(const KernelArgs &args, std::string &error, CastBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace cast_impl {

inline bool isCastable(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

} // namespace cast_impl
using namespace cast_impl;

inline bool bindCast(const KernelArgs &args, std::string &error, CastBinding *out) {
  Validator v("cast", args, error);
  if (!v.arity(1, 1))
    return false;
  const TensorView &x = v.in(0), &y = v.out(0);
  if (!isCastable(x.dtype))
    return v.fail("x must be f32, bf16 or f16, got " + x.describe());
  if (!isCastable(y.dtype))
    return v.fail("out must be f32, bf16 or f16, got " + y.describe());
  if (y.shape != x.shape)
    return v.fail("out must have x's shape " + x.describe() + ", got " + y.describe());
  out->from = x.dtype;
  out->to = y.dtype;
  return true;
}

} // namespace llmc::contracts

#endif
