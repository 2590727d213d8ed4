//===- AdamW8bit.h - binding contract of adamw8bit --------------*- C++ -*-===//
//
// What both backends check and derive when they bind adamw8bit: adamw's
// attributes, an f32 or bf16 param and grad, the moments as u8 codes of the
// param's shape with one f32 absmax per block (common/Adam8bit.h), f32
// scalars lr and step, and an optional f32 scalar norm. The CPU and CUDA
// factories call bindAdamW8bit and add only what is specific to their
// backend.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ADAMW8BIT_H
#define LLMC_KERNELS_CONTRACTS_ADAMW8BIT_H

#include "common/Adam8bit.h"
#include "kernels/Validator.h"
#include "kernels/contracts/AdamW.h"

#include <vector>

namespace llmc::contracts {

struct AdamW8bitBinding {
  DType dtype = DType::F32; ///< of param and grad
  int64_t numel = 0, blocks = 0;
  bool hasNorm = false;      ///< the optional ninth input is bound
  bool hasLossScale = false; ///< the optional tenth input (loss scale) is bound
  AdamWHyperparams hyper;
};
inline bool bindAdamW8bit(const KernelArgs &args, std::string &error, AdamW8bitBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

inline bool bindAdamW8bit(const KernelArgs &args, std::string &error, AdamW8bitBinding *out) {
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

#endif
