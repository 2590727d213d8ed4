//===- AdamW8bit.cpp - binding contract of adamw8bit ----------------------===//
//
// The checks and derivations kernels/cpu/adamw8bit.cpp and
// kernels/cuda/adamw8bit.cu share.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/AdamW8bit.h"

#include "common/Adam8bit.h"
#include "kernels/Validator.h"

#include <vector>

namespace llmc::contracts {

bool bindAdamW8bit(const KernelArgs &args, std::string &error, AdamW8bitBinding *out) {
  Validator v("adamw8bit", args, error);
  AdamWHyperparams c;
  if (!v.arity(8, 10, 5) || !readAdamWHyperparams(v, &c))
    return false;
  const TensorView &p = v.in(0);
  const std::vector<int64_t> blocks = {adam8bit::blockCount(p.numel())};
  if (!v.isFloat(p, "param") || !v.hasType(v.in(1), "grad", p.dtype, p.shape) ||
      !v.hasType(v.in(2), "m_codes", DType::U8, p.shape) ||
      !v.hasType(v.in(3), "m_absmax", DType::F32, blocks) ||
      !v.hasType(v.in(4), "v_codes", DType::U8, p.shape) ||
      !v.hasType(v.in(5), "v_absmax", DType::F32, blocks) || !v.isF32Scalar(v.in(6), "lr") ||
      !v.isF32Scalar(v.in(7), "step") ||
      (args.inputs.size() > 8 && !v.isF32Scalar(v.in(8), "norm")) ||
      (args.inputs.size() > 9 && !v.isF32Scalar(v.in(9), "loss_scale")) ||
      !v.hasType(v.out(0), "param'", p.dtype, p.shape) ||
      !v.hasType(v.out(1), "m_codes'", DType::U8, p.shape) ||
      !v.hasType(v.out(2), "m_absmax'", DType::F32, blocks) ||
      !v.hasType(v.out(3), "v_codes'", DType::U8, p.shape) ||
      !v.hasType(v.out(4), "v_absmax'", DType::F32, blocks))
    return false;
  *out = {p.dtype, p.numel(), blocks[0], args.inputs.size() > 8, args.inputs.size() > 9, c};
  return true;
}

} // namespace llmc::contracts
