//===- CrossEntropy.h - binding contract of cross_entropy and cross_entropy_grad -*- C++ -*-===//
//
// What both backends check and derive when they bind cross_entropy and
// cross_entropy_grad: logits [rows × width] (any leading shape), one i32 or
// i64 target per row, an f32 scalar loss (or its gradient) and the optional
// `ignore_index`. The CPU and CUDA factories call the bind functions and add
// only what is specific to their backend.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_CROSSENTROPY_H
#define LLMC_KERNELS_CONTRACTS_CROSSENTROPY_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

struct CrossEntropyBinding {
  DType dtype = DType::F32; ///< of the logits
  int64_t rows = 0, width = 0, ignoreIndex = -1;
};
bool bindCrossEntropy(const KernelArgs &args, std::string &error, CrossEntropyBinding *out);
bool bindCrossEntropyGrad(const KernelArgs &args, std::string &error, CrossEntropyBinding *out);

} // namespace llmc::contracts

#endif
