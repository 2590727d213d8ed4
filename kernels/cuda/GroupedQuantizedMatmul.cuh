//===- GroupedQuantizedMatmul.cuh - experts over quantized storage -*- CUDA -*-===//
//
// The CUDA kernel behind grouped_matmul_int and grouped_matmul_nf4
// (contracts/QuantizedMatmul.h), as kernels/cpu/QuantizedMatmul.h's
// GroupedQuantizedMatmulKernel is the CPU one: y's rows of expert g = x's
// rows · expert g's slice of the stacked weights, each weight read from
// its codes by an Element functor (`__device__ float operator()(int64_t g,
// int64_t i) const`, element i of expert g's slice flattened row-major).
//
// Simple and graph-safe first: one thread per output, a dot product over K
// in fp32 (weights expanded in registers, never stored). The offsets stay
// in device memory, as grouped_matmul.cu reads them: each thread checks
// them (offsets[0] = 0, never decreasing, offsets[G] <= M) and writes NaN
// when they are invalid, zero for a row past the last group, else finds
// its row's expert by binary search. Speed is not the point here: no
// tiles, no tensor cores.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_GROUPEDQUANTIZEDMATMUL_CUH
#define LLMC_KERNELS_CUDA_GROUPEDQUANTIZEDMATMUL_CUH

#include "kernels/contracts/QuantizedMatmul.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/GroupOffsets.cuh"

namespace llmc::cuda {
namespace grouped_quantized {

template <typename T, typename Element>
__global__ void groupedProduct(const T *x, Offsets offsets, Element element, T *y, int64_t rows,
                               int64_t k, int64_t n, int64_t groups, bool transposeB) {
  const bool valid = validGroupOffsets(offsets, groups, rows);
  LLMC_GRID_STRIDE(e, rows * n) {
    const int64_t r = e / n, c = e % n;
    if (!valid) {
      store(y, e, __int_as_float(0x7fc00000));
      continue;
    }
    if (r >= offsets[groups]) {
      store(y, e, 0.0f);
      continue;
    }
    const int64_t g = groupOf(offsets, groups, r);
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p)
      acc = fmaf(load(x, r * k + p), element(g, transposeB ? c * k + p : p * n + c), acc);
    store(y, e, acc);
  }
}

template <typename T, typename Element> class GroupedQuantizedMatmulKernel final : public Kernel {
public:
  GroupedQuantizedMatmulKernel(const KernelArgs &args, const contracts::GroupedQuantizedProduct &d,
                               Element element)
      : d_(d), element_(element), x_(args.inputs[0].as<T>()),
        offsets_{args.inputs[1].data, args.inputs[1].dtype == DType::I64},
        y_(args.outputs[0].as<T>()) {}

  void run(const StepContext &ctx) override {
    const contracts::QuantizedProduct &e = d_.expert;
    if (e.m * e.n == 0)
      return;
    groupedProduct<T><<<gridFor(e.m * e.n), kBlock, 0, streamOf(ctx)>>>(
        x_, offsets_, element_, y_, e.m, e.k, e.n, d_.groups, e.transposeB);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  contracts::GroupedQuantizedProduct d_;
  Element element_;
  const T *x_;
  Offsets offsets_;
  T *y_;
};

} // namespace grouped_quantized

/// The grouped kernel for `d` reading weights through `element`.
template <typename Element>
std::unique_ptr<Kernel> makeGroupedQuantizedMatmul(const KernelArgs &args,
                                                   const contracts::GroupedQuantizedProduct &d,
                                                   Element element) {
  return dispatchFloat<FloatTypes>(d.expert.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using Instance =
        grouped_quantized::GroupedQuantizedMatmulKernel<typename decltype(tag)::type, Element>;
    return std::make_unique<Instance>(args, d, element);
  });
}

} // namespace llmc::cuda

#endif
