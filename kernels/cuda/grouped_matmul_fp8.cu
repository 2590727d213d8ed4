//===- grouped_matmul_fp8.cu - the experts' products on fp8 codes ---------===//
//
// qat_grouped_matmul_fp8 and qat_grouped_matmul_weight_grad_fp8 with the
// semantics of kernels/cpu/grouped_matmul_fp8.cpp (contracts/
// GroupedMatmulFp8.h), on the tiled device code of grouped_matmul.cu
// (kernels/cuda/GroupedKernels.cuh): each code is decoded to its exact
// value as the tiles are filled (common/Fp8.h's decode, the CPU's table)
// and staged in bf16, which holds every E4M3 and E5M2 value; the products
// run on bf16 tensor cores with fp32 sums, scaled once by the group's two
// scales, read from device memory. As for grouped_matmul, the offsets are
// never read by the host, so the kernels stay valid inside a captured
// CUDA graph.
//
// Speed: bf16 tensor cores by default. With LLMC_CUDA_FP8_MMA=1 when the
// kernels bind, the codes are staged as they are and multiplied on fp8
// tensor cores (GroupedMmaFp8.cuh: mma.sync m16n8k32, sm_89 and newer; a
// build whose kernels are older is refused then); it becomes the default
// once a GPU has run it. The dense products run on cuBLASLt's fp8 GEMMs
// (matmul_fp8.cu). What this form saves beside that is memory: the routed
// rows, dY and the experts' weights are kept one byte an element.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/GroupedMatmulFp8.h"
#include "kernels/cuda/GroupedKernels.cuh"

#include <climits>
#include <string>

namespace llmc::cuda {
namespace {

using namespace grouped;
using contracts::GroupedMatmulFp8Binding;

Offsets offsetsOf(const TensorView &t) { return {t.data, t.dtype == DType::I64}; }

/// Whether the products run on fp8 tensor cores (Device.h's
/// fp8TensorCores), `kernel` (their fp8 form, a kernel address) built for a
/// GPU that has them; false with `error` set for a bad choice, or for
/// kernels built older than sm_89.
bool fp8RateChosen(const void *kernel, bool &on, std::string &error) {
  if (!cuda::fp8TensorCores(on, error) || !on)
    return error.empty();
  cudaFuncAttributes attributes{};
  const cudaError_t status = cudaFuncGetAttributes(&attributes, kernel);
  if (status != cudaSuccess) {
    error = std::string("fp8 tensor cores: cannot read the kernel's attributes (") +
            cudaGetErrorString(status) + ")";
    return false;
  }
  if (attributes.binaryVersion < 89) {
    error = "fp8 tensor cores (--fp8-tensor-cores, LLMC_CUDA_FP8_MMA=1) need sm_89 or newer; "
            "these kernels are built for sm_" +
            std::to_string(attributes.binaryVersion);
    return false;
  }
  on = true;
  return true;
}

template <typename T> class GroupedMatmulFp8Kernel final : public Kernel {
public:
  GroupedMatmulFp8Kernel(const KernelArgs &args, const GroupedMatmulFp8Binding &b, bool fp8Rate)
      : fp8Rate_(fp8Rate), d_(b.dims), x_{args.inputs[0].as<uint8_t>(), b.a},
        offsets_(offsetsOf(args.inputs[2])), w_{args.inputs[3].as<uint8_t>(), b.b},
        scales_{args.inputs[1].as<float>(), args.inputs[4].as<float>(), b.aScalePerGroup,
                b.bScalePerGroup},
        y_(args.outputs[0].as<T>()) {}

  void run(const StepContext &ctx) override {
    if (d_.rows == 0 || d_.f == 0)
      return;
    const dim3 grid(static_cast<unsigned>(ceilDiv(d_.rows, kTileM)),
                    static_cast<unsigned>(ceilDiv(d_.f, kTileN)));
    auto launch = [&](auto kernel) {
      kernel<<<grid, kThreads, 0, streamOf(ctx)>>>(x_, offsets_, w_, y_, d_.rows, d_.k, d_.f,
                                                   d_.groups, d_.transposeB, scales_);
    };
    if (fp8Rate_)
      launch(groupedMatmulKernel<Fp8Operand, Fp8Operand, T, true>);
    else
      launch(groupedMatmulKernel<Fp8Operand, Fp8Operand, T, false>);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  bool fp8Rate_;
  contracts::GroupedMatmulBinding d_;
  Fp8Operand x_;
  Offsets offsets_;
  Fp8Operand w_; ///< [G, K, F] or [G, F, K]
  GroupScales scales_;
  T *y_;
};

template <typename T> class GroupedMatmulWeightGradFp8Kernel final : public Kernel {
public:
  GroupedMatmulWeightGradFp8Kernel(const KernelArgs &args, const GroupedMatmulFp8Binding &b,
                                   bool fp8Rate)
      : fp8Rate_(fp8Rate), d_(b.dims), x_{args.inputs[0].as<uint8_t>(), b.a},
        dy_{args.inputs[2].as<uint8_t>(), b.b}, offsets_(offsetsOf(args.inputs[4])),
        scales_{args.inputs[1].as<float>(), args.inputs[3].as<float>(), b.aScalePerGroup,
                b.bScalePerGroup},
        dw_(args.outputs[0].as<T>()) {}

  void run(const StepContext &ctx) override {
    if (d_.k == 0 || d_.f == 0)
      return;
    // dw [K, F] = xᵀ·dy, or [F, K] = dyᵀ·x.
    const bool t = d_.transposeB;
    const int64_t p = t ? d_.f : d_.k, q = t ? d_.k : d_.f;
    const dim3 grid(static_cast<unsigned>(ceilDiv(p, kTileM) * ceilDiv(q, kTileN)),
                    static_cast<unsigned>(d_.groups));
    auto launch = [&](auto kernel) {
      kernel<<<grid, kThreads, 0, streamOf(ctx)>>>(t ? dy_ : x_, p, t ? x_ : dy_, q, offsets_,
                                                   d_.rows, d_.groups, scales_, dw_);
    };
    if (fp8Rate_)
      launch(groupedWeightGradKernel<Fp8Operand, Fp8Operand, T, true>);
    else
      launch(groupedWeightGradKernel<Fp8Operand, Fp8Operand, T, false>);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  bool fp8Rate_;
  contracts::GroupedMatmulBinding d_;
  Fp8Operand x_, dy_;
  Offsets offsets_;
  GroupScales scales_;
  T *dw_; ///< [G, K, F] or [G, F, K]
};

std::unique_ptr<Kernel> makeCudaGroupedMatmulFp8(const KernelArgs &args, std::string &error) {
  GroupedMatmulFp8Binding b;
  if (!contracts::bindGroupedMatmulFp8(args, error, &b))
    return nullptr;
  Validator v("qat_grouped_matmul_fp8", args, error);
  if (ceilDiv(b.dims.f, kTileN) > kMaxGridY)
    return v.reject("F = " + std::to_string(b.dims.f) + " needs more than " +
                    std::to_string(kMaxGridY) + " column tiles of " + std::to_string(kTileN));
  bool fp8Rate = false;
  std::string why;
  if (!fp8RateChosen(
          reinterpret_cast<const void *>(groupedMatmulKernel<Fp8Operand, Fp8Operand, float, true>),
          fp8Rate, why))
    return v.reject(why);
  return makeFloatKernel<GroupedMatmulFp8Kernel>(b.dims.dtype, args, b, fp8Rate);
}

std::unique_ptr<Kernel> makeCudaGroupedMatmulWeightGradFp8(const KernelArgs &args,
                                                           std::string &error) {
  GroupedMatmulFp8Binding b;
  if (!contracts::bindGroupedMatmulWeightGradFp8(args, error, &b))
    return nullptr;
  Validator v("qat_grouped_matmul_weight_grad_fp8", args, error);
  if (b.dims.groups > kMaxGridY)
    return v.reject(std::to_string(b.dims.groups) + " groups are more than the " +
                    std::to_string(kMaxGridY) + " the grid holds");
  if (ceilDiv(b.dims.k, kTileM) * ceilDiv(b.dims.f, kTileN) > INT_MAX)
    return v.reject("dw has more tiles than a grid holds");
  bool fp8Rate = false;
  std::string why;
  if (!fp8RateChosen(reinterpret_cast<const void *>(
                         groupedWeightGradKernel<Fp8Operand, Fp8Operand, float, true>),
                     fp8Rate, why))
    return v.reject(why);
  return makeFloatKernel<GroupedMatmulWeightGradFp8Kernel>(b.dims.dtype, args, b, fp8Rate);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "qat_grouped_matmul_fp8", makeCudaGroupedMatmulFp8);
LLMC_REGISTER_KERNEL(CUDA, "qat_grouped_matmul_weight_grad_fp8",
                     makeCudaGroupedMatmulWeightGradFp8);

} // namespace llmc::cuda
