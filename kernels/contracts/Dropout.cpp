//===- Dropout.cpp - binding contract of dropout --------------------------===//
//
// The checks and derivations kernels/cpu/dropout.cpp and
// kernels/cuda/dropout.cu share.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Dropout.h"

#include "kernels/Validator.h"

#include <algorithm>

namespace llmc::contracts {
namespace {

/// Where a piece lies in the global tensor: the global index of the first
/// element of each local row (a row = the last dimension).
std::vector<uint64_t> rowStarts(const std::vector<int64_t> &local,
                                const std::vector<int64_t> &global,
                                const std::vector<int64_t> &offsets) {
  size_t rank = local.size();
  int64_t width = rank ? local.back() : 1, rows = product(local) / std::max<int64_t>(width, 1);
  std::vector<uint64_t> starts(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, flat = 0, stride = 1;
    for (size_t d = rank; d-- > 0;) {
      int64_t coord = (d + 1 == rank ? 0 : rest % local[d]) + offsets[d];
      if (d + 1 != rank) rest /= local[d];
      flat += coord * stride;
      stride *= global[d];
    }
    starts[static_cast<size_t>(r)] = static_cast<uint64_t>(flat);
  }
  return starts;
}

} // namespace

bool bindDropoutPiece(Validator &v, const std::vector<int64_t> &local,
                      std::vector<uint64_t> *starts) {
  starts->clear();
  if (!v.attrs().hasInts("global_shape") && !v.attrs().hasInts("offsets")) return true;
  std::vector<int64_t> global, offsets;
  if (!v.intsAttr("global_shape", &global) || !v.intsAttr("offsets", &offsets)) return false;
  if (global.size() != local.size() || offsets.size() != local.size())
    return v.fail("global_shape and offsets need one entry per dimension of " +
                  describeType(v.out(0).dtype, local));
  for (size_t d = 0; d < local.size(); ++d)
    if (offsets[d] < 0 || offsets[d] + local[d] > global[d])
      return v.fail("dimension " + std::to_string(d) + ": a piece of " +
                    std::to_string(local[d]) + " at offset " + std::to_string(offsets[d]) +
                    " does not fit in " + std::to_string(global[d]));
  *starts = rowStarts(local, global, offsets);
  return true;
}

bool bindDropout(const KernelArgs &args, std::string &error, DropoutBinding *out) {
  Validator v("dropout", args, error);
  double rate;
  int64_t seed;
  if (!v.arity(1, 1) || !v.floatAttr("rate", &rate)) return false;
  if (!args.attrs.hasInt("seed")) return v.fail("missing int attribute 'seed'");
  if (!v.intAttr("seed", &seed, 0)) return false;
  if (!(rate >= 0.0 && rate < 1.0))
    return v.fail("attribute 'rate' must be in [0, 1), got " + std::to_string(rate));
  if (!v.isFloat(v.in(0), "x") || !v.hasType(v.out(0), "out", v.in(0).dtype, v.in(0).shape))
    return false;
  std::vector<uint64_t> starts;
  if (!bindDropoutPiece(v, v.in(0).shape, &starts)) return false;
  out->dtype = v.in(0).dtype;
  out->rate = rate;
  out->seed = seed;
  out->rowStarts = std::move(starts);
  return true;
}

} // namespace llmc::contracts
