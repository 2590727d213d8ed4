//===- rmsnorm.cu - RMS normalization and its backward on the GPU ---------===//
//
// Forward: y = x·rstd·γ with rstd = 1/√(mean(x²) + ε); one thread block
// per row (grid-stride over rows), mean(x²) a block reduction, as in
// layernorm.cu. Backward, with x̂ = x·rstd and g = dy·γ:
//   dx = rstd · (g − x̂·mean(g·x̂)),  dγ = Σ_rows dy·x̂
// dx is per row; dγ is summed without atomics, deterministically: a fixed
// number G of blocks (bind time), block b owning rows b, b + G, …, each
// column's thread accumulating into its own slot of scratch [G, C], then a
// second kernel sums each column's G partials in block order.
//
// add_rmsnorm and rmsnorm_grad_add, the residual forms, write the row's sum
// first and normalize it, and add the addend as dx is written, as in
// layernorm.cu; rows move in 16-byte packs where alignment allows, with
// the same orders of summation as layernorm.cu describes.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/RmsNorm.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/RowPack.cuh"

namespace llmc::cuda {
namespace {

/// Threads per row of `packs` packs: a multiple of 32 (blockSum's
/// contract), at most 256.
int rmsRowThreads(int64_t packs) {
  int64_t t = (packs + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : t > 256 ? 256 : t);
}

/// Blocks for a loop over rows (rows > 0).
int rmsRowGrid(int64_t rows) {
  const int64_t cap = 65535 * 8;
  return static_cast<int>(rows < cap ? rows : cap);
}

/// Blocks of the backward: each keeps a [C] partial of dγ.
constexpr int64_t kGradBlocks = 528;

/// for (each of this thread's packs p of a row of `packs`)
#define LLMC_RMS_PACKS(p, packs) for (int64_t p = threadIdx.x; p < (packs); p += blockDim.x)

/// 1/√(mean(x²) + ε) of row xr (c elements in packs of V), for every
/// thread of the block.
template <int V, typename T>
__device__ __forceinline__ float rowRstd(const T *xr, int64_t c, float eps, float *red) {
  float s = 0.0f;
  LLMC_RMS_PACKS(p, c / V) {
    float x[V];
    loadPack<V>(xr, p, x);
#pragma unroll
    for (int u = 0; u < V; ++u) s += x[u] * x[u];
  }
  return 1.0f / sqrtf(blockSum(s, red) / static_cast<float>(c) + eps);
}

/// Pack p of γ in fp32: gamma plus `offset` (1 under unit_offset, Gemma).
template <int V, typename T>
__device__ __forceinline__ void loadGamma(const T *gamma, int64_t p, float offset, float (&g)[V]) {
  loadPack<V>(gamma, p, g);
#pragma unroll
  for (int u = 0; u < V; ++u) g[u] += offset;
}

/// y = rmsnorm(x); with `b` (add_rmsnorm) x is a, and the row of a + b is
/// written to `sum` first and normalized from there.
template <int V, typename T>
__global__ void rmsNormKernel(const T *x, const T *b, T *sum, const T *gamma, T *out, int64_t rows,
                              int64_t c, float eps, float gammaOffset) {
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * c;
    if (b) {
      const T *br = b + r * c;
      T *sr = sum + r * c;
      LLMC_RMS_PACKS(p, c / V) {
        float xa[V], xb[V];
        loadPack<V>(xr, p, xa);
        loadPack<V>(br, p, xb);
#pragma unroll
        for (int u = 0; u < V; ++u) xa[u] += xb[u];
        storePack<V>(sr, p, xa);
      }
      xr = sr;
    }
    const float rstd = rowRstd<V>(xr, c, eps, red);
    T *outr = out + r * c;
    LLMC_RMS_PACKS(p, c / V) {
      float xv[V], g[V];
      loadPack<V>(xr, p, xv);
      loadGamma<V>(gamma, p, gammaOffset, g);
#pragma unroll
      for (int u = 0; u < V; ++u) xv[u] = xv[u] * rstd * g[u];
      storePack<V>(outr, p, xv);
    }
  }
}

/// dx per row; block b's column partial of dγ into partial[b] ([C]).
template <int V, typename T>
__global__ void rmsNormGradKernel(const T *x, const T *gamma, const T *dy, const T *addend, T *dx,
                                  float *partial, int64_t rows, int64_t c, float eps,
                                  float gammaOffset) {
  __shared__ float red[32];
  float *dgamma = partial + blockIdx.x * c;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) dgamma[i] = 0.0f;
  __syncthreads(); // the zeroing above strides by element, the sums below by pack
  const float invC = 1.0f / static_cast<float>(c);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * c, *dyr = dy + r * c;
    const float rstd = rowRstd<V>(xr, c, eps, red);
    float sumGX = 0.0f;
    LLMC_RMS_PACKS(p, c / V) {
      float xv[V], d[V], g[V];
      loadPack<V>(xr, p, xv);
      loadPack<V>(dyr, p, d);
      loadGamma<V>(gamma, p, gammaOffset, g);
#pragma unroll
      for (int u = 0; u < V; ++u) {
        float xhat = xv[u] * rstd;
        sumGX += d[u] * g[u] * xhat;
        dgamma[p * V + u] += d[u] * xhat; // column p·V + u is this thread's alone
      }
    }
    const float meanGX = blockSum(sumGX, red) * invC;
    T *dxr = dx + r * c;
    const T *addr = addend ? addend + r * c : nullptr;
    LLMC_RMS_PACKS(p, c / V) {
      float xv[V], d[V], g[V];
      loadPack<V>(xr, p, xv);
      loadPack<V>(dyr, p, d);
      loadGamma<V>(gamma, p, gammaOffset, g);
#pragma unroll
      for (int u = 0; u < V; ++u) xv[u] = rstd * (d[u] * g[u] - xv[u] * rstd * meanGX);
      if (addr) {
        float a[V];
        loadPack<V>(addr, p, a);
#pragma unroll
        for (int u = 0; u < V; ++u) xv[u] = roundedPlus<T>(xv[u], a[u]);
      }
      storePack<V>(dxr, p, xv);
    }
  }
}

/// dγ[i] = Σ_b partial[b][i] in block order.
template <typename T>
__global__ void rmsColumnSumKernel(const float *partial, int64_t blocks, int64_t c, T *dgamma) {
  LLMC_GRID_STRIDE(i, c) {
    float g = 0.0f;
    for (int64_t k = 0; k < blocks; ++k) g += partial[k * c + i];
    store(dgamma, i, g);
  }
}

template <typename T> class RmsNormKernel final : public Kernel {
public:
  /// rmsnorm, or with `residual` add_rmsnorm (a, b, gamma → sum, y).
  RmsNormKernel(const KernelArgs &args, float eps, float gammaOffset, bool residual)
      : x_(args.inputs[0].as<T>()), b_(residual ? args.inputs[1].as<T>() : nullptr),
        gamma_(args.inputs[residual ? 2 : 1].as<T>()),
        sum_(residual ? args.outputs[0].as<T>() : nullptr),
        out_(args.outputs[residual ? 1 : 0].as<T>()), c_(args.inputs[0].dim(-1)),
        rows_(c_ ? args.inputs[0].numel() / c_ : 0), eps_(eps), gammaOffset_(gammaOffset),
        packed_(packable<T>(c_, {x_, b_, gamma_, sum_, out_})) {}

  void run(const StepContext &ctx) override {
    if (rows_ == 0) return;
    if (packed_)
      rmsNormKernel<kPackOf<T>, T>
          <<<rmsRowGrid(rows_), rmsRowThreads(c_ / kPackOf<T>), 0, streamOf(ctx)>>>(
              x_, b_, sum_, gamma_, out_, rows_, c_, eps_, gammaOffset_);
    else
      rmsNormKernel<1, T><<<rmsRowGrid(rows_), rmsRowThreads(c_), 0, streamOf(ctx)>>>(
          x_, b_, sum_, gamma_, out_, rows_, c_, eps_, gammaOffset_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_, *b_, *gamma_;
  T *sum_, *out_;
  int64_t c_, rows_;
  float eps_;
  float gammaOffset_; ///< 1 under unit_offset: γ is 1 + gamma
  bool packed_; ///< rows move in 16-byte packs (RowPack.cuh)
};

template <typename T> class RmsNormGradKernel final : public Kernel {
public:
  /// rmsnorm_grad, or with a fourth input rmsnorm_grad_add.
  RmsNormGradKernel(const KernelArgs &args, float eps, float gammaOffset)
      : x_(args.inputs[0].as<T>()), gamma_(args.inputs[1].as<T>()), dy_(args.inputs[2].as<T>()),
        addend_(args.inputs.size() > 3 ? args.inputs[3].as<T>() : nullptr),
        dx_(args.outputs[0].as<T>()), dgamma_(args.outputs[1].as<T>()), c_(args.inputs[0].dim(-1)),
        rows_(c_ ? args.inputs[0].numel() / c_ : 0),
        blocks_(rows_ < kGradBlocks ? rows_ : kGradBlocks), eps_(eps), gammaOffset_(gammaOffset),
        packed_(packable<T>(c_, {x_, gamma_, dy_, addend_, dx_})),
        partial_(static_cast<size_t>(blocks_ * c_) * sizeof(float)) {}

  void run(const StepContext &ctx) override {
    if (c_ == 0) return;
    if (rows_ > 0) {
      const int blocks = static_cast<int>(blocks_);
      if (packed_)
        rmsNormGradKernel<kPackOf<T>, T>
            <<<blocks, rmsRowThreads(c_ / kPackOf<T>), 0, streamOf(ctx)>>>(
                x_, gamma_, dy_, addend_, dx_, partial_.as<float>(), rows_, c_, eps_, gammaOffset_);
      else
        rmsNormGradKernel<1, T><<<blocks, rmsRowThreads(c_), 0, streamOf(ctx)>>>(
            x_, gamma_, dy_, addend_, dx_, partial_.as<float>(), rows_, c_, eps_, gammaOffset_);
      LLMC_CUDA_CHECK_LAUNCH();
    }
    // With no rows the sum is empty: dγ = 0, as on the CPU.
    rmsColumnSumKernel<T><<<gridFor(c_), kBlock, 0, streamOf(ctx)>>>(partial_.as<float>(),
                                                                     blocks_, c_, dgamma_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_, *gamma_, *dy_, *addend_;
  T *dx_, *dgamma_;
  int64_t c_, rows_, blocks_;
  float eps_;
  float gammaOffset_; ///< 1 under unit_offset: γ is 1 + gamma
  bool packed_; ///< rows move in 16-byte packs (RowPack.cuh)
  BindScratch partial_; // [blocks, C]: dγ partials per block
};

std::unique_ptr<Kernel> makeCudaRmsNorm(const KernelArgs &args, std::string &error) {
  contracts::RmsNormBinding b;
  if (!contracts::bindRmsNorm(args, error, &b)) return nullptr;
  return makeFloatKernel<RmsNormKernel>(b.dtype, args, static_cast<float>(b.epsilon),
                                        b.unitOffset ? 1.0f : 0.0f, false);
}

std::unique_ptr<Kernel> makeCudaAddRmsNorm(const KernelArgs &args, std::string &error) {
  contracts::RmsNormBinding b;
  if (!contracts::bindAddRmsNorm(args, error, &b)) return nullptr;
  return makeFloatKernel<RmsNormKernel>(b.dtype, args, static_cast<float>(b.epsilon),
                                        b.unitOffset ? 1.0f : 0.0f, true);
}

std::unique_ptr<Kernel> makeCudaRmsNormGrad(const KernelArgs &args, std::string &error) {
  contracts::RmsNormBinding b;
  if (!contracts::bindRmsNormGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<RmsNormGradKernel>(b.dtype, args, static_cast<float>(b.epsilon),
                                            b.unitOffset ? 1.0f : 0.0f);
}

std::unique_ptr<Kernel> makeCudaRmsNormGradAdd(const KernelArgs &args, std::string &error) {
  contracts::RmsNormBinding b;
  if (!contracts::bindRmsNormGradAdd(args, error, &b)) return nullptr;
  return makeFloatKernel<RmsNormGradKernel>(b.dtype, args, static_cast<float>(b.epsilon),
                                            b.unitOffset ? 1.0f : 0.0f);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "rmsnorm", makeCudaRmsNorm);
LLMC_REGISTER_KERNEL(CUDA, "rmsnorm_grad", makeCudaRmsNormGrad);
LLMC_REGISTER_KERNEL(CUDA, "add_rmsnorm", makeCudaAddRmsNorm);
LLMC_REGISTER_KERNEL(CUDA, "rmsnorm_grad_add", makeCudaRmsNormGradAdd);

} // namespace llmc::cuda
