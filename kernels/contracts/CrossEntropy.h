//===- CrossEntropy.h - binding contract of cross_entropy and cross_entropy_grad -*- C++ -*-===//
//
// What both backends check and derive when they bind cross_entropy and
// cross_entropy_grad: logits [rows × width] (any leading shape), one i32 or
// i64 target per row, an f32 scalar loss (or its gradient) and the optional
// `ignore_index` and `num_classes` (a padded vocabulary: only the first
// num_classes columns are classes). The CPU and CUDA factories call the bind functions and add
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
  /// The classes: the first `classes` columns (`num_classes`, or all of
  /// them); the rest pad the vocabulary, left out and given gradient 0.
  int64_t classes = 0;
};
bool bindCrossEntropy(const KernelArgs &args, std::string &error, CrossEntropyBinding *out);
bool bindCrossEntropyGrad(const KernelArgs &args, std::string &error, CrossEntropyBinding *out);

} // namespace llmc::contracts

#endif
