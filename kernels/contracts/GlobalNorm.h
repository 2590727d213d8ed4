//===- GlobalNorm.h - binding contract of global_norm and sqrt -*- C++ -*-===//
//
// The checks of global_norm (the l2 norm of any number of float tensors, an
// f32 scalar) and sqrt (elementwise, f32), shared by the CPU factories
// (kernels/cpu/global_norm.cpp) and the CUDA ones (kernels/cuda/global_norm.cu).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_GLOBALNORM_H
#define LLMC_KERNELS_CONTRACTS_GLOBALNORM_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmc::contracts {

/// global_norm(inputs...) -> norm.
struct GlobalNormBinding {
  size_t tensors = 0; ///< the inputs
};
inline bool bindGlobalNorm(const KernelArgs &args, std::string &error, GlobalNormBinding *out);

/// sqrt(x) -> out.
struct SqrtBinding {
  int64_t numel = 0;
};
inline bool bindSqrt(const KernelArgs &args, std::string &error, SqrtBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

inline bool bindGlobalNorm(const KernelArgs &args, std::string &error, GlobalNormBinding *out) {
  Validator v("global_norm", args, error);
  if (!v.arity(1, SIZE_MAX, 1))
    return false;
  for (size_t i = 0; i < args.inputs.size(); ++i)
    if (!v.isFloat(v.in(i), ("input " + std::to_string(i)).c_str()))
      return false;
  if (!v.isF32Scalar(v.out(0), "norm"))
    return false;
  out->tensors = args.inputs.size();
  return true;
}

inline bool bindSqrt(const KernelArgs &args, std::string &error, SqrtBinding *out) {
  Validator v("sqrt", args, error);
  if (!v.arity(1, 1))
    return false;
  if (args.inputs[0].dtype != DType::F32 || args.outputs[0].dtype != DType::F32 ||
      args.inputs[0].shape != args.outputs[0].shape) {
    error = "sqrt: x and out must be f32 of one shape, got " + args.inputs[0].describe() + " and " +
            args.outputs[0].describe();
    return false;
  }
  out->numel = args.inputs[0].numel();
  return true;
}

} // namespace llmc::contracts

#endif
