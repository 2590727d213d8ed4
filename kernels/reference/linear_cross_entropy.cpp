//===- linear_cross_entropy.cpp - the fused head + loss, unfused ----------===//
//
// What the fused kernels must equal: the head's matmul, cross_entropy and,
// for training, cross_entropy_grad and the two matmuls of its backward,
// each by its own reference, over h flattened to [rows, D].
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"

namespace llmc::ref {

std::vector<RefTensor> linearCrossEntropy(const RefTensor &h, const RefTensor &w,
                                          const RefTensor &targets, bool transposeB,
                                          int64_t ignoreIndex, const double *dloss) {
  require(h.shape.size() >= 2 && w.shape.size() == 2, "linear_cross_entropy",
          "h must be [..., D] and w a matrix");
  RefTensor rows = h;
  rows.shape = {h.numel() / h.shape.back(), h.shape.back()};
  RefTensor flatTargets = targets;
  flatTargets.shape = {rows.shape[0]};
  RefTensor logits = matmul(rows, w, false, transposeB);
  std::vector<RefTensor> out{crossEntropy(logits, flatTargets, ignoreIndex)};
  if (!dloss)
    return out;
  RefTensor g = crossEntropyGrad(logits, flatTargets, *dloss, ignoreIndex);
  RefTensor dh = matmul(g, w, false, !transposeB);
  dh.shape = h.shape;
  out.push_back(dh);
  out.push_back(transposeB ? matmul(g, rows, true, false) : matmul(rows, g, true, false));
  return out;
}

} // namespace llmc::ref
