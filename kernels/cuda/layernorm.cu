//===- layernorm.cu - layer normalization and its backward on the GPU -----===//
//
// Forward: one thread block per row of C (a grid-stride loop over rows when
// there are more rows than blocks). Threads stride over the row; the mean
// and then the biased variance Σ(x − μ)² are two block reductions, the
// CPU's two-pass formula (more accurate than E[x²] − E[x]²); the row is
// re-read from L1/L2 for each pass, so no shared-memory row buffer limits C.
//
// Backward recomputes the statistics from x, as the CPU does:
//   x̂ = (x − μ)·rstd,  g = dy·γ
//   dx = rstd · (g − mean(g) − x̂·mean(g·x̂)),  dγ = Σ_rows dy·x̂,  dβ = Σ_rows dy
// dx is per row (two more block reductions). dγ and dβ are sums over rows,
// done without atomics so they are the same on every run: the grid has a
// fixed number of blocks G (chosen at bind time), block b owns rows b,
// b + G, …, and its thread owning column i accumulates dy·x̂ and dy of those
// rows into its own slots of bind-time scratch [G, 2C]; a second kernel
// then sums the G partials of each column in block order.
//
// The residual forms: add_layernorm (a, b → sum, y) first writes the row's
// sum (each thread its own columns, which it reads back for the statistics,
// so no barrier is needed), rounded as `add` rounds it; layernorm_grad_add
// adds the addend to dx as it is written (StorePlus.cuh: rounded as the unfused
// ops round, never an FMA).
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/LayerNorm.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/StorePlus.cuh"

namespace llmc::cuda {
namespace {

/// Threads per row: a multiple of 32 (blockSum's contract), at most 256.
int rowThreads(int64_t c) {
  int64_t t = (c + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : t > 256 ? 256 : t);
}

/// Blocks for a loop over rows (rows > 0).
int rowGrid(int64_t rows, int64_t cap = 65535 * 8) { return static_cast<int>(rows < cap ? rows : cap); }

/// Blocks of the backward: each keeps a [2, C] partial of dγ, dβ.
constexpr int64_t kGradBlocks = 528;

/// mean and 1/√(var + ε) of row xr, every thread of the block gets them.
template <typename T>
__device__ __forceinline__ void rowStats(const T *xr, int64_t c, float eps, float *red,
                                         float *mean, float *rstd) {
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) s += load(xr, i);
  const float mu = blockSum(s, red) / static_cast<float>(c);
  float q = 0.0f;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    float d = load(xr, i) - mu;
    q += d * d;
  }
  const float var = blockSum(q, red);
  *mean = mu;
  *rstd = 1.0f / sqrtf(var / static_cast<float>(c) + eps);
}

/// y = layernorm(x); with `b` (add_layernorm) x is a, and the row of a + b
/// (a + (b + bias) with `bias`, b + bias rounded to T as its own add stores
/// it) is written to `sum` first and normalized from there.
template <typename T>
__global__ void layerNormKernel(const T *x, const T *b, const T *bias, T *sum, const T *gamma,
                                const T *beta, T *out, int64_t rows, int64_t c, float eps) {
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * c;
    if (b) {
      const T *br = b + r * c;
      T *sr = sum + r * c;
      for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
        float addend = load(br, i);
        if (bias) {
          T biased;
          store(&biased, 0, addend + load(bias, i));
          addend = load(&biased, 0);
        }
        store(sr, i, load(xr, i) + addend);
      }
      xr = sr;
    }
    float mean, rstd;
    rowStats(xr, c, eps, red, &mean, &rstd);
    T *outr = out + r * c;
    for (int64_t i = threadIdx.x; i < c; i += blockDim.x)
      store(outr, i, (load(xr, i) - mean) * rstd * load(gamma, i) + load(beta, i));
  }
}

/// dx per row; block b's column partials of dγ, dβ into partial[b] ([2, C]).
template <typename T>
__global__ void layerNormGradKernel(const T *x, const T *gamma, const T *dy, const T *addend,
                                    T *dx, float *partial, int64_t rows, int64_t c, float eps) {
  __shared__ float red[32];
  float *dgamma = partial + blockIdx.x * 2 * c, *dbeta = dgamma + c;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) dgamma[i] = dbeta[i] = 0.0f;
  const float invC = 1.0f / static_cast<float>(c);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * c, *dyr = dy + r * c;
    float mean, rstd;
    rowStats(xr, c, eps, red, &mean, &rstd);
    float sumG = 0.0f, sumGX = 0.0f;
    for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
      float xhat = (load(xr, i) - mean) * rstd, d = load(dyr, i), gi = d * load(gamma, i);
      sumG += gi;
      sumGX += gi * xhat;
      dgamma[i] += d * xhat; // column i is this thread's alone
      dbeta[i] += d;
    }
    const float meanG = blockSum(sumG, red) * invC;
    const float meanGX = blockSum(sumGX, red) * invC;
    T *dxr = dx + r * c;
    const T *addr = addend ? addend + r * c : nullptr;
    for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
      float xhat = (load(xr, i) - mean) * rstd;
      float v = rstd * (load(dyr, i) * load(gamma, i) - meanG - xhat * meanGX);
      if (addr)
        storePlus(dxr, i, v, addr);
      else
        store(dxr, i, v);
    }
  }
}

/// dγ[i], dβ[i] = Σ_b partial[b] in block order.
template <typename T>
__global__ void columnSumKernel(const float *partial, int64_t blocks, int64_t c, T *dgamma,
                                T *dbeta) {
  LLMC_GRID_STRIDE(i, c) {
    float g = 0.0f, b = 0.0f;
    for (int64_t k = 0; k < blocks; ++k) {
      g += partial[k * 2 * c + i];
      b += partial[k * 2 * c + c + i];
    }
    store(dgamma, i, g);
    store(dbeta, i, b);
  }
}

template <typename T> class LayerNormKernel final : public Kernel {
public:
  /// layernorm, or with `residual` add_layernorm (a, b, gamma, beta[, bias]
  /// → sum, y).
  LayerNormKernel(const KernelArgs &args, float eps, bool residual)
      : x_(args.inputs[0].as<T>()), b_(residual ? args.inputs[1].as<T>() : nullptr),
        bias_(residual && args.inputs.size() == 5 ? args.inputs[4].as<T>() : nullptr),
        gamma_(args.inputs[residual ? 2 : 1].as<T>()),
        beta_(args.inputs[residual ? 3 : 2].as<T>()),
        sum_(residual ? args.outputs[0].as<T>() : nullptr),
        out_(args.outputs[residual ? 1 : 0].as<T>()), c_(args.inputs[0].dim(-1)),
        rows_(c_ ? args.inputs[0].numel() / c_ : 0), eps_(eps) {}

  void run(const StepContext &ctx) override {
    if (rows_ == 0) return;
    layerNormKernel<T><<<rowGrid(rows_), rowThreads(c_), 0, streamOf(ctx)>>>(
        x_, b_, bias_, sum_, gamma_, beta_, out_, rows_, c_, eps_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_, *b_, *bias_, *gamma_, *beta_;
  T *sum_, *out_;
  int64_t c_, rows_;
  float eps_;
};

template <typename T> class LayerNormGradKernel final : public Kernel {
public:
  /// layernorm_grad, or with a fourth input layernorm_grad_add.
  LayerNormGradKernel(const KernelArgs &args, float eps)
      : x_(args.inputs[0].as<T>()), gamma_(args.inputs[1].as<T>()), dy_(args.inputs[2].as<T>()),
        addend_(args.inputs.size() > 3 ? args.inputs[3].as<T>() : nullptr), dx_(args.outputs[0].as<T>()), dgamma_(args.outputs[1].as<T>()),
        dbeta_(args.outputs[2].as<T>()), c_(args.inputs[0].dim(-1)),
        rows_(c_ ? args.inputs[0].numel() / c_ : 0),
        blocks_(rows_ < kGradBlocks ? rows_ : kGradBlocks), eps_(eps),
        partial_(static_cast<size_t>(blocks_ * 2 * c_) * sizeof(float)) {}

  void run(const StepContext &ctx) override {
    if (c_ == 0) return;
    if (rows_ > 0) {
      layerNormGradKernel<T><<<static_cast<int>(blocks_), rowThreads(c_), 0, streamOf(ctx)>>>(
          x_, gamma_, dy_, addend_, dx_, partial_.as<float>(), rows_, c_, eps_);
      LLMC_CUDA_CHECK_LAUNCH();
    }
    // With no rows the sums are empty: dγ = dβ = 0, as on the CPU.
    columnSumKernel<T><<<gridFor(c_), kBlock, 0, streamOf(ctx)>>>(partial_.as<float>(), blocks_,
                                                                  c_, dgamma_, dbeta_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_, *gamma_, *dy_, *addend_;
  T *dx_, *dgamma_, *dbeta_;
  int64_t c_, rows_, blocks_;
  float eps_;
  BindScratch partial_; // [blocks, 2, C]: dγ, dβ partials per block
};

std::unique_ptr<Kernel> makeCudaLayerNorm(const KernelArgs &args, std::string &error) {
  contracts::LayerNormBinding b;
  if (!contracts::bindLayerNorm(args, error, &b)) return nullptr;
  return makeFloatKernel<LayerNormKernel>(b.dtype, args, static_cast<float>(b.epsilon), false);
}

std::unique_ptr<Kernel> makeCudaAddLayerNorm(const KernelArgs &args, std::string &error) {
  contracts::LayerNormBinding b;
  if (!contracts::bindAddLayerNorm(args, error, &b)) return nullptr;
  return makeFloatKernel<LayerNormKernel>(b.dtype, args, static_cast<float>(b.epsilon), true);
}

std::unique_ptr<Kernel> makeCudaLayerNormGrad(const KernelArgs &args, std::string &error) {
  contracts::LayerNormBinding b;
  if (!contracts::bindLayerNormGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<LayerNormGradKernel>(b.dtype, args, static_cast<float>(b.epsilon));
}

std::unique_ptr<Kernel> makeCudaLayerNormGradAdd(const KernelArgs &args, std::string &error) {
  contracts::LayerNormBinding b;
  if (!contracts::bindLayerNormGradAdd(args, error, &b)) return nullptr;
  return makeFloatKernel<LayerNormGradKernel>(b.dtype, args, static_cast<float>(b.epsilon));
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "layernorm", makeCudaLayerNorm);
LLMC_REGISTER_KERNEL(CUDA, "layernorm_grad", makeCudaLayerNormGrad);
LLMC_REGISTER_KERNEL(CUDA, "add_layernorm", makeCudaAddLayerNorm);
LLMC_REGISTER_KERNEL(CUDA, "layernorm_grad_add", makeCudaLayerNormGradAdd);

} // namespace llmc::cuda
