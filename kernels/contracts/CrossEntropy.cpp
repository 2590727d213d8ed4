//===- CrossEntropy.cpp - binding contract of cross_entropy(_grad) --------===//
//
// The checks and derivations kernels/cpu/cross_entropy.cpp and
// kernels/cuda/cross_entropy.cu share.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/CrossEntropy.h"

#include "kernels/Validator.h"

#include <vector>

namespace llmc::contracts {
namespace {

/// logits [..., V] float and targets [...] of ids; fills `out`.
bool checkLogits(Validator &v, CrossEntropyBinding *out) {
  int64_t ignoreIndex, numClasses;
  if (!v.intAttr("ignore_index", &ignoreIndex, -1) || !v.intAttr("num_classes", &numClasses, 0))
    return false;
  const TensorView &logits = v.in(0), &targets = v.in(1);
  if (!v.isFloat(logits, "logits")) return false;
  if (logits.rank() < 1) return v.fail("logits must have rank >= 1, got " + logits.describe());
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

} // namespace

bool bindCrossEntropy(const KernelArgs &args, std::string &error, CrossEntropyBinding *out) {
  Validator v("cross_entropy", args, error);
  return v.arity(2, 1) && checkLogits(v, out) && v.isF32Scalar(v.out(0), "loss");
}

bool bindCrossEntropyGrad(const KernelArgs &args, std::string &error, CrossEntropyBinding *out) {
  Validator v("cross_entropy_grad", args, error);
  return v.arity(3, 1) && checkLogits(v, out) && v.isF32Scalar(v.in(2), "dloss") &&
         v.hasType(v.out(0), "dlogits", v.in(0).dtype, v.in(0).shape);
}

} // namespace llmc::contracts
