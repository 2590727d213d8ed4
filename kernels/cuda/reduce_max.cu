//===- reduce_max.cu - maximum over the last dimension --------------------===//
//
// reduce_max (the first step of vocabulary-parallel cross-entropy; CPU twin
// in kernels/cpu/reduce_max.cpp): out[r] = max_j x[r, j], f32
// out for f32 or bf16 x. Row-parallel: a narrow row (< 1024 elements) is
// owned by one warp, whose lanes stride over it and combine with shuffles;
// a wide row (a vocabulary of 50257) by a whole block, combined through
// blockMax. Rows are handed out grid-stride, by warp or by block, so every
// lane of a warp (every thread of a block) runs the same number of
// iterations and the shuffles and barriers are never divergent. A maximum
// is exact, so the order of comparisons does not matter.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/CrossEntropySharded.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {
namespace {

constexpr int64_t kWideRow = 1024;
constexpr int kWarpsPerBlock = kBlock / 32;

template <typename T>
__global__ void rowMaxWarpKernel(const T *__restrict__ x, float *__restrict__ out, int64_t rows,
                                 int64_t width, int64_t valid) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
       r < rows; r += warps) {
    const T *row = x + r * width;
    float m = -INFINITY;
    for (int64_t j = lane; j < valid; j += 32) m = fmaxf(m, load(row, j));
    m = warpMax(m);
    if (lane == 0) out[r] = m;
  }
}

template <typename T>
__global__ void rowMaxBlockKernel(const T *__restrict__ x, float *__restrict__ out, int64_t rows,
                                  int64_t width, int64_t valid) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = x + r * width;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) m = fmaxf(m, load(row, j));
    m = blockMax(m, shared);
    if (threadIdx.x == 0) out[r] = m;
  }
}

template <typename T> class ReduceMaxKernel final : public Kernel {
public:
  ReduceMaxKernel(const KernelArgs &args, const contracts::ReduceMaxBinding &b)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<float>()), width_(b.width),
        valid_(b.valid), rows_(b.rows) {}

  void run(const StepContext &ctx) override {
    if (rows_ == 0) return;
    cudaStream_t stream = streamOf(ctx);
    if (width_ >= kWideRow) {
      rowMaxBlockKernel<<<gridFor(rows_, 1), kBlock, 0, stream>>>(x_, out_, rows_, width_,
                                                                   valid_);
    } else {
      rowMaxWarpKernel<<<gridFor(rows_, kWarpsPerBlock), kBlock, 0, stream>>>(x_, out_, rows_,
                                                                             width_, valid_);
    }
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_;
  float *out_;
  int64_t width_, valid_, rows_;
};

std::unique_ptr<Kernel> makeCudaReduceMax(const KernelArgs &args, std::string &error) {
  contracts::ReduceMaxBinding b;
  if (!contracts::bindReduceMax(args, error, &b)) return nullptr;
  return makeFloatKernel<ReduceMaxKernel>(b.dtype, args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "reduce_max", makeCudaReduceMax);

} // namespace llmc::cuda
