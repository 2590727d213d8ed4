//===- LayerNorm.h - binding contract of layernorm and layernorm_grad -*- C++ -*-===//
//
// What both backends check and derive when they bind layernorm and
// layernorm_grad (and their residual forms add_layernorm, layernorm_grad_add): x is [rows × width] (any leading shape), gamma, beta and
// the gradients match it, and `epsilon` is given. The CPU and CUDA factories
// call the bind functions and add only what is specific to their backend.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_LAYERNORM_H
#define LLMC_KERNELS_CONTRACTS_LAYERNORM_H

#include "kernels/Kernel.h"
#include "kernels/contracts/RowNorm.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

using LayerNormBinding = RowNormShape;
bool bindLayerNorm(const KernelArgs &args, std::string &error, LayerNormBinding *out);
bool bindLayerNormGrad(const KernelArgs &args, std::string &error, LayerNormBinding *out);
/// add_layernorm: a, b, gamma, beta[, bias] -> sum, y (a, b, sum and y of
/// one shape; sum = a + (b + bias) with the [C] bias).
bool bindAddLayerNorm(const KernelArgs &args, std::string &error, LayerNormBinding *out);
/// layernorm_grad_add: x, gamma, dy, addend -> dx (+ addend), dgamma, dbeta.
bool bindLayerNormGradAdd(const KernelArgs &args, std::string &error, LayerNormBinding *out);

} // namespace llmc::contracts

#endif
