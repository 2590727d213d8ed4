//===- global_norm.cu - L2 norm over every element of many tensors --------===//
//
// √(Σ x²) over all inputs (gradient clipping), or Σ x² with `squared`, as in
// kernels/cpu/global_norm.cpp, and deterministic: no atomics, and the
// summation order is fixed by the shapes alone.
//
// At bind time every input is cut into chunks of 64K elements and the table
// of chunks (pointer, dtype, begin, size) is uploaded once. Stage 1 is one
// launch with a block per chunk: each thread sums the squares of every
// 256th element of the chunk in double (reads are coalesced), and the block
// adds its threads' sums with a fixed shuffle tree into the chunk's scratch
// slot. Stage 2 is one block that adds the slots (thread t takes slots t,
// t + 1024, ... in order, then the same tree) and writes the norm. Inputs
// may mix f32, bf16 and f16; the result is an f32 scalar.
//
// `sqrt` (the elementwise f32 square root) lives here as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/GlobalNorm.h"
#include "kernels/cuda/Common.cuh"

#include <algorithm>
#include <vector>

namespace llmc::cuda {
namespace {

constexpr int64_t kChunk = 1 << 16;
constexpr int kChunkThreads = 256;
constexpr int kFinishThreads = 1024;

struct Chunk {
  const void *data;
  int64_t begin, size;
  DType dtype;
};

template <typename T> __device__ double sumOfSquares(const void *data, int64_t begin, int64_t n) {
  const T *x = static_cast<const T *>(data) + begin;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    double v = load(x, i);
    sum += v * v;
  }
  return sum;
}

__global__ void sumSquaresKernel(const Chunk *__restrict__ chunks, double *__restrict__ partial) {
  __shared__ double shared[32];
  const Chunk c = chunks[blockIdx.x];
  double sum = c.dtype == DType::BF16  ? sumOfSquares<bf16>(c.data, c.begin, c.size)
               : c.dtype == DType::F16 ? sumOfSquares<f16>(c.data, c.begin, c.size)
                                       : sumOfSquares<float>(c.data, c.begin, c.size);
  sum = blockSum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

__global__ void finishNormKernel(const double *__restrict__ partial, int64_t count,
                                 float *__restrict__ out, bool squared) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partial[i];
  sum = blockSum(sum, shared);
  if (threadIdx.x == 0) *out = static_cast<float>(squared ? sum : sqrt(sum));
}

class GlobalNormKernel final : public Kernel {
public:
  explicit GlobalNormKernel(const KernelArgs &args)
      : out_(args.outputs[0].as<float>()), squared_(args.attrs.getInt("squared") != 0) {
    std::vector<Chunk> chunks;
    for (const TensorView &x : args.inputs)
      for (int64_t begin = 0; begin < x.numel(); begin += kChunk)
        chunks.push_back({x.data, begin, std::min(kChunk, x.numel() - begin), x.dtype});
    count_ = static_cast<int64_t>(chunks.size());
    if (count_ > 0) {
      chunks_ = static_cast<Chunk *>(deviceAlloc(chunks.size() * sizeof(Chunk)));
      partial_ = static_cast<double *>(deviceAlloc(chunks.size() * sizeof(double)));
      copyToDevice(chunks_, chunks.data(), chunks.size() * sizeof(Chunk));
    }
  }
  ~GlobalNormKernel() override {
    deviceFree(chunks_);
    deviceFree(partial_);
  }
  GlobalNormKernel(const GlobalNormKernel &) = delete;
  GlobalNormKernel &operator=(const GlobalNormKernel &) = delete;

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    if (count_ > 0) {
      sumSquaresKernel<<<static_cast<unsigned>(count_), kChunkThreads, 0, stream>>>(chunks_,
                                                                                   partial_);
      LLMC_CUDA_CHECK_LAUNCH();
    }
    finishNormKernel<<<1, kFinishThreads, 0, stream>>>(partial_, count_, out_, squared_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  float *out_;
  bool squared_;
  int64_t count_ = 0;
  Chunk *chunks_ = nullptr;
  double *partial_ = nullptr;
};

std::unique_ptr<Kernel> makeCudaGlobalNorm(const KernelArgs &args, std::string &error) {
  contracts::GlobalNormBinding b;
  if (!contracts::bindGlobalNorm(args, error, &b)) return nullptr;
  return std::make_unique<GlobalNormKernel>(args);
}

//===----------------------------------------------------------------------===//
// sqrt
//===----------------------------------------------------------------------===//

/// Elementwise, in place allowed (each thread reads the element it writes);
/// sqrtf is correctly rounded (the library builds without fast math), as
/// std::sqrt.
__global__ void sqrtKernel(const float *x, float *y, int64_t n) {
  LLMC_GRID_STRIDE(i, n) y[i] = sqrtf(x[i]);
}

class SqrtKernel final : public Kernel {
public:
  SqrtKernel(const TensorView &x, const TensorView &y)
      : x_(x.as<float>()), y_(y.as<float>()), n_(x.numel()) {}
  void run(const StepContext &ctx) override {
    if (n_ == 0) return;
    sqrtKernel<<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(x_, y_, n_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const float *x_;
  float *y_;
  int64_t n_;
};

std::unique_ptr<Kernel> makeCudaSqrt(const KernelArgs &args, std::string &error) {
  contracts::SqrtBinding b;
  if (!contracts::bindSqrt(args, error, &b)) return nullptr;
  return std::make_unique<SqrtKernel>(args.inputs[0], args.outputs[0]);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "global_norm", makeCudaGlobalNorm);
LLMC_REGISTER_KERNEL(CUDA, "sqrt", makeCudaSqrt);

} // namespace llmc::cuda
