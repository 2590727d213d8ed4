//===- GlobalNorm.cpp - binding contract of global_norm and sqrt ----------===//
//
// Part of llmc: see GlobalNorm.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/GlobalNorm.h"
#include "kernels/Validator.h"

#include <cstdint>

namespace llmc::contracts {

bool bindGlobalNorm(const KernelArgs &args, std::string &error, GlobalNormBinding *out) {
  Validator v("global_norm", args, error);
  if (!v.arity(1, SIZE_MAX, 1)) return false;
  for (size_t i = 0; i < args.inputs.size(); ++i)
    if (!v.isFloat(v.in(i), ("input " + std::to_string(i)).c_str())) return false;
  if (!v.isF32Scalar(v.out(0), "norm")) return false;
  out->tensors = args.inputs.size();
  return true;
}

bool bindSqrt(const KernelArgs &args, std::string &error, SqrtBinding *out) {
  Validator v("sqrt", args, error);
  if (!v.arity(1, 1)) return false;
  if (args.inputs[0].dtype != DType::F32 || args.outputs[0].dtype != DType::F32 ||
      args.inputs[0].shape != args.outputs[0].shape) {
    error = "sqrt: x and out must be f32 of one shape, got " + args.inputs[0].describe() +
            " and " + args.outputs[0].describe();
    return false;
  }
  out->numel = args.inputs[0].numel();
  return true;
}

} // namespace llmc::contracts
