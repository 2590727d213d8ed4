//===- fake_quant.cu - QAT observers and quantize-dequantize on the GPU ---===//
//
// qat_observe, qat_fake_quant, qat_fake_quant_grad and qat_ema, with the
// semantics of kernels/cpu/fake_quant.cpp and the math of
// common/QuantScheme.h, operation for operation in fp32 (x / scale, never
// x · (1/scale); rintf, i.e. round half to even, for nearbyint; clamps
// written as std::clamp is, so even a NaN takes the CPU's path). The grid a
// value lands on is therefore the CPU's bit for bit.
//
// Every granularity is the [outer, G, inner] view of x: element i is in
// group (i / inner) % G (tensor: G = 1; channel: G = shape[axis], inner =
// the elements after axis; block: inner = block).
//
// Fake quantization (and its gradient) is a map: a first launch turns each
// group's range into its scale, zero point and a live flag (scratch sized
// at bind time), a second maps every element in a grid-stride loop, one
// thread per element, reading its group's three values. With outlier
// columns a launch before both marks the columns (one byte each) from the
// `columns` input, which is data, so it is marked on every call.
//
// The observer is a max-reduction per group, deterministic without atomics
// (max is exact, so only the partition matters, and it is fixed):
//  - groups of contiguous runs (tensor, block, channel of an inner axis):
//    one warp per (group, piece of kPiece elements of that group), lanes
//    striding through the piece, a warp reduction, then, when a group has
//    several pieces, one block per group reducing its pieces' partials;
//  - channels whose elements are strided (inner = 1: the last axis): one
//    thread per (group, band of rows), consecutive threads on consecutive
//    groups so the loads coalesce, then one thread per group over the bands.
// Elements of outlier columns contribute −inf, the identity of the max.
//
//===----------------------------------------------------------------------===//

#include "common/Fp8.h"
#include "common/QuantScheme.h"
#include "kernels/contracts/FakeQuant.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"

#include <cmath>

namespace llmc::cuda {
namespace {

using quant::Format;
using quant::Granularity;
using quant::Scheme;

/// A scheme's groups as the [outer, groups, inner] view of x.
using GroupLayout = contracts::QuantGroupLayout;

//===----------------------------------------------------------------------===//
// Device mirrors of common/QuantScheme.h
//===----------------------------------------------------------------------===//

/// std::max / std::min / std::clamp exactly (a NaN argument picks the same
/// operand as on the host).
__device__ __forceinline__ float maxOf(float a, float b) { return a < b ? b : a; }
__device__ __forceinline__ float minOf(float a, float b) { return b < a ? b : a; }
__device__ __forceinline__ float clampOf(float v, float lo, float hi) {
  return v < lo ? lo : (hi < v ? hi : v);
}

/// quant::isOutlierColumn.
__device__ __forceinline__ bool isOutlierColumn(double threshold, float negMin, float max) {
  return threshold > 0.0 && static_cast<double>(negMin > max ? negMin : max) > threshold;
}

/// Marks pass[c] = 1 for each outlier column, else 0.
__global__ void markOutlierColumns(const float *columns, int64_t n, double threshold,
                                   uint8_t *pass) {
  LLMC_GRID_STRIDE(c, n) pass[c] = isOutlierColumn(threshold, columns[2 * c], columns[2 * c + 1]);
}

using quant::FormatConsts;
using quant::Grid;
using quant::formatConsts;

/// v (|v| ≤ fmax) rounded to the fp8 format of k, as on the CPU.
__device__ __forceinline__ float roundFp8(float v, const FormatConsts &k) {
  return fp8::roundToGrid(v, k.mbits, k.emin);
}

/// The NF4 level nearest c ∈ [−1, 1], ties to the lower.
__device__ __forceinline__ float nearestNf4(float c, const FormatConsts &k) {
  float level = k.nf4Levels[0];
#pragma unroll
  for (int i = 0; i < 15; ++i) level = c > k.nf4Threshold[i] ? k.nf4Levels[i + 1] : level;
  return level;
}

/// y for a live group of `scale` (amax for NF4) and zero point `zp` (amax
/// for fp8, which has none).
template <Grid grid>
__device__ __forceinline__ float quantDequant(float x, float scale, float zp,
                                              const FormatConsts &k) {
  if constexpr (grid == Grid::IntSymmetric) {
    float q = rintf(x / scale);
    return clampOf(q, -k.qmax, k.qmax) * scale;
  } else if constexpr (grid == Grid::IntAsymmetric) {
    float q = rintf(x / scale) + zp;
    return (clampOf(q, k.qmin, k.qmax) - zp) * scale;
  } else if constexpr (grid == Grid::Fp8) {
    return roundFp8(clampOf(x / scale, -k.fmax, k.fmax), k) * scale;
  } else {
    return nearestNf4(clampOf(x / scale, -1.0f, 1.0f), k) * scale;
  }
}

/// Whether x is clipped in a live group.
template <Grid grid>
__device__ __forceinline__ bool isClipped(float x, float scale, float zp, const FormatConsts &k) {
  if constexpr (grid == Grid::IntSymmetric) {
    return fabsf(rintf(x / scale)) > k.qmax;
  } else if constexpr (grid == Grid::IntAsymmetric) {
    float q = rintf(x / scale) + zp;
    return q < k.qmin || q > k.qmax;
  } else if constexpr (grid == Grid::Fp8) {
    return fabsf(x) > zp; // zp holds the group's amax
  } else {
    return fabsf(x / scale) > 1.0f;
  }
}

//===----------------------------------------------------------------------===//
// qat_observe
//===----------------------------------------------------------------------===//

/// Elements of one group per warp task of the run-wise observer.
constexpr int64_t kPiece = 8192;
/// At most this many bands of rows per group in the column-wise observer.
constexpr int64_t kMaxBands = 1024;

/// Whether element i counts (its column is not an outlier column).
template <bool kOutliers>
__device__ __forceinline__ bool kept(const uint8_t *pass, int64_t columns, int64_t i) {
  if constexpr (kOutliers) return pass[i % columns] == 0;
  return true;
}

/// Run-wise: warp task w = g·pieces + p reduces elements [p·kPiece,
/// (p+1)·kPiece) of group g's outer·inner (element n of the group is
/// x[(n / inner · groups + g) · inner + n % inner]) into dst[2w], dst[2w+1].
template <typename T, bool kOutliers>
__global__ void observeRuns(const T *x, const uint8_t *pass, int64_t columns, GroupLayout l,
                            int64_t pieces, float *dst) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  const int64_t count = l.outer * l.inner, tasks = l.groups * pieces;
  // The loop condition is the same for all lanes of a warp (warp-uniform),
  // so the shuffles below see a full warp.
  for (int64_t w = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5; w < tasks;
       w += warps) {
    const int64_t g = w / pieces, p = w % pieces;
    const int64_t end = min(count, (p + 1) * kPiece);
    float negMin = -INFINITY, max = -INFINITY;
    for (int64_t n = p * kPiece + lane; n < end; n += 32) {
      const int64_t i = (n / l.inner * l.groups + g) * l.inner + n % l.inner;
      float value = load(x, i);
      if (kept<kOutliers>(pass, columns, i)) {
        negMin = fmaxf(negMin, -value);
        max = fmaxf(max, value);
      }
    }
    negMin = warpMax(negMin);
    max = warpMax(max);
    if (lane == 0) dst[2 * w] = negMin, dst[2 * w + 1] = max;
  }
}

/// One block per group: the maximum of its `pieces` partial ranges.
__global__ void finishRuns(const float *partial, int64_t groups, int64_t pieces, float *range) {
  __shared__ float shared[32];
  // Block-uniform loop: every thread of the block reaches each blockMax.
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    float negMin = -INFINITY, max = -INFINITY;
    for (int64_t p = threadIdx.x; p < pieces; p += blockDim.x) {
      negMin = fmaxf(negMin, partial[2 * (g * pieces + p)]);
      max = fmaxf(max, partial[2 * (g * pieces + p) + 1]);
    }
    negMin = blockMax(negMin, shared);
    max = blockMax(max, shared);
    if (threadIdx.x == 0) range[2 * g] = negMin, range[2 * g + 1] = max;
  }
}

/// Column-wise (inner = 1): thread task t = band·groups + g reduces rows
/// [band·rows, (band+1)·rows) of group g (element o·groups + g) into
/// dst[2t], dst[2t+1].
template <typename T, bool kOutliers>
__global__ void observeColumns(const T *x, const uint8_t *pass, int64_t columns, int64_t groups,
                               int64_t outer, int64_t rowsPerBand, int64_t bands, float *dst) {
  LLMC_GRID_STRIDE(t, groups * bands) {
    const int64_t band = t / groups, g = t % groups;
    const int64_t end = min(outer, (band + 1) * rowsPerBand);
    float negMin = -INFINITY, max = -INFINITY;
    for (int64_t o = band * rowsPerBand; o < end; ++o) {
      const int64_t i = o * groups + g;
      float value = load(x, i);
      if (kept<kOutliers>(pass, columns, i)) {
        negMin = fmaxf(negMin, -value);
        max = fmaxf(max, value);
      }
    }
    dst[2 * t] = negMin, dst[2 * t + 1] = max;
  }
}

/// One thread per group: the maximum over its bands.
__global__ void finishColumns(const float *partial, int64_t groups, int64_t bands, float *range) {
  LLMC_GRID_STRIDE(g, groups) {
    float negMin = -INFINITY, max = -INFINITY;
    for (int64_t band = 0; band < bands; ++band) {
      negMin = fmaxf(negMin, partial[2 * (band * groups + g)]);
      max = fmaxf(max, partial[2 * (band * groups + g) + 1]);
    }
    range[2 * g] = negMin, range[2 * g + 1] = max;
  }
}

template <typename T> class ObserveKernel final : public Kernel {
public:
  ObserveKernel(const KernelArgs &args, Scheme s, GroupLayout layout)
      : x_(args.inputs[0].as<T>()),
        columns_(s.outlier > 0.0 ? args.inputs[1].as<float>() : nullptr),
        range_(args.outputs[0].as<float>()), l_(layout), threshold_(s.outlier),
        cols_(args.inputs[0].dim(-1)), byColumns_(layout.inner == 1 && layout.groups > 1) {
    if (byColumns_) {
      rowsPerBand_ = std::max<int64_t>(32, (l_.outer + kMaxBands - 1) / kMaxBands);
      parts_ = std::max<int64_t>(1, (l_.outer + rowsPerBand_ - 1) / rowsPerBand_);
    } else {
      parts_ = std::max<int64_t>(1, (l_.outer * l_.inner + kPiece - 1) / kPiece);
    }
    if (parts_ > 1) partial_ = std::make_unique<BindScratch>(sizeof(float) * 2 * l_.groups * parts_);
    if (columns_) pass_ = std::make_unique<BindScratch>(static_cast<size_t>(cols_));
  }

  void run(const StepContext &ctx) override {
    if (l_.groups == 0) return;
    cudaStream_t stream = streamOf(ctx);
    const uint8_t *pass = nullptr;
    if (columns_) {
      markOutlierColumns<<<gridFor(cols_), kBlock, 0, stream>>>(columns_, cols_, threshold_,
                                                                 pass_->as<uint8_t>());
      LLMC_CUDA_CHECK_LAUNCH();
      pass = pass_->as<uint8_t>();
    }
    float *dst = parts_ > 1 ? partial_->as<float>() : range_;
    const int64_t tasks = l_.groups * parts_;
    if (byColumns_) {
      if (columns_)
        observeColumns<T, true><<<gridFor(tasks), kBlock, 0, stream>>>(
            x_, pass, cols_, l_.groups, l_.outer, rowsPerBand_, parts_, dst);
      else
        observeColumns<T, false><<<gridFor(tasks), kBlock, 0, stream>>>(
            x_, pass, cols_, l_.groups, l_.outer, rowsPerBand_, parts_, dst);
      LLMC_CUDA_CHECK_LAUNCH();
      if (parts_ > 1) {
        finishColumns<<<gridFor(l_.groups), kBlock, 0, stream>>>(dst, l_.groups, parts_, range_);
        LLMC_CUDA_CHECK_LAUNCH();
      }
      return;
    }
    const int blocks = gridFor(tasks * 32); // one warp per task
    if (columns_)
      observeRuns<T, true><<<blocks, kBlock, 0, stream>>>(x_, pass, cols_, l_, parts_, dst);
    else
      observeRuns<T, false><<<blocks, kBlock, 0, stream>>>(x_, pass, cols_, l_, parts_, dst);
    LLMC_CUDA_CHECK_LAUNCH();
    if (parts_ > 1) {
      const int finishBlocks = static_cast<int>(std::min<int64_t>(l_.groups, 65535 * 8));
      finishRuns<<<finishBlocks, kBlock, 0, stream>>>(dst, l_.groups, parts_, range_);
      LLMC_CUDA_CHECK_LAUNCH();
    }
  }

private:
  const T *x_;
  const float *columns_; ///< per-column ranges; null without outlier columns
  float *range_;
  GroupLayout l_;
  double threshold_;
  int64_t cols_;   ///< x's last dimension
  bool byColumns_; ///< groups are strided single elements (inner = 1)
  int64_t rowsPerBand_ = 0;
  int64_t parts_ = 1; ///< pieces (run-wise) or bands (column-wise) per group
  std::unique_ptr<BindScratch> partial_; ///< [parts][2] per group when parts > 1
  std::unique_ptr<BindScratch> pass_;    ///< per column: 1 outlier, 0 kept
};

std::unique_ptr<Kernel> makeCudaObserve(const KernelArgs &args, std::string &error) {
  contracts::QatObserveBinding b;
  if (!contracts::bindQatObserve(args, error, &b)) return nullptr;
  return makeFloatKernel<ObserveKernel>(b.dtype, args, b.scheme, b.layout);
}

//===----------------------------------------------------------------------===//
// qat_fake_quant, qat_fake_quant_grad
//===----------------------------------------------------------------------===//

/// Per group g: scales[g], zps[g] and live[g] (1 for a usable range, 0 for
/// an empty one), as the CPU's computeGrids.
template <Grid grid>
__global__ void computeGrids(const float *range, int64_t groups, bool symmetric, FormatConsts k,
                             float *scales, float *zps, float *live) {
  const float fullScale = grid == Grid::Fp8 ? k.fmax : grid == Grid::Nf4 ? 1.0f : k.qmax;
  LLMC_GRID_STRIDE(g, groups) {
    float negMin = range[2 * g], max = range[2 * g + 1];
    if (symmetric) {
      float amax = maxOf(negMin, max);
      live[g] = amax > 0.0f ? 1.0f : 0.0f;
      scales[g] = grid == Grid::Nf4 ? amax : amax / fullScale;
      // fp8 clips beyond amax itself; the slot holds it, as fp8 has no zero point.
      zps[g] = grid == Grid::Fp8 ? amax : 0.0f;
    } else {
      float lo = minOf(-negMin, 0.0f), hi = maxOf(max, 0.0f);
      float scale = (hi - lo) / (k.qmax - k.qmin);
      live[g] = hi - lo > 0.0f ? 1.0f : 0.0f;
      scales[g] = scale;
      zps[g] = clampOf(rintf(k.qmin - lo / scale), k.qmin, k.qmax);
    }
  }
}

/// The map: y = quantize-dequantize(x), or with kGrad dx = clipped ? 0 : dy;
/// with kOutliers, elements of outlier columns pass x (dy) through.
template <typename T, Grid grid, bool kGrad, bool kOutliers>
__global__ void fakeQuantMap(const T *x, const T *dy, const uint8_t *pass, int64_t columns,
                             GroupLayout l, const float *scales, const float *zps,
                             const float *live, FormatConsts k, T *out) {
  LLMC_GRID_STRIDE(i, l.numel) {
    const int64_t g = l.groups == 1 ? 0 : i / l.inner % l.groups;
    const float value = load(x, i);
    const bool on = live[g] != 0.0f;
    const bool through = kOutliers && pass[i % columns] != 0;
    if constexpr (kGrad) {
      // An empty range counts every nonzero x as clipped.
      bool clipped = on ? isClipped<grid>(value, scales[g], zps[g], k) : value != 0.0f;
      store(out, i, clipped && !through ? 0.0f : load(dy, i));
    } else {
      float q = on ? quantDequant<grid>(value, scales[g], zps[g], k) : 0.0f;
      store(out, i, through ? value : q);
    }
  }
}

/// Both kernels: `grad` reads dy (input 2) and writes dx. With outlier
/// columns, the columns input follows (input 2, or 3 for grad).
template <typename T> class FakeQuantKernel final : public Kernel {
public:
  FakeQuantKernel(const KernelArgs &args, Scheme s, GroupLayout layout, bool grad)
      : x_(args.inputs[0].as<T>()), range_(args.inputs[1].as<float>()),
        dy_(grad ? args.inputs[2].as<T>() : nullptr),
        columns_(s.outlier > 0.0 ? args.inputs[grad ? 3 : 2].as<float>() : nullptr),
        out_(args.outputs[0].as<T>()), grad_(grad), l_(layout), scheme_(s),
        consts_(formatConsts(s.format)),
        grid_(quant::gridOf(s)),
        cols_(args.inputs[0].dim(-1)),
        grids_(sizeof(float) * 3 * static_cast<size_t>(layout.groups)),
        pass_(columns_ ? static_cast<size_t>(cols_) : 0) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    float *scales = grids_.as<float>(), *zps = scales + l_.groups, *live = zps + l_.groups;
    switch (grid_) {
    case Grid::IntSymmetric: launchGrids<Grid::IntSymmetric>(stream, scales, zps, live); break;
    case Grid::IntAsymmetric: launchGrids<Grid::IntAsymmetric>(stream, scales, zps, live); break;
    case Grid::Fp8: launchGrids<Grid::Fp8>(stream, scales, zps, live); break;
    case Grid::Nf4: launchGrids<Grid::Nf4>(stream, scales, zps, live); break;
    }
    if (columns_) {
      markOutlierColumns<<<gridFor(cols_), kBlock, 0, stream>>>(columns_, cols_, scheme_.outlier,
                                                                 pass_.as<uint8_t>());
      LLMC_CUDA_CHECK_LAUNCH();
      // Integer grids only (checked at bind time).
      if (grid_ == Grid::IntSymmetric) return map<Grid::IntSymmetric, true>(stream);
      return map<Grid::IntAsymmetric, true>(stream);
    }
    switch (grid_) {
    case Grid::IntSymmetric: return map<Grid::IntSymmetric, false>(stream);
    case Grid::IntAsymmetric: return map<Grid::IntAsymmetric, false>(stream);
    case Grid::Fp8: return map<Grid::Fp8, false>(stream);
    case Grid::Nf4: return map<Grid::Nf4, false>(stream);
    }
  }

private:
  template <Grid grid>
  void launchGrids(cudaStream_t stream, float *scales, float *zps, float *live) {
    computeGrids<grid><<<gridFor(l_.groups), kBlock, 0, stream>>>(
        range_, l_.groups, scheme_.symmetric, consts_, scales, zps, live);
    LLMC_CUDA_CHECK_LAUNCH();
  }

  template <Grid grid, bool kOutliers> void map(cudaStream_t stream) {
    const float *scales = grids_.as<float>(), *zps = scales + l_.groups, *live = zps + l_.groups;
    const uint8_t *pass = kOutliers ? pass_.as<uint8_t>() : nullptr;
    const int blocks = gridFor(l_.numel);
    if (grad_)
      fakeQuantMap<T, grid, true, kOutliers><<<blocks, kBlock, 0, stream>>>(
          x_, dy_, pass, cols_, l_, scales, zps, live, consts_, out_);
    else
      fakeQuantMap<T, grid, false, kOutliers><<<blocks, kBlock, 0, stream>>>(
          x_, dy_, pass, cols_, l_, scales, zps, live, consts_, out_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

  const T *x_;
  const float *range_;
  const T *dy_;          ///< null for the forward
  const float *columns_; ///< per-column ranges; null without outlier columns
  T *out_;
  bool grad_;
  GroupLayout l_;
  Scheme scheme_;
  FormatConsts consts_;
  Grid grid_;
  int64_t cols_; ///< x's last dimension
  BindScratch grids_; ///< per group: scales, then zero points, then live flags
  BindScratch pass_;  ///< per column: 1 outlier (passes through), 0 kept
};

std::unique_ptr<Kernel> makeCudaFakeQuant(const KernelArgs &args, std::string &error) {
  contracts::QatFakeQuantBinding b;
  if (!contracts::bindQatFakeQuant(args, error, &b)) return nullptr;
  return makeFloatKernel<FakeQuantKernel>(b.dtype, args, b.scheme, b.layout, false);
}
std::unique_ptr<Kernel> makeCudaFakeQuantGrad(const KernelArgs &args, std::string &error) {
  contracts::QatFakeQuantBinding b;
  if (!contracts::bindQatFakeQuantGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<FakeQuantKernel>(b.dtype, args, b.scheme, b.layout, true);
}

//===----------------------------------------------------------------------===//
// qat_ema
//===----------------------------------------------------------------------===//

/// One thread per group, which reads both its entries before writing them,
/// so new_state may be state (in place). The blend is two products and a
/// sum, each rounded (__fmul_rn/__fadd_rn: never fused into an FMA).
__global__ void emaKernel(const float *state, const float *observed, float *out, int64_t groups,
                          float momentum, float keep) {
  LLMC_GRID_STRIDE(g, groups) {
    float s0 = state[2 * g], s1 = state[2 * g + 1], o0 = observed[2 * g],
          o1 = observed[2 * g + 1];
    bool fresh = s0 == 0.0f && s1 == 0.0f; // never observed
    out[2 * g] = fresh ? o0 : __fadd_rn(__fmul_rn(momentum, s0), __fmul_rn(keep, o0));
    out[2 * g + 1] = fresh ? o1 : __fadd_rn(__fmul_rn(momentum, s1), __fmul_rn(keep, o1));
  }
}

class EmaKernel final : public Kernel {
public:
  EmaKernel(const KernelArgs &args, float momentum)
      : state_(args.inputs[0].as<float>()), observed_(args.inputs[1].as<float>()),
        out_(args.outputs[0].as<float>()), groups_(args.inputs[0].dim(0)), momentum_(momentum) {}

  void run(const StepContext &ctx) override {
    emaKernel<<<gridFor(groups_), kBlock, 0, streamOf(ctx)>>>(state_, observed_, out_, groups_,
                                                              momentum_, 1.0f - momentum_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const float *state_, *observed_;
  float *out_;
  int64_t groups_;
  float momentum_;
};

std::unique_ptr<Kernel> makeCudaEma(const KernelArgs &args, std::string &error) {
  contracts::QatEmaBinding b;
  if (!contracts::bindQatEma(args, error, &b)) return nullptr;
  return std::make_unique<EmaKernel>(args, static_cast<float>(b.momentum));
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "qat_observe", makeCudaObserve);
LLMC_REGISTER_KERNEL(CUDA, "qat_fake_quant", makeCudaFakeQuant);
LLMC_REGISTER_KERNEL(CUDA, "qat_fake_quant_grad", makeCudaFakeQuantGrad);
LLMC_REGISTER_KERNEL(CUDA, "qat_ema", makeCudaEma);

} // namespace llmc::cuda
