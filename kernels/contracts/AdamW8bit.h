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

#include "kernels/contracts/AdamW.h"

namespace llmc::contracts {

struct AdamW8bitBinding {
  DType dtype = DType::F32; ///< of param and grad
  int64_t numel = 0, blocks = 0;
  bool hasNorm = false;      ///< the optional ninth input is bound
  bool hasLossScale = false; ///< the optional tenth input (loss scale) is bound
  AdamWHyperparams hyper;
};
bool bindAdamW8bit(const KernelArgs &args, std::string &error, AdamW8bitBinding *out);

} // namespace llmc::contracts

#endif
