//===- Dropout.h - binding contract of dropout -------------------*- C++ -*-===//
//
// What both backends check and derive when they bind dropout: the rate and
// seed, and, for one rank's piece of a larger tensor (`global_shape` and
// `offsets`), the global index of the first element of each local row. The
// CPU and CUDA factories call bindDropout and add only what is specific to
// their backend (the CUDA kernel uploads the row starts).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_DROPOUT_H
#define LLMC_KERNELS_CONTRACTS_DROPOUT_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc {
class Validator;
}

namespace llmc::contracts {

struct DropoutBinding {
  DType dtype = DType::F32; ///< of x and out
  double rate = 0;
  int64_t seed = 0;
  /// The global index of the first element of each local row (a row = the
  /// last dimension); empty when x is the whole tensor.
  std::vector<uint64_t> rowStarts;
};
inline bool bindDropout(const KernelArgs &args, std::string &error, DropoutBinding *out);

/// The global index of the first element of each row of a piece of shape
/// `local`, read from the attributes `global_shape` and `offsets` when the
/// kernel has them (`starts` is left empty when it has neither: the local
/// index is the global one). Shared by dropout and fused_elementwise,
/// whose dropout instructions draw the same mask.
inline bool bindDropoutPiece(Validator &v, const std::vector<int64_t> &local,
                             std::vector<uint64_t> *starts);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace dropout_impl {

/// Where a piece lies in the global tensor: the global index of the first
/// element of each local row (a row = the last dimension).
inline std::vector<uint64_t> rowStarts(const std::vector<int64_t> &local,
                                       const std::vector<int64_t> &global,
                                       const std::vector<int64_t> &offsets) {
  size_t rank = local.size();
  int64_t width = rank ? local.back() : 1, rows = product(local) / std::max<int64_t>(width, 1);
  std::vector<uint64_t> starts(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, flat = 0, stride = 1;
    for (size_t d = rank; d-- > 0;) {
      int64_t coord = (d + 1 == rank ? 0 : rest % local[d]) + offsets[d];
      if (d + 1 != rank)
        rest /= local[d];
      flat += coord * stride;
      stride *= global[d];
    }
    starts[static_cast<size_t>(r)] = static_cast<uint64_t>(flat);
  }
  return starts;
}

} // namespace dropout_impl
using namespace dropout_impl;

inline bool bindDropoutPiece(Validator &v, const std::vector<int64_t> &local,
                             std::vector<uint64_t> *starts) {
  starts->clear();
  if (!v.attrs().hasInts("global_shape") && !v.attrs().hasInts("offsets"))
    return true;
  std::vector<int64_t> global, offsets;
  if (!v.intsAttr("global_shape", &global) || !v.intsAttr("offsets", &offsets))
    return false;
  if (global.size() != local.size() || offsets.size() != local.size())
    return v.fail("global_shape and offsets need one entry per dimension of " +
                  describeType(v.out(0).dtype, local));
  for (size_t d = 0; d < local.size(); ++d)
    if (offsets[d] < 0 || offsets[d] + local[d] > global[d])
      return v.fail("dimension " + std::to_string(d) + ": a piece of " + std::to_string(local[d]) +
                    " at offset " + std::to_string(offsets[d]) + " does not fit in " +
                    std::to_string(global[d]));
  *starts = rowStarts(local, global, offsets);
  return true;
}

inline bool bindDropout(const KernelArgs &args, std::string &error, DropoutBinding *out) {
  Validator v("dropout", args, error);
  double rate;
  int64_t seed;
  if (!v.arity(1, 1) || !v.floatAttr("rate", &rate))
    return false;
  if (!args.attrs.hasInt("seed"))
    return v.fail("missing int attribute 'seed'");
  if (!v.intAttr("seed", &seed, 0))
    return false;
  if (!(rate >= 0.0 && rate < 1.0))
    return v.fail("attribute 'rate' must be in [0, 1), got " + std::to_string(rate));
  if (!v.isFloat(v.in(0), "x") || !v.hasType(v.out(0), "out", v.in(0).dtype, v.in(0).shape))
    return false;
  std::vector<uint64_t> starts;
  if (!bindDropoutPiece(v, v.in(0).shape, &starts))
    return false;
  out->dtype = v.in(0).dtype;
  out->rate = rate;
  out->seed = seed;
  out->rowStarts = std::move(starts);
  return true;
}

} // namespace llmc::contracts

#endif
