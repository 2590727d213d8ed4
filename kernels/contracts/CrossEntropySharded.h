//===- CrossEntropySharded.h - binding contract of sharded cross-entropy -*- C++ -*-===//
//
// What both backends check and derive when they bind the pieces of
// vocabulary-parallel cross-entropy: reduce_max, cross_entropy_partial(_grad)
// and cross_entropy_finish(_grad). Each bind function validates a KernelArgs
// with the shared Validator and fills a plain struct with the numbers the
// kernels need; the CPU and CUDA factories call it and add only what is
// specific to their backend.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_CROSSENTROPYSHARDED_H
#define LLMC_KERNELS_CONTRACTS_CROSSENTROPYSHARDED_H

#include "common/HostDevice.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc {
class Validator;
} // namespace llmc

namespace llmc::contracts {

/// reduce_max: out[rows] = max over the first `valid` columns of each row of
/// x[rows × width] (all of them unless `num_classes` says the shard is the
/// padded tail of a vocabulary: then the classes past it are padding).
struct ReduceMaxBinding {
  DType dtype = DType::F32; ///< of x
  int64_t rows = 0, width = 0, valid = 0;
};
inline bool bindReduceMax(const KernelArgs &args, std::string &error, ReduceMaxBinding *out);

/// cross_entropy_partial and cross_entropy_partial_grad: logits
/// [rows × width] hold the classes [classOffset, classOffset + width) of
/// numClasses; columns past numClasses are padding (a vocabulary padded to
/// a multiple of the ranks).
struct CrossEntropyPartialBinding {
  DType dtype = DType::F32; ///< of the logits
  int64_t rows = 0, width = 0;
  int64_t classOffset = 0, numClasses = 0, ignoreIndex = -1;
};
inline bool bindCrossEntropyPartial(const KernelArgs &args, std::string &error,
                                    CrossEntropyPartialBinding *out);
/// The attributes placing a shard of `width` classes (class_offset,
/// num_classes, ignore_index) into `out`, for every kernel of a sharded loss.
inline bool bindClassShard(Validator &v, int64_t width, CrossEntropyPartialBinding *out);
inline bool bindCrossEntropyPartialGrad(const KernelArgs &args, std::string &error,
                                        CrossEntropyPartialBinding *out);

/// Which local column a target is, on both backends (host and device).
struct ClassShard {
  int64_t width, offset, total, ignoreIndex;

  /// Columns that hold classes; the rest of a padded vocabulary's last
  /// shard (classes at or past `total`) is padding, excluded from the sum
  /// and given no gradient.
  LLMC_HOST_DEVICE int64_t valid() const {
    int64_t n = total - offset;
    return n < 0 ? 0 : n < width ? n : width;
  }

  /// The local column of `target`; -1 for another shard's class or an
  /// ignored target, -2 for an invalid target.
  LLMC_HOST_DEVICE int64_t column(int64_t target) const {
    if (target == ignoreIndex)
      return -1;
    if (target < 0 || target >= total)
      return -2;
    int64_t c = target - offset;
    return c >= 0 && c < width ? c : -1;
  }
};
inline ClassShard classShard(const CrossEntropyPartialBinding &b) {
  return {b.width, b.classOffset, b.numClasses, b.ignoreIndex};
}

/// cross_entropy_finish and cross_entropy_finish_grad: per-row statistics of
/// `rows` targets.
struct CrossEntropyFinishBinding {
  int64_t rows = 0, ignoreIndex = -1;
};
inline bool bindCrossEntropyFinish(const KernelArgs &args, std::string &error,
                                   CrossEntropyFinishBinding *out);
inline bool bindCrossEntropyFinishGrad(const KernelArgs &args, std::string &error,
                                       CrossEntropyFinishBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

inline bool bindClassShard(Validator &v, int64_t width, CrossEntropyPartialBinding *out) {
  int64_t offset, total, ignoreIndex;
  if (!v.intAttr("class_offset", &offset, 0) || !v.intAttr("ignore_index", &ignoreIndex, -1))
    return false;
  if (!v.attrs().hasInt("num_classes"))
    return v.fail("missing int attribute 'num_classes'");
  if (!v.intAttr("num_classes", &total, 0))
    return false;
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

namespace cross_entropy_sharded_impl {

/// f32 `rows` (the shape of the logits without their last dimension).
inline bool isRowStat(Validator &v, const TensorView &t, const char *what,
                      const std::vector<int64_t> &rows) {
  return v.hasType(t, what, DType::F32, rows);
}

inline std::vector<int64_t> rowsOf(const TensorView &logits) {
  return std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1);
}

/// logits `rows × [V_local]`, targets `rows`, shift `rows`; fills `out`.
inline bool checkPartial(Validator &v, CrossEntropyPartialBinding *out) {
  const TensorView &logits = v.in(0), &targets = v.in(1);
  if (!v.isFloat(logits, "logits"))
    return false;
  if (logits.rank() < 1)
    return v.fail("logits must have rank >= 1, got " + logits.describe());
  std::vector<int64_t> rows = rowsOf(logits);
  if (!v.isIndex(targets, "targets") || !v.hasType(targets, "targets", targets.dtype, rows) ||
      !isRowStat(v, v.in(2), "shift", rows) || !bindClassShard(v, logits.dim(-1), out))
    return false;
  out->dtype = logits.dtype;
  out->rows = product(rows);
  out->width = logits.dim(-1);
  return true;
}

} // namespace cross_entropy_sharded_impl
using namespace cross_entropy_sharded_impl;

inline bool bindReduceMax(const KernelArgs &args, std::string &error, ReduceMaxBinding *out) {
  Validator v("reduce_max", args, error);
  if (!v.arity(1, 1) || !v.isFloat(v.in(0), "x"))
    return false;
  if (v.in(0).rank() < 1 || v.in(0).dim(-1) < 1)
    return v.fail("x must have a non-empty last dimension, got " + v.in(0).describe());
  const std::vector<int64_t> rows = rowsOf(v.in(0));
  if (!isRowStat(v, v.out(0), "out", rows))
    return false;
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

inline bool bindCrossEntropyPartial(const KernelArgs &args, std::string &error,
                                    CrossEntropyPartialBinding *out) {
  Validator v("cross_entropy_partial", args, error);
  if (!v.arity(3, 2) || !checkPartial(v, out))
    return false;
  std::vector<int64_t> rows = rowsOf(v.in(0));
  return isRowStat(v, v.out(0), "sumexp", rows) && isRowStat(v, v.out(1), "target_logit", rows);
}

inline bool bindCrossEntropyPartialGrad(const KernelArgs &args, std::string &error,
                                        CrossEntropyPartialBinding *out) {
  Validator v("cross_entropy_partial_grad", args, error);
  if (!v.arity(5, 1) || !checkPartial(v, out))
    return false;
  std::vector<int64_t> rows = rowsOf(v.in(0));
  return isRowStat(v, v.in(3), "dsumexp", rows) && isRowStat(v, v.in(4), "dtarget_logit", rows) &&
         v.hasType(v.out(0), "dlogits", v.in(0).dtype, v.in(0).shape);
}

inline bool bindCrossEntropyFinish(const KernelArgs &args, std::string &error,
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

inline bool bindCrossEntropyFinishGrad(const KernelArgs &args, std::string &error,
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

#endif
