//===- Linear.h - contract of the matmul with its epilogue ------*- C++ -*-===//
//
// linear: inputs x [..., K] (any leading shape), w [K, N] or [N, K]
// (transpose_b), then a bias [N], a residual [..., N] (y's shape) or both
// in that order (a 1-D third input is the bias), all of one float dtype;
// output y [..., N] = x·w + bias + residual, each sum rounded to the dtype
// as add rounds it, or with `gelu` (bias, no residual) the tanh GELU of
// x·w + bias. With `keep_pre` (gelu only) a second output pre [..., N]
// receives x·w + bias.
//
// matmul_gelu_grad: inputs x [..., K], w as linear's, and pre [..., N],
// GELU's input, all of one float dtype; output y [..., N] =
// gelu_grad(pre, x·w), the product rounded to the dtype as matmul rounds
// it: the gradient of GELU's input from the data-gradient product of the
// layer after it. With `bias_grad` a second output db [N] = y's rows
// summed, as reduce_sum sums them.
//
// matmul_swiglu_grad: inputs x and w as matmul_gelu_grad's, then gate and
// up [..., N]; outputs dgate and dup [..., N] = swiglu_grad(gate, up,
// x·w), the product rounded as matmul rounds it.
//
// linear_weight_grad: inputs x [..., K] and dy [..., N] of one float dtype
// with as many rows; outputs dw [K, N] = xᵀ·dy and db [N], dy's rows
// summed: the layer's weight and bias gradients.
//
// Both backends bind through here.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_LINEAR_H
#define LLMC_KERNELS_CONTRACTS_LINEAR_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

struct LinearBinding {
  DType dtype = DType::F32; ///< of every operand
  int64_t rows = 0, k = 0, n = 0;
  bool transposeB = false, gelu = false, keepPre = false;
  int bias = -1, residual = -1; ///< input index, -1 where absent
  int geluInput = -1; ///< matmul_gelu_grad: the input index of pre
  bool biasGrad = false; ///< matmul_gelu_grad: output 1 sums y's rows
  int swigluGate = -1, swigluUp = -1; ///< matmul_swiglu_grad: their input indices
};
bool bindLinear(const KernelArgs &args, std::string &error, LinearBinding *out);
bool bindMatmulGeluGrad(const KernelArgs &args, std::string &error, LinearBinding *out);
bool bindMatmulSwigluGrad(const KernelArgs &args, std::string &error, LinearBinding *out);

struct LinearWeightGradBinding {
  DType dtype = DType::F32; ///< of every operand
  int64_t rows = 0, k = 0, n = 0;
};
bool bindLinearWeightGrad(const KernelArgs &args, std::string &error,
                          LinearWeightGradBinding *out);
/// The two kernels linear_weight_grad is without a fused one: `product`,
/// dw = (x as [rows, K])ᵀ · (dy as [rows, N]) (a matmul), and `sum`, db =
/// dy's rows summed (a reduce_sum).
void splitLinearWeightGrad(const KernelArgs &args, const LinearWeightGradBinding &b,
                           KernelArgs *product, KernelArgs *sum);

} // namespace llmc::contracts

#endif
