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
// adds the addend to dx as it is written (roundedPlus: rounded as the
// unfused ops round, never an FMA).
//
// Rows move in 16-byte packs (4 f32 or 8 bf16/f16 elements per access,
// RowPack.cuh) when every row and parameter vector is 16-byte aligned and
// C a multiple of the pack, else one element at a time. Either way each
// thread sums its own elements in column order and the block sums the
// threads' partials in a fixed order (blockSum), so a rerun gives the same
// bits; the packed split of columns among threads sums the row in another
// order than the per-element split (and than the CPU), which the
// conformance tests' bounds cover. dγ and dβ keep their order: column i's
// partial adds its block's rows in row order, and the blocks add in block
// order.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/LayerNorm.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/RowPack.cuh"

namespace llmc::cuda {
namespace {

/// Threads per row of `packs` packs: a multiple of 32 (blockSum's
/// contract), at most 256.
int rowThreads(int64_t packs) {
  int64_t t = (packs + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : t > 256 ? 256 : t);
}

/// Blocks for a loop over rows (rows > 0).
int rowGrid(int64_t rows, int64_t cap = 65535 * 8) { return static_cast<int>(rows < cap ? rows : cap); }

/// Blocks of the backward: each keeps a [2, C] partial of dγ, dβ.
constexpr int64_t kGradBlocks = 528;

/// for (each of this thread's packs p of a row of `packs`)
#define LLMC_ROW_PACKS(p, packs) for (int64_t p = threadIdx.x; p < (packs); p += blockDim.x)

/// mean and 1/√(var + ε) of row xr (c elements in packs of V), every
/// thread of the block gets them.
template <int V, typename T>
__device__ __forceinline__ void rowStats(const T *xr, int64_t c, float eps, float *red,
                                         float *mean, float *rstd) {
  float s = 0.0f;
  LLMC_ROW_PACKS(p, c / V) {
    float x[V];
    loadPack<V>(xr, p, x);
#pragma unroll
    for (int u = 0; u < V; ++u) s += x[u];
  }
  const float mu = blockSum(s, red) / static_cast<float>(c);
  float q = 0.0f;
  LLMC_ROW_PACKS(p, c / V) {
    float x[V];
    loadPack<V>(xr, p, x);
#pragma unroll
    for (int u = 0; u < V; ++u) {
      float d = x[u] - mu;
      q += d * d;
    }
  }
  const float var = blockSum(q, red);
  *mean = mu;
  *rstd = 1.0f / sqrtf(var / static_cast<float>(c) + eps);
}

/// y = layernorm(x); with `b` (add_layernorm) x is a, and the row of a + b
/// (a + (b + bias) with `bias`, b + bias rounded to T as its own add stores
/// it) is written to `sum` first and normalized from there (each thread
/// reads back the packs it wrote).
template <int V, typename T>
__global__ void layerNormKernel(const T *x, const T *b, const T *bias, T *sum, const T *gamma,
                                const T *beta, T *out, int64_t rows, int64_t c, float eps) {
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * c;
    if (b) {
      const T *br = b + r * c;
      T *sr = sum + r * c;
      LLMC_ROW_PACKS(p, c / V) {
        float xa[V], addend[V];
        loadPack<V>(xr, p, xa);
        loadPack<V>(br, p, addend);
        if (bias) {
          float bb[V];
          loadPack<V>(bias, p, bb);
#pragma unroll
          for (int u = 0; u < V; ++u) addend[u] = roundedTo<T>(addend[u] + bb[u]);
        }
#pragma unroll
        for (int u = 0; u < V; ++u) xa[u] += addend[u];
        storePack<V>(sr, p, xa);
      }
      xr = sr;
    }
    float mean, rstd;
    rowStats<V>(xr, c, eps, red, &mean, &rstd);
    T *outr = out + r * c;
    LLMC_ROW_PACKS(p, c / V) {
      float xv[V], g[V], bt[V];
      loadPack<V>(xr, p, xv);
      loadPack<V>(gamma, p, g);
      loadPack<V>(beta, p, bt);
#pragma unroll
      for (int u = 0; u < V; ++u) xv[u] = (xv[u] - mean) * rstd * g[u] + bt[u];
      storePack<V>(outr, p, xv);
    }
  }
}

/// dx per row; block b's column partials of dγ, dβ into partial[b] ([2, C]).
template <int V, typename T>
__global__ void layerNormGradKernel(const T *x, const T *gamma, const T *dy, const T *addend,
                                    T *dx, float *partial, int64_t rows, int64_t c, float eps) {
  __shared__ float red[32];
  float *dgamma = partial + blockIdx.x * 2 * c, *dbeta = dgamma + c;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) dgamma[i] = dbeta[i] = 0.0f;
  __syncthreads(); // the zeroing above strides by element, the sums below by pack
  const float invC = 1.0f / static_cast<float>(c);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * c, *dyr = dy + r * c;
    float mean, rstd;
    rowStats<V>(xr, c, eps, red, &mean, &rstd);
    float sumG = 0.0f, sumGX = 0.0f;
    LLMC_ROW_PACKS(p, c / V) {
      float xv[V], d[V], g[V];
      loadPack<V>(xr, p, xv);
      loadPack<V>(dyr, p, d);
      loadPack<V>(gamma, p, g);
#pragma unroll
      for (int u = 0; u < V; ++u) {
        const int64_t i = p * V + u;
        float xhat = (xv[u] - mean) * rstd, gi = d[u] * g[u];
        sumG += gi;
        sumGX += gi * xhat;
        dgamma[i] += d[u] * xhat; // column i is this thread's alone
        dbeta[i] += d[u];
      }
    }
    const float meanG = blockSum(sumG, red) * invC;
    const float meanGX = blockSum(sumGX, red) * invC;
    T *dxr = dx + r * c;
    const T *addr = addend ? addend + r * c : nullptr;
    LLMC_ROW_PACKS(p, c / V) {
      float xv[V], d[V], g[V];
      loadPack<V>(xr, p, xv);
      loadPack<V>(dyr, p, d);
      loadPack<V>(gamma, p, g);
#pragma unroll
      for (int u = 0; u < V; ++u) {
        float xhat = (xv[u] - mean) * rstd;
        xv[u] = rstd * (d[u] * g[u] - meanG - xhat * meanGX);
      }
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
        rows_(c_ ? args.inputs[0].numel() / c_ : 0), eps_(eps),
        packed_(packable<T>(c_, {x_, b_, bias_, gamma_, beta_, sum_, out_})) {}

  void run(const StepContext &ctx) override {
    if (rows_ == 0) return;
    if (packed_)
      layerNormKernel<kPackOf<T>, T><<<rowGrid(rows_), rowThreads(c_ / kPackOf<T>), 0,
                                       streamOf(ctx)>>>(x_, b_, bias_, sum_, gamma_, beta_, out_,
                                                        rows_, c_, eps_);
    else
      layerNormKernel<1, T><<<rowGrid(rows_), rowThreads(c_), 0, streamOf(ctx)>>>(
          x_, b_, bias_, sum_, gamma_, beta_, out_, rows_, c_, eps_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_, *b_, *bias_, *gamma_, *beta_;
  T *sum_, *out_;
  int64_t c_, rows_;
  float eps_;
  bool packed_; ///< rows move in 16-byte packs (RowPack.cuh)
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
        packed_(packable<T>(c_, {x_, gamma_, dy_, addend_, dx_})),
        partial_(static_cast<size_t>(blocks_ * 2 * c_) * sizeof(float)) {}

  void run(const StepContext &ctx) override {
    if (c_ == 0) return;
    if (rows_ > 0) {
      const int blocks = static_cast<int>(blocks_);
      if (packed_)
        layerNormGradKernel<kPackOf<T>, T><<<blocks, rowThreads(c_ / kPackOf<T>), 0,
                                             streamOf(ctx)>>>(x_, gamma_, dy_, addend_, dx_,
                                                              partial_.as<float>(), rows_, c_,
                                                              eps_);
      else
        layerNormGradKernel<1, T><<<blocks, rowThreads(c_), 0, streamOf(ctx)>>>(
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
  bool packed_; ///< rows move in 16-byte packs (RowPack.cuh)
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
