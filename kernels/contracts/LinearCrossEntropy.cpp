//===- LinearCrossEntropy.cpp - contract of the fused head + loss ---------===//

#include "kernels/contracts/LinearCrossEntropy.h"

#include "kernels/Validator.h"

#include <vector>

namespace llmc::contracts {

bool bindLinearCrossEntropy(const KernelArgs &args, bool train, std::string &error,
                            LinearCrossEntropyBinding *out) {
  Validator v(linearCrossEntropyName(train), args, error);
  LinearCrossEntropyBinding b;
  b.train = train;
  if (!v.arity(train ? 4 : 3, train ? 4 : 2) || !v.flagAttr("transpose_b", &b.transposeB) ||
      !v.intAttr("ignore_index", &b.ignoreIndex, -1) || !v.intAttr("chunk_rows", &b.chunkRows, 0))
    return false;
  const TensorView &h = v.in(0), &w = v.in(1), &targets = v.in(2);
  if (!v.isFloat(h, "h") || !v.hasDType(w, "w", h.dtype) || !v.hasRank(w, "w", 2) ||
      !v.fitsInt(h, "h") || !v.fitsInt(w, "w"))
    return false;
  b.dtype = h.dtype;
  if (h.rank() < 2) return v.fail("h must be [..., D], got " + h.describe());
  b.width = h.dim(-1);
  b.vocab = w.dim(b.transposeB ? 0 : 1);
  if (w.dim(b.transposeB ? 1 : 0) != b.width)
    return v.fail("w " + w.describe() + " does not match h " + h.describe());
  std::vector<int64_t> rows(h.shape.begin(), h.shape.end() - 1);
  if (!v.isIndex(targets, "targets") || !v.hasType(targets, "targets", targets.dtype, rows))
    return false;
  b.rows = product(rows);
  if (b.chunkRows < 1) return v.fail("chunk_rows must be >= 1");
  size_t scratch = train ? 3 : 1;
  if (!v.isF32Scalar(v.out(0), "loss") ||
      !v.hasType(v.out(scratch), "scratch", DType::F32, {b.chunkRows, b.vocab}))
    return false;
  if (train && (!v.isF32Scalar(v.in(3), "dloss") ||
                !v.hasType(v.out(1), "dh", h.dtype, h.shape) ||
                !v.hasType(v.out(2), "dw", h.dtype, w.shape)))
    return false;
  *out = b;
  return true;
}

} // namespace llmc::contracts
