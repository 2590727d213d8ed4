//===- grouped_matmul.cu - each group of rows times its own weight --------===//
//
// The CUDA twin of kernels/cpu/grouped_matmul.cpp (contracts/
// GroupedMatmul.h). How many rows each group has is data in device memory
// and the step may run as a captured CUDA graph, so the host never reads
// the offsets: every launch covers the shapes' worst case, and each block
// reads the offsets itself.
//
// The tiled device code (kernels/cuda/GroupedKernels.cuh) is shared with
// the fp8 forms (grouped_matmul_fp8.cu).
//
// Speed: bf16 and f16 on tensor cores (WMMA, fp32 sums; GroupedMma.cuh),
// fp32 on CUDA cores (FMA); no split-K, no copy overlap. A weight
// gradient whose group has many rows and whose [K, F] is small has few
// blocks, each looping over all the rows.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/GroupedMatmul.h"
#include "kernels/cuda/GroupedKernels.cuh"

namespace llmc::cuda {
namespace {

using namespace grouped;

using contracts::GroupedMatmulBinding;

template <typename T> class GroupedMatmulKernel final : public Kernel {
public:
  GroupedMatmulKernel(const KernelArgs &args, const GroupedMatmulBinding &b)
      : b_(b), x_(args.inputs[0].as<T>()),
        offsets_{args.inputs[1].data, args.inputs[1].dtype == DType::I64},
        weights_(args.inputs[2].as<T>()), y_(args.outputs[0].as<T>()) {}

  void run(const StepContext &ctx) override {
    if (b_.rows == 0 || b_.f == 0)
      return;
    const dim3 grid(static_cast<unsigned>(ceilDiv(b_.rows, kTileM)),
                    static_cast<unsigned>(ceilDiv(b_.f, kTileN)));
    groupedMatmulKernel<<<grid, kThreads, 0, streamOf(ctx)>>>(
        FloatOperand<T>{x_}, offsets_, FloatOperand<T>{weights_}, y_, b_.rows, b_.k, b_.f,
        b_.groups, b_.transposeB, GroupScales{});
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  GroupedMatmulBinding b_;
  const T *x_;
  Offsets offsets_;
  const T *weights_; ///< [G, K, F] or [G, F, K]
  T *y_;
};

template <typename T> class GroupedMatmulWeightGradKernel final : public Kernel {
public:
  GroupedMatmulWeightGradKernel(const KernelArgs &args, const GroupedMatmulBinding &b)
      : b_(b), x_(args.inputs[0].as<T>()), dy_(args.inputs[1].as<T>()),
        offsets_{args.inputs[2].data, args.inputs[2].dtype == DType::I64},
        dw_(args.outputs[0].as<T>()) {}

  void run(const StepContext &ctx) override {
    if (b_.k == 0 || b_.f == 0)
      return;
    // dw [K, F] = xᵀ·dy, or [F, K] = dyᵀ·x.
    const T *a = b_.transposeB ? dy_ : x_, *b = b_.transposeB ? x_ : dy_;
    const int64_t p = b_.transposeB ? b_.f : b_.k, q = b_.transposeB ? b_.k : b_.f;
    const dim3 grid(static_cast<unsigned>(ceilDiv(p, kTileM) * ceilDiv(q, kTileN)),
                    static_cast<unsigned>(b_.groups));
    groupedWeightGradKernel<<<grid, kThreads, 0, streamOf(ctx)>>>(
        FloatOperand<T>{a}, p, FloatOperand<T>{b}, q, offsets_, b_.rows, b_.groups, GroupScales{},
        dw_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  GroupedMatmulBinding b_;
  const T *x_, *dy_;
  Offsets offsets_;
  T *dw_; ///< [G, K, F] or [G, F, K]
};

std::unique_ptr<Kernel> makeCudaGroupedMatmul(const KernelArgs &args, std::string &error) {
  GroupedMatmulBinding binding;
  if (!contracts::bindGroupedMatmul(args, error, &binding))
    return nullptr;
  Validator v("grouped_matmul", args, error);
  if (ceilDiv(binding.f, kTileN) > kMaxGridY)
    return v.reject("F = " + std::to_string(binding.f) + " needs more than " +
                    std::to_string(kMaxGridY) + " column tiles of " + std::to_string(kTileN));
  return makeFloatKernel<GroupedMatmulKernel>(binding.dtype, args, binding);
}

std::unique_ptr<Kernel> makeCudaGroupedMatmulWeightGrad(const KernelArgs &args,
                                                        std::string &error) {
  GroupedMatmulBinding binding;
  if (!contracts::bindGroupedMatmulWeightGrad(args, error, &binding))
    return nullptr;
  Validator v("grouped_matmul_weight_grad", args, error);
  if (binding.groups > kMaxGridY)
    return v.reject(std::to_string(binding.groups) + " groups are more than the " +
                    std::to_string(kMaxGridY) + " the grid holds");
  if (ceilDiv(binding.k, kTileM) * ceilDiv(binding.f, kTileN) > INT_MAX)
    return v.reject("dw [" + std::to_string(binding.k) + ", " + std::to_string(binding.f) +
                    "] has more tiles than a grid holds");
  return makeFloatKernel<GroupedMatmulWeightGradKernel>(binding.dtype, args, binding);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "grouped_matmul", makeCudaGroupedMatmul);
LLMC_REGISTER_KERNEL(CUDA, "grouped_matmul_weight_grad", makeCudaGroupedMatmulWeightGrad);

} // namespace llmc::cuda
