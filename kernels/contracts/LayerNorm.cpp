//===- LayerNorm.cpp - binding contracts of the layernorm kernels ---------===//
//
// The checks and derivations kernels/cpu/layernorm.cpp and
// kernels/cuda/layernorm.cu share (RowNorm.h: one table per kernel; an
// operand is {output?, position, name, [C]?}).
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/LayerNorm.h"

#include <vector>

namespace llmc::contracts {

bool bindLayerNorm(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
  return bindRowNorm("layernorm", args, error, 3, 1, "x",
                     {{false, 1, "gamma", true}, {false, 2, "beta", true}, {true, 0, "out", false}},
                     out);
}

bool bindLayerNormGrad(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
  return bindRowNorm("layernorm_grad", args, error, 3, 3, "x",
                     {{false, 1, "gamma", true},
                      {false, 2, "dy", false},
                      {true, 0, "dx", false},
                      {true, 1, "dgamma", true},
                      {true, 2, "dbeta", true}},
                     out);
}

bool bindAddLayerNorm(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
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

bool bindLayerNormGradAdd(const KernelArgs &args, std::string &error, LayerNormBinding *out) {
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
