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
#include "kernels/Validator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

struct CrossEntropyBinding {
  DType dtype = DType::F32; ///< of the logits
  int64_t rows = 0, width = 0, ignoreIndex = -1;
  /// The classes: the first `classes` columns (`num_classes`, or all of
  /// them); the rest pad the vocabulary, left out and given gradient 0.
  int64_t classes = 0;
};
inline bool bindCrossEntropy(const KernelArgs &args, std::string &error, CrossEntropyBinding *out);
inline bool bindCrossEntropyGrad(const KernelArgs &args, std::string &error,
                                 CrossEntropyBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace cross_entropy_impl {

/// logits [..., V] float and targets [...] of ids; fills `out`.
inline bool checkLogits(Validator &v, CrossEntropyBinding *out) {
  int64_t ignoreIndex, numClasses;
  if (!v.intAttr("ignore_index", &ignoreIndex, -1) || !v.intAttr("num_classes", &numClasses, 0))
    return false;
  const TensorView &logits = v.in(0), &targets = v.in(1);
  if (!v.isFloat(logits, "logits"))
    return false;
  if (logits.rank() < 1)
    return v.fail("logits must have rank >= 1, got " + logits.describe());
  std::vector<int64_t> rows(logits.shape.begin(), logits.shape.end() - 1);
  if (!v.isIndex(targets, "targets") || !v.hasType(targets, "targets", targets.dtype, rows))
    return false;
  const int64_t width = logits.dim(-1);
  if (numClasses < 0 || numClasses > width)
    return v.fail("num_classes " + std::to_string(numClasses) + " must be in [0, " +
                  std::to_string(width) + "] for logits " + logits.describe());
  *out = {logits.dtype, product(rows), width, ignoreIndex, numClasses ? numClasses : width};
  return true;
}

} // namespace cross_entropy_impl
using namespace cross_entropy_impl;

inline bool bindCrossEntropy(const KernelArgs &args, std::string &error, CrossEntropyBinding *out) {
  Validator v("cross_entropy", args, error);
  return v.arity(2, 1) && checkLogits(v, out) && v.isF32Scalar(v.out(0), "loss");
}

inline bool bindCrossEntropyGrad(const KernelArgs &args, std::string &error,
                                 CrossEntropyBinding *out) {
  Validator v("cross_entropy_grad", args, error);
  return v.arity(3, 1) && checkLogits(v, out) && v.isF32Scalar(v.in(2), "dloss") &&
         v.hasType(v.out(0), "dlogits", v.in(0).dtype, v.in(0).shape);
}

} // namespace llmc::contracts

#endif
