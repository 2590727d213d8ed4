//===- row_groups.cpp - ranges of a mixture of experts' row groups --------===//
//
// qat_group_ranges and qat_row_ranges (contracts/RowGroups.h): a few
// thousand rows' [−min, max] pairs folded into a group's, or handed back
// to its rows; serial, a pass over M × 2 floats.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/RowGroups.h"
#include "kernels/cpu/Common.h"

#include <algorithm>
#include <cmath>

namespace llmc::cpu {
namespace {

using contracts::RowGroupsBinding;

/// max(a, b), NaN where either is: a non-finite row makes its group's
/// range, and so its scale and the step, non-finite.
float maxKeepingNaN(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
}

class GroupRangesKernel final : public Kernel {
public:
  GroupRangesKernel(const KernelArgs &args, const RowGroupsBinding &b)
      : b_(b), rows_(args.inputs[0].as<float>()), offsets_(args.inputs[1]),
        out_(args.outputs[0].as<float>()) {}

  void run(const StepContext &) override {
    if (!validGroupOffsets(offsets_, b_.groups, b_.rows)) {
      std::fill(out_, out_ + 2 * b_.groups, kNaN);
      return;
    }
    for (int64_t g = 0; g < b_.groups; ++g) {
      float lo = 0.0f, hi = 0.0f; // an empty group's range
      for (int64_t r = offsets_[g]; r < offsets_[g + 1]; ++r) {
        const bool first = r == offsets_[g];
        lo = first ? rows_[2 * r] : maxKeepingNaN(lo, rows_[2 * r]);
        hi = first ? rows_[2 * r + 1] : maxKeepingNaN(hi, rows_[2 * r + 1]);
      }
      out_[2 * g] = lo, out_[2 * g + 1] = hi;
    }
  }

private:
  RowGroupsBinding b_;
  const float *rows_;
  IdView offsets_;
  float *out_;
};

class RowRangesKernel final : public Kernel {
public:
  RowRangesKernel(const KernelArgs &args, const RowGroupsBinding &b)
      : b_(b), groups_(args.inputs[0].as<float>()), offsets_(args.inputs[1]),
        out_(args.outputs[0].as<float>()) {}

  void run(const StepContext &) override {
    if (!validGroupOffsets(offsets_, b_.groups, b_.rows)) {
      std::fill(out_, out_ + 2 * b_.rows, kNaN);
      return;
    }
    std::fill(out_, out_ + 2 * b_.rows, 0.0f);
    for (int64_t g = 0; g < b_.groups; ++g)
      for (int64_t r = offsets_[g]; r < offsets_[g + 1]; ++r)
        out_[2 * r] = groups_[2 * g], out_[2 * r + 1] = groups_[2 * g + 1];
  }

private:
  RowGroupsBinding b_;
  const float *groups_;
  IdView offsets_;
  float *out_;
};

std::unique_ptr<Kernel> makeGroupRanges(const KernelArgs &args, std::string &error) {
  RowGroupsBinding b;
  if (!contracts::bindRowGroups("qat_group_ranges", true, args, error, &b))
    return nullptr;
  return std::make_unique<GroupRangesKernel>(args, b);
}

std::unique_ptr<Kernel> makeRowRanges(const KernelArgs &args, std::string &error) {
  RowGroupsBinding b;
  if (!contracts::bindRowGroups("qat_row_ranges", false, args, error, &b))
    return nullptr;
  return std::make_unique<RowRangesKernel>(args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "qat_group_ranges", makeGroupRanges);
LLMC_REGISTER_KERNEL(CPU, "qat_row_ranges", makeRowRanges);

} // namespace llmc::cpu
