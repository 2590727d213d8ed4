//===- AdamW.h - binding contract of adamw ----------------------*- C++ -*-===//
//
// What both backends check and derive when they bind adamw: the
// hyperparameter attributes (shared with adamw8bit) and an f32 or bf16
// param with grad, m and v of its type, f32 scalars lr and step, an
// optional f32 scalar norm for gradient clipping and, after it, an optional
// f32 scalar loss scale (fp16) the gradients and norm are multiplied by. The CPU and CUDA factories
// call bindAdamW and add only what is specific to their backend.
// multi_tensor_adamw (llmc-fuse's multi-tensor-adamw) is adamw over a list
// of tensors, each with an optional cast of its updated parameter.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ADAMW_H
#define LLMC_KERNELS_CONTRACTS_ADAMW_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>
#include <vector>

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

/// One tensor of a multi_tensor_adamw call: adamw's param, grad, m, v and
/// results, and where its cast goes.
struct MultiTensorAdamWTensor {
  DType param = DType::F32; ///< of param, m, v and their results
  DType grad = DType::F32;  ///< any float type (read as its widening to f32)
  int64_t numel = 0;
  bool decay = true;        ///< weight_decay applies (else 0)
  int64_t cast = -1;        ///< output index of its cast, or -1
  DType castTo = DType::F32;
};

/// multi_tensor_adamw: inputs params[N], grads[N], m[N], v[N], lr, step,
/// optional norm, optional loss_scale (`operand_segments` says which, as
/// the llm op's operand segments); outputs params'[N], m'[N], v'[N], then
/// the casts of `cast_of`; attributes adamw's, with `decay` (0/1 per
/// tensor) and `cast_of`.
struct MultiTensorAdamWBinding {
  std::vector<MultiTensorAdamWTensor> tensors;
  bool hasNorm = false, hasLossScale = false;
  AdamWHyperparams hyper; ///< weightDecay: that of the tensors with decay
  /// Input indices of lr, step and the optional scalars.
  size_t lr = 0, step = 0, norm = 0, lossScale = 0;
};
bool bindMultiTensorAdamW(const KernelArgs &args, std::string &error,
                          MultiTensorAdamWBinding *out);

} // namespace llmc::contracts

#endif
