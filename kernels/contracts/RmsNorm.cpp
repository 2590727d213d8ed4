//===- RmsNorm.cpp - binding contracts of the rmsnorm kernels -------------===//
//
// The checks and derivations kernels/cpu/rmsnorm.cpp and
// kernels/cuda/rmsnorm.cu share (RowNorm.h: one table per kernel; an
// operand is {output?, position, name, [C]?}).
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/RmsNorm.h"

namespace llmc::contracts {

bool bindRmsNorm(const KernelArgs &args, std::string &error, RmsNormBinding *out) {
  return bindRowNorm("rmsnorm", args, error, 2, 1, "x",
                     {{false, 1, "gamma", true}, {true, 0, "out", false}}, out);
}

bool bindRmsNormGrad(const KernelArgs &args, std::string &error, RmsNormBinding *out) {
  return bindRowNorm("rmsnorm_grad", args, error, 3, 2, "x",
                     {{false, 1, "gamma", true},
                      {false, 2, "dy", false},
                      {true, 0, "dx", false},
                      {true, 1, "dgamma", true}},
                     out);
}

bool bindAddRmsNorm(const KernelArgs &args, std::string &error, RmsNormBinding *out) {
  return bindRowNorm("add_rmsnorm", args, error, 3, 2, "a",
                     {{false, 1, "b", false},
                      {false, 2, "gamma", true},
                      {true, 0, "sum", false},
                      {true, 1, "y", false}},
                     out);
}

bool bindRmsNormGradAdd(const KernelArgs &args, std::string &error, RmsNormBinding *out) {
  return bindRowNorm("rmsnorm_grad_add", args, error, 4, 2, "x",
                     {{false, 1, "gamma", true},
                      {false, 2, "dy", false},
                      {false, 3, "addend", false},
                      {true, 0, "dx", false},
                      {true, 1, "dgamma", true}},
                     out);
}

} // namespace llmc::contracts
