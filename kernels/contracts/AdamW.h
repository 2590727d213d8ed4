//===- AdamW.h - binding contract of adamw ----------------------*- C++ -*-===//
//
// What both backends check and derive when they bind adamw: the
// hyperparameter attributes (shared with adamw8bit) and an f32 or bf16
// param with grad, m and v of its type, f32 scalars lr and step, an
// optional f32 scalar norm for gradient clipping and, after it, an optional
// f32 scalar loss scale (fp16) the gradients and norm are multiplied by. The CPU and CUDA factories
// call bindAdamW and add only what is specific to their backend.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ADAMW_H
#define LLMC_KERNELS_CONTRACTS_ADAMW_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc {
class Validator;
} // namespace llmc

namespace llmc::contracts {

/// `beta1`, `beta2`, `epsilon`, `weight_decay`, `max_grad_norm`: the
/// attributes of both AdamW kernels.
struct AdamWHyperparams {
  double beta1 = 0, beta2 = 0, epsilon = 0, weightDecay = 0, maxGradNorm = 0;
};
/// Reads and checks the AdamW attributes; false (with the validator's error
/// set) when one is missing or bad.
bool readAdamWHyperparams(Validator &v, AdamWHyperparams *out);

struct AdamWBinding {
  DType dtype = DType::F32; ///< of param, grad, m and v
  int64_t numel = 0;
  bool hasNorm = false;      ///< the optional seventh input is bound
  bool hasLossScale = false; ///< the optional eighth input is bound
  AdamWHyperparams hyper;
};
bool bindAdamW(const KernelArgs &args, std::string &error, AdamWBinding *out);

} // namespace llmc::contracts

#endif
