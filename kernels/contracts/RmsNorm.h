//===- RmsNorm.h - binding contract of rmsnorm and rmsnorm_grad -*- C++ -*-===//
//
// What both backends check and derive when they bind rmsnorm and
// rmsnorm_grad: x is [rows × width] (any leading shape), gamma and the
// gradients match it, and `epsilon` is given. The CPU and CUDA factories
// call the bind functions and add only what is specific to their backend.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_RMSNORM_H
#define LLMC_KERNELS_CONTRACTS_RMSNORM_H

#include "kernels/Kernel.h"
#include "kernels/contracts/RowNorm.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

using RmsNormBinding = RowNormShape;
bool bindRmsNorm(const KernelArgs &args, std::string &error, RmsNormBinding *out);
bool bindRmsNormGrad(const KernelArgs &args, std::string &error, RmsNormBinding *out);
/// add_rmsnorm: a, b, gamma -> sum, y (a, b, sum and y of one shape).
bool bindAddRmsNorm(const KernelArgs &args, std::string &error, RmsNormBinding *out);
/// rmsnorm_grad_add: x, gamma, dy, addend -> dx (+ addend), dgamma.
bool bindRmsNormGradAdd(const KernelArgs &args, std::string &error, RmsNormBinding *out);

} // namespace llmc::contracts

#endif
