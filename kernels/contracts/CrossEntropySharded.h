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

#include <cstdint>
#include <string>

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
bool bindReduceMax(const KernelArgs &args, std::string &error, ReduceMaxBinding *out);

/// cross_entropy_partial and cross_entropy_partial_grad: logits
/// [rows × width] hold the classes [classOffset, classOffset + width) of
/// numClasses; columns past numClasses are padding (a vocabulary padded to
/// a multiple of the ranks).
struct CrossEntropyPartialBinding {
  DType dtype = DType::F32; ///< of the logits
  int64_t rows = 0, width = 0;
  int64_t classOffset = 0, numClasses = 0, ignoreIndex = -1;
};
bool bindCrossEntropyPartial(const KernelArgs &args, std::string &error,
                             CrossEntropyPartialBinding *out);
/// The attributes placing a shard of `width` classes (class_offset,
/// num_classes, ignore_index) into `out`, for every kernel of a sharded loss.
bool bindClassShard(Validator &v, int64_t width, CrossEntropyPartialBinding *out);
bool bindCrossEntropyPartialGrad(const KernelArgs &args, std::string &error,
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
    if (target == ignoreIndex) return -1;
    if (target < 0 || target >= total) return -2;
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
bool bindCrossEntropyFinish(const KernelArgs &args, std::string &error,
                            CrossEntropyFinishBinding *out);
bool bindCrossEntropyFinishGrad(const KernelArgs &args, std::string &error,
                                CrossEntropyFinishBinding *out);

} // namespace llmc::contracts

#endif
