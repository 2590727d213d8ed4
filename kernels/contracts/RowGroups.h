//===- RowGroups.h - contract of the row-group range kernels ----*- C++ -*-===//
//
// qat_group_ranges(rows [M, 2] f32, offsets [G + 1]) -> [G, 2] f32: each
// group's range, the elementwise max of its rows' ([0, 0] for an empty
// group; rows past offsets[G] left out).
// qat_row_ranges(groups [G, 2] f32, offsets [G + 1]) -> [M, 2] f32: each
// row's group's range ([0, 0] past offsets[G]).
//
// The offsets (i32 or i64) are data, checked on every run as the grouped
// products check them (contracts/GroupedMatmul.h): invalid ones make every
// output NaN. Both backends bind through here.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_ROWGROUPS_H
#define LLMC_KERNELS_CONTRACTS_ROWGROUPS_H

#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <string>

namespace llmc::contracts {

struct RowGroupsBinding {
  int64_t rows = 0, groups = 0; ///< M, G
};

/// `name`(ranges, offsets) -> out: ranges [a, 2], offsets [G + 1], out
/// [b, 2], where (a, b) is (M, G) for qat_group_ranges and (G, M) for
/// qat_row_ranges.
inline bool bindRowGroups(const char *name, bool toGroups, const KernelArgs &args,
                          std::string &error, RowGroupsBinding *out) {
  Validator v(name, args, error);
  if (!v.arity(2, 1))
    return false;
  const TensorView &ranges = v.in(0), &offsets = v.in(1), &result = v.out(0);
  if (!v.isIndex(offsets, "offsets"))
    return false;
  if (offsets.rank() != 1 || offsets.dim(0) < 2)
    return v.fail("offsets must be [G + 1] for G >= 1 groups, got " + offsets.describe());
  out->groups = offsets.dim(0) - 1;
  if (!v.hasDType(ranges, "ranges", DType::F32) || !v.hasRank(ranges, "ranges", 2) ||
      !v.hasDType(result, "result", DType::F32) || !v.hasRank(result, "result", 2))
    return false;
  const TensorView &rowSide = toGroups ? ranges : result, &groupSide = toGroups ? result : ranges;
  out->rows = rowSide.dim(0);
  if (!v.hasType(rowSide, toGroups ? "ranges" : "result", DType::F32, {out->rows, 2}) ||
      !v.hasType(groupSide, toGroups ? "result" : "ranges", DType::F32, {out->groups, 2}))
    return false;
  return true;
}

} // namespace llmc::contracts

#endif
