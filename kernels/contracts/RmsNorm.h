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
inline bool bindRmsNorm(const KernelArgs &args, std::string &error, RmsNormBinding *out);
inline bool bindRmsNormGrad(const KernelArgs &args, std::string &error, RmsNormBinding *out);
/// add_rmsnorm: a, b, gamma -> sum, y (a, b, sum and y of one shape).
inline bool bindAddRmsNorm(const KernelArgs &args, std::string &error, RmsNormBinding *out);
/// rmsnorm_grad_add: x, gamma, dy, addend -> dx (+ addend), dgamma.
inline bool bindRmsNormGradAdd(const KernelArgs &args, std::string &error, RmsNormBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

/// bindRowNorm, then the optional flag `unit_offset`.
inline bool withUnitOffset(const char *kernel, bool bound, const KernelArgs &args,
                           std::string &error, RmsNormBinding *out) {
  if (!bound)
    return false;
  Validator v(kernel, args, error);
  return v.flagAttr("unit_offset", &out->unitOffset);
}

inline bool bindRmsNorm(const KernelArgs &args, std::string &error, RmsNormBinding *out) {
  return withUnitOffset("rmsnorm",
                        bindRowNorm("rmsnorm", args, error, 2, 1, "x",
                                    {{false, 1, "gamma", true}, {true, 0, "out", false}}, out),
                        args, error, out);
}

inline bool bindRmsNormGrad(const KernelArgs &args, std::string &error, RmsNormBinding *out) {
  return withUnitOffset("rmsnorm_grad",
                        bindRowNorm("rmsnorm_grad", args, error, 3, 2, "x",
                                    {{false, 1, "gamma", true},
                                     {false, 2, "dy", false},
                                     {true, 0, "dx", false},
                                     {true, 1, "dgamma", true}},
                                    out),
                        args, error, out);
}

inline bool bindAddRmsNorm(const KernelArgs &args, std::string &error, RmsNormBinding *out) {
  return withUnitOffset("add_rmsnorm",
                        bindRowNorm("add_rmsnorm", args, error, 3, 2, "a",
                                    {{false, 1, "b", false},
                                     {false, 2, "gamma", true},
                                     {true, 0, "sum", false},
                                     {true, 1, "y", false}},
                                    out),
                        args, error, out);
}

inline bool bindRmsNormGradAdd(const KernelArgs &args, std::string &error, RmsNormBinding *out) {
  return withUnitOffset("rmsnorm_grad_add",
                        bindRowNorm("rmsnorm_grad_add", args, error, 4, 2, "x",
                                    {{false, 1, "gamma", true},
                                     {false, 2, "dy", false},
                                     {false, 3, "addend", false},
                                     {true, 0, "dx", false},
                                     {true, 1, "dgamma", true}},
                                    out),
                        args, error, out);
}

} // namespace llmc::contracts

#endif
