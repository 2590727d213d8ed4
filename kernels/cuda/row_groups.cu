//===- row_groups.cu - ranges of a mixture of experts' row groups ---------===//
//
// qat_group_ranges and qat_row_ranges (contracts/RowGroups.h) with the
// semantics of kernels/cpu/row_groups.cpp. The offsets stay on the device
// (a captured CUDA graph stays valid): each block checks them, a thread
// folds a group's rows (groups are few, each a few hundred rows), and a
// row finds its group by binary search.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/RowGroups.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/GroupOffsets.cuh"

namespace llmc::cuda {
namespace {

using contracts::RowGroupsBinding;

constexpr float kNaN = __builtin_nanf("");

/// max(a, b), NaN where either is (as the CPU's).
__device__ __forceinline__ float maxKeepingNaN(float a, float b) {
  return a != a || b != b ? kNaN : fmaxf(a, b);
}

__global__ void groupRanges(const float *rows, Offsets offsets, int64_t groups, int64_t m,
                            float *out) {
  const bool valid = validGroupOffsets(offsets, groups, m);
  LLMC_GRID_STRIDE(g, groups) {
    float lo = valid ? 0.0f : kNaN, hi = lo;
    if (valid)
      for (int64_t r = offsets[g]; r < offsets[g + 1]; ++r) {
        const bool first = r == offsets[g];
        lo = first ? rows[2 * r] : maxKeepingNaN(lo, rows[2 * r]);
        hi = first ? rows[2 * r + 1] : maxKeepingNaN(hi, rows[2 * r + 1]);
      }
    out[2 * g] = lo, out[2 * g + 1] = hi;
  }
}

__global__ void rowRanges(const float *groupRange, Offsets offsets, int64_t groups, int64_t m,
                          float *out) {
  const bool valid = validGroupOffsets(offsets, groups, m);
  LLMC_GRID_STRIDE(r, m) {
    float lo = kNaN, hi = kNaN;
    if (valid && r >= offsets[groups]) {
      lo = hi = 0.0f;
    } else if (valid) {
      const int64_t g = groupOf(offsets, groups, r);
      lo = groupRange[2 * g], hi = groupRange[2 * g + 1];
    }
    out[2 * r] = lo, out[2 * r + 1] = hi;
  }
}

class RowGroupsKernel final : public Kernel {
public:
  RowGroupsKernel(const KernelArgs &args, const RowGroupsBinding &b, bool toGroups)
      : b_(b), toGroups_(toGroups), in_(args.inputs[0].as<float>()),
        offsets_{args.inputs[1].data, args.inputs[1].dtype == DType::I64},
        out_(args.outputs[0].as<float>()) {}

  void run(const StepContext &ctx) override {
    if (toGroups_)
      groupRanges<<<gridFor(b_.groups), kBlock, 0, streamOf(ctx)>>>(in_, offsets_, b_.groups,
                                                                    b_.rows, out_);
    else
      rowRanges<<<gridFor(b_.rows), kBlock, 0, streamOf(ctx)>>>(in_, offsets_, b_.groups, b_.rows,
                                                                out_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  RowGroupsBinding b_;
  bool toGroups_;
  const float *in_;
  Offsets offsets_;
  float *out_;
};

std::unique_ptr<Kernel> makeCudaGroupRanges(const KernelArgs &args, std::string &error) {
  RowGroupsBinding b;
  if (!contracts::bindRowGroups("qat_group_ranges", true, args, error, &b))
    return nullptr;
  return std::make_unique<RowGroupsKernel>(args, b, true);
}

std::unique_ptr<Kernel> makeCudaRowRanges(const KernelArgs &args, std::string &error) {
  RowGroupsBinding b;
  if (!contracts::bindRowGroups("qat_row_ranges", false, args, error, &b))
    return nullptr;
  return std::make_unique<RowGroupsKernel>(args, b, false);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "qat_group_ranges", makeCudaGroupRanges);
LLMC_REGISTER_KERNEL(CUDA, "qat_row_ranges", makeCudaRowRanges);

} // namespace llmc::cuda
