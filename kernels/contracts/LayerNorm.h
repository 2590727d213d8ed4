//===- LayerNorm.h - binding contract of layernorm and layernorm_grad -*- C++ -*-===//
//
// What both backends check and derive when they bind layernorm and
// layernorm_grad (and their residual forms add_layernorm, layernorm_grad_add): x is [rows × width]
// (any leading shape), gamma, beta and the gradients match it, and `epsilon` is given. The CPU and
// CUDA factories call the bind functions and add only what is specific to their backend.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_LAYERNORM_H
#define LLMC_KERNELS_CONTRACTS_LAYERNORM_H

#include "kernels/Kernel.h"
#include "kernels/contracts/RowNorm.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

using LayerNormBinding = RowNormShape;
inline bool bindLayerNorm(const KernelArgs &args, std::string &error, LayerNormBinding *out);
inline bool bindLayerNormGrad(const KernelArgs &args, std::string &error, LayerNormBinding *out);
/// add_layernorm: a, b, gamma, beta[, bias] -> sum, y (a, b, sum and y of
/// one shape; sum = a + (b + bias) with the [C] bias).
inline bool bindAddLayerNorm(const KernelArgs &args, std::string &error, LayerNormBinding *out);
/// layernorm_grad_add: x, gamma, dy, addend -> dx (+ addend), dgamma, dbeta.
inline bool bindLayerNormGradAdd(const KernelArgs &args, std::string &error, LayerNormBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

inline bool bindLayerNorm(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
  return bindRowNorm("layernorm", args, error, 3, 1, "x",
                     {{false, 1, "gamma", true}, {false, 2, "beta", true}, {true, 0, "out", false}},
                     out);
}

inline bool bindLayerNormGrad(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
  return bindRowNorm("layernorm_grad", args, error, 3, 3, "x",
                     {{false, 1, "gamma", true},
                      {false, 2, "dy", false},
                      {true, 0, "dx", false},
                      {true, 1, "dgamma", true},
                      {true, 2, "dbeta", true}},
                     out);
}

inline bool bindAddLayerNorm(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
  std::vector<RowNormOperand> operands = {{false, 1, "b", false},
                                          {false, 2, "gamma", true},
                                          {false, 3, "beta", true},
                                          {true, 0, "sum", false},
                                          {true, 1, "y", false}};
  const bool biased = args.inputs.size() == 5; // with the bias of b
  if (biased)
    operands.push_back({false, 4, "bias", true});
  return bindRowNorm("add_layernorm", args, error, biased ? 5 : 4, 2, "a", operands, out);
}

inline bool bindLayerNormGradAdd(const KernelArgs &args, std::string &error,
                                 LayerNormBinding *out) {
  return bindRowNorm("layernorm_grad_add", args, error, 4, 3, "x",
                     {{false, 1, "gamma", true},
                      {false, 2, "dy", false},
                      {false, 3, "addend", false},
                      {true, 0, "dx", false},
                      {true, 1, "dgamma", true},
                      {true, 2, "dbeta", true}},
                     out);
}

} // namespace llmc::contracts

#endif
