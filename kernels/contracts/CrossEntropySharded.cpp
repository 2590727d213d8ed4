//===- CrossEntropySharded.cpp - binding contract of sharded cross-entropy ===//
//
// The checks and derivations that kernels/{cpu,cuda}/cross_entropy_sharded
// and kernels/{cpu,cuda}/reduce_max share.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/CrossEntropySharded.h"

#include "kernels/Validator.h"

#include <algorithm>
#include <vector>

namespace llmc::contracts {

bool bindClassShard(Validator &v, int64_t width, CrossEntropyPartialBinding *out) {
  int64_t offset, total, ignoreIndex;
  if (!v.intAttr("class_offset", &offset, 0) || !v.intAttr("ignore_index", &ignoreIndex, -1))
    return false;
  if (!v.attrs().hasInt("num_classes")) return v.fail("missing int attribute 'num_classes'");
  if (!v.intAttr("num_classes", &total, 0)) return false;
  // Classes past num_classes are padding of the last shards of a vocabulary
  // padded to a multiple of the ranks (equal shards: the offset is a
  // multiple of the width).
  if (offset < 0 || total < 1 || (offset + width > total && offset % width != 0))
    return v.fail("classes [" + std::to_string(offset) + ", " + std::to_string(offset + width) +
                  ") do not fit in num_classes " + std::to_string(total));
  out->classOffset = offset;
  out->numClasses = total;
  out->ignoreIndex = ignoreIndex;
  return true;
}

namespace {

/// f32 `rows` (the shape of the logits without their last dimension).
bool isRowStat(Validator &v, const TensorView &t, const char *what,
               const std::vector<int64_t> &rows) {
  return v.hasType(t, what, DType::F32, rows);
}

std::vector<int64_t> rowsOf(const TensorView &logits) {
  return std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1);
}

/// logits `rows × [V_local]`, targets `rows`, shift `rows`; fills `out`.
bool checkPartial(Validator &v, CrossEntropyPartialBinding *out) {
  const TensorView &logits = v.in(0), &targets = v.in(1);
  if (!v.isFloat(logits, "logits")) return false;
  if (logits.rank() < 1) return v.fail("logits must have rank >= 1, got " + logits.describe());
  std::vector<int64_t> rows = rowsOf(logits);
  if (!v.isIndex(targets, "targets") || !v.hasType(targets, "targets", targets.dtype, rows) ||
      !isRowStat(v, v.in(2), "shift", rows) || !bindClassShard(v, logits.dim(-1), out))
    return false;
  out->dtype = logits.dtype;
  out->rows = product(rows);
  out->width = logits.dim(-1);
  return true;
}

} // namespace

bool bindReduceMax(const KernelArgs &args, std::string &error, ReduceMaxBinding *out) {
  Validator v("reduce_max", args, error);
  if (!v.arity(1, 1) || !v.isFloat(v.in(0), "x")) return false;
  if (v.in(0).rank() < 1 || v.in(0).dim(-1) < 1)
    return v.fail("x must have a non-empty last dimension, got " + v.in(0).describe());
  const std::vector<int64_t> rows = rowsOf(v.in(0));
  if (!isRowStat(v, v.out(0), "out", rows)) return false;
  // Optional: the shard's classes [class_offset, class_offset + width) of
  // num_classes, the ones past num_classes padding.
  int64_t offset, total, width = v.in(0).dim(-1);
  if (!v.intAttr("class_offset", &offset, 0) || !v.intAttr("num_classes", &total, 0))
    return false;
  if (offset < 0 || total < 0)
    return v.fail("class_offset and num_classes must be >= 0");
  int64_t valid = total == 0 ? width : std::max<int64_t>(0, std::min(width, total - offset));
  *out = {v.in(0).dtype, product(rows), width, valid};
  return true;
}

bool bindCrossEntropyPartial(const KernelArgs &args, std::string &error,
                             CrossEntropyPartialBinding *out) {
  Validator v("cross_entropy_partial", args, error);
  if (!v.arity(3, 2) || !checkPartial(v, out)) return false;
  std::vector<int64_t> rows = rowsOf(v.in(0));
  return isRowStat(v, v.out(0), "sumexp", rows) && isRowStat(v, v.out(1), "target_logit", rows);
}

bool bindCrossEntropyPartialGrad(const KernelArgs &args, std::string &error,
                                 CrossEntropyPartialBinding *out) {
  Validator v("cross_entropy_partial_grad", args, error);
  if (!v.arity(5, 1) || !checkPartial(v, out)) return false;
  std::vector<int64_t> rows = rowsOf(v.in(0));
  return isRowStat(v, v.in(3), "dsumexp", rows) && isRowStat(v, v.in(4), "dtarget_logit", rows) &&
         v.hasType(v.out(0), "dlogits", v.in(0).dtype, v.in(0).shape);
}

bool bindCrossEntropyFinish(const KernelArgs &args, std::string &error,
                            CrossEntropyFinishBinding *out) {
  Validator v("cross_entropy_finish", args, error);
  int64_t ignoreIndex;
  if (!v.arity(4, 1) || !v.intAttr("ignore_index", &ignoreIndex, -1) ||
      !v.isIndex(v.in(3), "targets"))
    return false;
  const std::vector<int64_t> &rows = v.in(3).shape;
  if (!isRowStat(v, v.in(0), "sumexp", rows) || !isRowStat(v, v.in(1), "shift", rows) ||
      !isRowStat(v, v.in(2), "target_logit", rows) || !v.isF32Scalar(v.out(0), "loss"))
    return false;
  *out = {product(rows), ignoreIndex};
  return true;
}

bool bindCrossEntropyFinishGrad(const KernelArgs &args, std::string &error,
                                CrossEntropyFinishBinding *out) {
  Validator v("cross_entropy_finish_grad", args, error);
  int64_t ignoreIndex;
  if (!v.arity(3, 3) || !v.intAttr("ignore_index", &ignoreIndex, -1) ||
      !v.isIndex(v.in(1), "targets") || !v.isF32Scalar(v.in(2), "dloss"))
    return false;
  const std::vector<int64_t> &rows = v.in(1).shape;
  if (!isRowStat(v, v.in(0), "sumexp", rows) || !isRowStat(v, v.out(0), "dsumexp", rows) ||
      !isRowStat(v, v.out(1), "dshift", rows) || !isRowStat(v, v.out(2), "dtarget_logit", rows))
    return false;
  *out = {product(rows), ignoreIndex};
  return true;
}

} // namespace llmc::contracts
