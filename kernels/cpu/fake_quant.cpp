//===- fake_quant.cpp - QAT observers and quantize-dequantize -------------===//
//
// qat_observe, qat_fake_quant, qat_fake_quant_grad and qat_ema; the math is
// common/QuantScheme.h, in fp32 operation for operation as written there
// (x / scale, not x · (1/scale)), so the grid a value lands on, and every
// rounding tie, is the one the reference and the CUDA kernels pick.
//
// Every granularity is the same view of x as [outer, G, inner], element i
// being in group (i / inner) % G: tensor [1, 1, n], channel [dims before
// axis, shape[axis], dims after], block [1, n / block, block]. A call first
// turns each group's range into its scale and zero point (once per group,
// into scratch sized at bind time), then streams x in fixed chunks, each
// chunk a few runs of one group, so the hot loop has a constant scale.
// Channels of the last axis (inner = 1) walk the groups element by element
// instead, reading the per-group values as arrays. The observer reduces
// groups in place when there are enough of them to share out, else each
// thread reduces chunks into its own copy of the ranges.
//
// fp8 rounding is common/Fp8.h's, the one every fp8 path shares (written on
// the bits, so the loop vectorises). NF4 compares the value with
// the 15 midpoints between levels, each held as the largest float not above
// the exact midpoint, so a value exactly on one takes the lower level.
//
// Outlier columns (attribute `outlier` > 0, an extra `columns` input of
// per-column ranges) take separate, row-wise paths, leaving the loops above
// as they are: x is viewed as [rows, C], each call first marks the outlier
// columns, and a row's elements select between quantize-dequantize and
// passing through by a per-column flag. Every group of a tensor or channel
// scheme is constant along a row, except channels of the last axis, where
// the group is the column (isPerColumn).
//
//===----------------------------------------------------------------------===//

#include "common/Fp8.h"
#include "common/QuantScheme.h"
#include "kernels/contracts/FakeQuant.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

using quant::Format;
using quant::Granularity;
using quant::Scheme;

/// A scheme's groups as the [outer, groups, inner] view of x.
using GroupLayout = contracts::QuantGroupLayout;

/// Calls fn(begin, end, g, step) for the runs of [begin, end): element j of
/// a run is in group g + step·(j − begin); step is 0 except for channels of
/// the last axis.
template <typename Fn> void forRuns(const GroupLayout &l, int64_t begin, int64_t end, Fn &&fn) {
  if (l.inner == 1 && l.groups > 1) {
    for (int64_t i = begin; i < end;) {
      int64_t g = i % l.groups, stop = std::min(end, i + (l.groups - g));
      fn(i, stop, g, int64_t(1));
      i = stop;
    }
    return;
  }
  for (int64_t i = begin; i < end;) {
    int64_t run = i / l.inner, stop = std::min(end, (run + 1) * l.inner);
    fn(i, stop, run % l.groups, int64_t(0));
    i = stop;
  }
}

/// Elements per chunk of the parallel loops.
constexpr int64_t kChunk = 1 << 13;

/// forRuns over all of x, chunks spread over the threads.
template <typename Fn> void parallelRuns(const GroupLayout &l, Fn &&fn) {
  const int64_t chunks = (l.numel + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (l.numel > kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c)
    forRuns(l, c * kChunk, std::min(l.numel, (c + 1) * kChunk), fn);
}

//===----------------------------------------------------------------------===//
// Helpers of the outlier-column paths
//===----------------------------------------------------------------------===//

/// pass[c] = 1 for an outlier column of `s`, else 0 (QuantScheme.h).
void markOutlierColumns(const Scheme &s, const float *columns, int64_t n, float *pass) {
  for (int64_t c = 0; c < n; ++c)
    pass[c] = quant::isOutlierColumn(s, columns[2 * c], columns[2 * c + 1]) ? 1.0f : 0.0f;
}

/// Whether the groups are the columns of x viewed as [rows, C]: channels of
/// the last axis. (Channels of an axis followed only by size-1 dims also
/// have inner = 1, but there each row is one channel.)
inline bool isPerColumn(const GroupLayout &l, int64_t columns) {
  return l.inner == 1 && l.groups > 1 && l.groups == columns;
}

/// The group of row r of x viewed as [rows, C] (tensor, or channels of an
/// axis before the last; constant along the row, as inner is a multiple
/// of C).
inline int64_t rowGroup(const GroupLayout &l, int64_t r, int64_t columns) {
  return (r * columns / l.inner) % l.groups;
}

//===----------------------------------------------------------------------===//
// qat_observe
//===----------------------------------------------------------------------===//

template <typename T> class ObserveKernel final : public Kernel {
public:
  ObserveKernel(const KernelArgs &args, GroupLayout layout)
      : x_(args.inputs[0].as<T>()), range_(args.outputs[0].as<float>()), l_(layout),
        threads_(bindThreads()) {
    // Few groups: per-thread partial ranges of every group, combined after.
    if (l_.groups < threads_) partial_.resize(static_cast<size_t>(threads_ * l_.groups * 2));
  }

  void run(const StepContext &) override {
    if (partial_.empty() || l_.numel <= kParallelGrain)
      byGroups();
    else
      byChunks();
  }

private:
  /// Threads own disjoint groups and update the output directly.
  void byGroups() {
    const T *x = x_;
    float *range = range_;
    const int64_t groups = l_.groups, inner = l_.inner, outer = l_.outer;
#pragma omp parallel num_threads(threads_) if (l_.numel > kParallelGrain)
    {
      int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t g0 = groups * t / nt, g1 = groups * (t + 1) / nt;
      std::fill(range + 2 * g0, range + 2 * g1, kNegInf);
      if (inner == 1) { // channels of the last axis: a row holds one element of each
        for (int64_t o = 0; o < outer; ++o) {
          const T *row = x + o * groups;
          for (int64_t g = g0; g < g1; ++g) {
            float value = load(row, g);
            range[2 * g] = std::max(range[2 * g], -value);
            range[2 * g + 1] = std::max(range[2 * g + 1], value);
          }
        }
      } else {
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t g = g0; g < g1; ++g) {
            const T *p = x + (o * groups + g) * inner;
            float negMin = range[2 * g], max = range[2 * g + 1];
#pragma omp simd reduction(max : negMin, max)
            for (int64_t k = 0; k < inner; ++k) {
              float value = load(p, k);
              negMin = std::max(negMin, -value);
              max = std::max(max, value);
            }
            range[2 * g] = negMin, range[2 * g + 1] = max;
          }
      }
    }
  }

  /// Fewer groups than threads: every thread reduces chunks of x into its
  /// own copy of the ranges.
  void byChunks() {
    const T *x = x_;
    const int64_t groups = l_.groups;
    std::fill(partial_.begin(), partial_.end(), kNegInf);
    float *partial = partial_.data();
#pragma omp parallel num_threads(threads_)
    {
      float *mine = partial + omp_get_thread_num() * groups * 2;
      const int64_t chunks = (l_.numel + kChunk - 1) / kChunk;
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks; ++c)
        forRuns(l_, c * kChunk, std::min(l_.numel, (c + 1) * kChunk),
                [&](int64_t begin, int64_t end, int64_t g, int64_t step) {
                  const T *xs = x + begin;
                  const int64_t n = end - begin;
                  if (step != 0) {
                    float *r = mine + 2 * g;
                    for (int64_t i = 0; i < n; ++i) {
                      float value = load(xs, i);
                      r[2 * i] = std::max(r[2 * i], -value);
                      r[2 * i + 1] = std::max(r[2 * i + 1], value);
                    }
                    return;
                  }
                  float negMin = mine[2 * g], max = mine[2 * g + 1];
#pragma omp simd reduction(max : negMin, max)
                  for (int64_t i = 0; i < n; ++i) {
                    float value = load(xs, i);
                    negMin = std::max(negMin, -value);
                    max = std::max(max, value);
                  }
                  mine[2 * g] = negMin, mine[2 * g + 1] = max;
                });
    }
    for (int64_t i = 0; i < 2 * groups; ++i) {
      float best = kNegInf;
      for (int t = 0; t < threads_; ++t) best = std::max(best, partial[t * groups * 2 + i]);
      range_[i] = best;
    }
  }

  const T *x_;
  float *range_;
  GroupLayout l_;
  int threads_;
  std::vector<float> partial_; ///< [threads][groups][2], only when groups < threads
};

/// The observer with outlier columns: each thread reduces a share of the
/// rows into its own copy of the ranges, leaving out the outlier columns
/// (an element there contributes −inf, the identity of the max).
template <typename T> class OutlierObserveKernel final : public Kernel {
public:
  OutlierObserveKernel(const KernelArgs &args, Scheme s, GroupLayout layout)
      : x_(args.inputs[0].as<T>()), columns_(args.inputs[1].as<float>()),
        range_(args.outputs[0].as<float>()), l_(layout), s_(s), cols_(args.inputs[0].dim(-1)),
        threads_(bindThreads()), pass_(static_cast<size_t>(cols_)),
        partial_(static_cast<size_t>(threads_ * l_.groups * 2)) {}

  void run(const StepContext &) override {
    markOutlierColumns(s_, columns_, cols_, pass_.data());
    std::fill(partial_.begin(), partial_.end(), kNegInf);
    const T *x = x_;
    const float *pass = pass_.data();
    float *partial = partial_.data();
    const int64_t C = cols_, rows = l_.numel / C, groups = l_.groups;
    const bool perColumn = isPerColumn(l_, C);
#pragma omp parallel num_threads(threads_) if (l_.numel > kParallelGrain)
    {
      float *mine = partial + omp_get_thread_num() * groups * 2;
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const T *row = x + r * C;
        if (perColumn) {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            float value = load(row, c);
            bool kept = pass[c] == 0.0f;
            mine[2 * c] = std::max(mine[2 * c], kept ? -value : kNegInf);
            mine[2 * c + 1] = std::max(mine[2 * c + 1], kept ? value : kNegInf);
          }
          continue;
        }
        int64_t g = rowGroup(l_, r, C);
        float negMin = mine[2 * g], max = mine[2 * g + 1];
#pragma omp simd reduction(max : negMin, max)
        for (int64_t c = 0; c < C; ++c) {
          float value = load(row, c);
          bool kept = pass[c] == 0.0f;
          negMin = std::max(negMin, kept ? -value : kNegInf);
          max = std::max(max, kept ? value : kNegInf);
        }
        mine[2 * g] = negMin, mine[2 * g + 1] = max;
      }
    }
    for (int64_t i = 0; i < 2 * groups; ++i) {
      float best = kNegInf;
      for (int t = 0; t < threads_; ++t) best = std::max(best, partial[t * groups * 2 + i]);
      range_[i] = best;
    }
  }

private:
  const T *x_;
  const float *columns_;
  float *range_;
  GroupLayout l_;
  Scheme s_;
  int64_t cols_;
  int threads_;
  std::vector<float> pass_;    ///< per column: 1 outlier, 0 kept
  std::vector<float> partial_; ///< [threads][groups][2]
};

std::unique_ptr<Kernel> makeObserve(const KernelArgs &args, std::string &error) {
  contracts::QatObserveBinding b;
  if (!contracts::bindQatObserve(args, error, &b)) return nullptr;
  if (b.scheme.outlier > 0.0)
    return makeFloatKernel<OutlierObserveKernel>(b.dtype, args, b.scheme, b.layout);
  return makeFloatKernel<ObserveKernel>(b.dtype, args, b.layout);
}

//===----------------------------------------------------------------------===//
// qat_fake_quant, qat_fake_quant_grad
//===----------------------------------------------------------------------===//

using quant::FormatConsts;
using quant::Grid;
using quant::formatConsts;

/// v (|v| ≤ fmax) rounded to the fp8 format of k.
inline float roundFp8(float v, const FormatConsts &k) {
  return fp8::roundToGrid(v, k.mbits, k.emin);
}

/// The NF4 level nearest c ∈ [−1, 1], ties to the lower.
inline float nearestNf4(float c, const FormatConsts &k) {
  float level = quant::kNf4Levels[0];
  for (int i = 0; i < 15; ++i) level = c > k.nf4Threshold[i] ? quant::kNf4Levels[i + 1] : level;
  return level;
}

/// y for a live group of `scale` (amax for NF4) and zero point `zp` (amax
/// for fp8, which has none).
template <Grid grid>
inline float quantDequant(float x, float scale, float zp, const FormatConsts &k) {
  if constexpr (grid == Grid::IntSymmetric) {
    float q = std::nearbyint(x / scale);
    return std::clamp(q, -k.qmax, k.qmax) * scale;
  } else if constexpr (grid == Grid::IntAsymmetric) {
    float q = std::nearbyint(x / scale) + zp;
    return (std::clamp(q, k.qmin, k.qmax) - zp) * scale;
  } else if constexpr (grid == Grid::Fp8) {
    return roundFp8(std::clamp(x / scale, -k.fmax, k.fmax), k) * scale;
  } else {
    return nearestNf4(std::clamp(x / scale, -1.0f, 1.0f), k) * scale;
  }
}

/// Whether x is clipped in a live group.
template <Grid grid> inline bool isClipped(float x, float scale, float zp, const FormatConsts &k) {
  if constexpr (grid == Grid::IntSymmetric) {
    return std::fabs(std::nearbyint(x / scale)) > k.qmax;
  } else if constexpr (grid == Grid::IntAsymmetric) {
    float q = std::nearbyint(x / scale) + zp;
    return q < k.qmin || q > k.qmax;
  } else if constexpr (grid == Grid::Fp8) {
    return std::fabs(x) > zp; // zp holds the group's amax
  } else {
    return std::fabs(x / scale) > 1.0f;
  }
}

/// Both kernels: `grad` reads dy (input 2) and writes dx = clipped ? 0 : dy.
/// With outlier columns, the columns input follows (input 2, or 3 for grad).
template <typename T> class FakeQuantKernel final : public Kernel {
public:
  FakeQuantKernel(const KernelArgs &args, Scheme s, GroupLayout layout, bool grad)
      : x_(args.inputs[0].as<T>()), range_(args.inputs[1].as<float>()),
        dy_(grad ? args.inputs[2].as<T>() : nullptr),
        columns_(s.outlier > 0.0 ? args.inputs[grad ? 3 : 2].as<float>() : nullptr),
        out_(args.outputs[0].as<T>()), grad_(grad), l_(layout), scheme_(s),
        consts_(formatConsts(s.format)),
        grid_(quant::gridOf(s)),
        grids_(static_cast<size_t>(3 * layout.groups)), cols_(args.inputs[0].dim(-1)),
        pass_(columns_ ? static_cast<size_t>(cols_) : 0) {}

  void run(const StepContext &) override {
    computeGrids();
    if (columns_) {
      // Integer grids only (checked at bind time).
      markOutlierColumns(scheme_, columns_, cols_, pass_.data());
      if (grid_ == Grid::IntSymmetric)
        return grad_ ? gradOutliers<Grid::IntSymmetric>() : forwardOutliers<Grid::IntSymmetric>();
      return grad_ ? gradOutliers<Grid::IntAsymmetric>() : forwardOutliers<Grid::IntAsymmetric>();
    }
    switch (grid_) {
    case Grid::IntSymmetric:
      return grad_ ? grad<Grid::IntSymmetric>() : forward<Grid::IntSymmetric>();
    case Grid::IntAsymmetric:
      return grad_ ? grad<Grid::IntAsymmetric>() : forward<Grid::IntAsymmetric>();
    case Grid::Fp8: return grad_ ? grad<Grid::Fp8>() : forward<Grid::Fp8>();
    case Grid::Nf4: return grad_ ? grad<Grid::Nf4>() : forward<Grid::Nf4>();
    }
  }

private:
  /// Scale and zero point of every group (QuantScheme.h, in fp32).
  void computeGrids() {
    const float *range = range_;
    const FormatConsts &k = consts_;
    const bool symmetric = scheme_.symmetric;
    const Grid grid = grid_;
    const float fullScale = grid == Grid::Fp8 ? k.fmax : grid == Grid::Nf4 ? 1.0f : k.qmax;
    const int64_t n = l_.groups;
    float *scales = grids_.data(), *zps = scales + n, *live = zps + n;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t g = 0; g < n; ++g) {
      float negMin = range[2 * g], max = range[2 * g + 1];
      if (symmetric) {
        float amax = std::max(negMin, max);
        live[g] = amax > 0.0f ? 1.0f : 0.0f;
        scales[g] = grid == Grid::Nf4 ? amax : amax / fullScale;
        // fp8 clips beyond amax itself (amax / scale can exceed fmax by an
        // ulp); the slot holds it, as fp8 has no zero point.
        zps[g] = grid == Grid::Fp8 ? amax : 0.0f;
      } else {
        float lo = std::min(-negMin, 0.0f), hi = std::max(max, 0.0f);
        float scale = (hi - lo) / (k.qmax - k.qmin);
        live[g] = hi - lo > 0.0f ? 1.0f : 0.0f;
        scales[g] = scale;
        zps[g] = std::clamp(std::nearbyint(k.qmin - lo / scale), k.qmin, k.qmax);
      }
    }
  }

  template <Grid grid> void forward() {
    const T *x = x_;
    T *y = out_;
    const int64_t groups = l_.groups;
    const float *scales = grids_.data(), *zps = scales + groups, *live = zps + groups;
    const FormatConsts &k = consts_;
    parallelRuns(l_, [&](int64_t begin, int64_t end, int64_t g, int64_t step) {
      const T *xs = x + begin;
      T *ys = y + begin;
      const int64_t n = end - begin;
      if (step != 0) {
        // Computed for empty groups too (a harmless x / 0), then selected,
        // so the loop has no branch and vectorises.
        const float *scale = scales + g, *zp = zps + g, *on = live + g;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          float value = quantDequant<grid>(load(xs, i), scale[i], zp[i], k);
          store(ys, i, on[i] != 0.0f ? value : 0.0f);
        }
        return;
      }
      const float scale = scales[g], zp = zps[g];
      if (live[g] == 0.0f) {
        for (int64_t i = 0; i < n; ++i) store(ys, i, 0.0f);
        return;
      }
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) store(ys, i, quantDequant<grid>(load(xs, i), scale, zp, k));
    });
  }

  template <Grid grid> void grad() {
    const T *x = x_, *dy = dy_;
    T *dx = out_;
    const int64_t groups = l_.groups;
    const float *scales = grids_.data(), *zps = scales + groups, *live = zps + groups;
    const FormatConsts &k = consts_;
    parallelRuns(l_, [&](int64_t begin, int64_t end, int64_t g, int64_t step) {
      const T *xs = x + begin, *dys = dy + begin;
      T *dxs = dx + begin;
      const int64_t n = end - begin;
      if (step != 0) {
        const float *scale = scales + g, *zp = zps + g, *on = live + g;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          float value = load(xs, i);
          bool clippedIfLive = isClipped<grid>(value, scale[i], zp[i], k);
          bool clipped = on[i] != 0.0f ? clippedIfLive : value != 0.0f;
          store(dxs, i, clipped ? 0.0f : load(dys, i));
        }
        return;
      }
      const float scale = scales[g], zp = zps[g];
      if (live[g] == 0.0f) { // an empty range: every nonzero x counts as clipped
        for (int64_t i = 0; i < n; ++i) store(dxs, i, load(xs, i) != 0.0f ? 0.0f : load(dys, i));
        return;
      }
#pragma omp simd
      for (int64_t i = 0; i < n; ++i)
        store(dxs, i, isClipped<grid>(load(xs, i), scale, zp, k) ? 0.0f : load(dys, i));
    });
  }

  /// forward() with outlier columns passed through, row by row.
  template <Grid grid> void forwardOutliers() {
    const T *x = x_;
    T *y = out_;
    const int64_t groups = l_.groups, C = cols_, rows = l_.numel / C;
    const float *scales = grids_.data(), *zps = scales + groups, *live = zps + groups;
    const float *pass = pass_.data();
    const FormatConsts &k = consts_;
    const bool perColumn = isPerColumn(l_, C);
#pragma omp parallel for schedule(static) if (l_.numel > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T *xs = x + r * C;
      T *ys = y + r * C;
      if (perColumn) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          float value = load(xs, c);
          float q = live[c] != 0.0f ? quantDequant<grid>(value, scales[c], zps[c], k) : 0.0f;
          store(ys, c, pass[c] != 0.0f ? value : q);
        }
        continue;
      }
      const int64_t g = rowGroup(l_, r, C);
      const float scale = scales[g], zp = zps[g];
      const bool on = live[g] != 0.0f;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        float value = load(xs, c);
        float q = on ? quantDequant<grid>(value, scale, zp, k) : 0.0f;
        store(ys, c, pass[c] != 0.0f ? value : q);
      }
    }
  }

  /// grad() with outlier columns passing dy whole, row by row.
  template <Grid grid> void gradOutliers() {
    const T *x = x_, *dy = dy_;
    T *dx = out_;
    const int64_t groups = l_.groups, C = cols_, rows = l_.numel / C;
    const float *scales = grids_.data(), *zps = scales + groups, *live = zps + groups;
    const float *pass = pass_.data();
    const FormatConsts &k = consts_;
    const bool perColumn = isPerColumn(l_, C);
#pragma omp parallel for schedule(static) if (l_.numel > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T *xs = x + r * C, *dys = dy + r * C;
      T *dxs = dx + r * C;
      if (perColumn) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          float value = load(xs, c);
          bool clipped = live[c] != 0.0f ? isClipped<grid>(value, scales[c], zps[c], k)
                                         : value != 0.0f;
          store(dxs, c, clipped && pass[c] == 0.0f ? 0.0f : load(dys, c));
        }
        continue;
      }
      const int64_t g = rowGroup(l_, r, C);
      const float scale = scales[g], zp = zps[g];
      const bool on = live[g] != 0.0f;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        float value = load(xs, c);
        bool clipped = on ? isClipped<grid>(value, scale, zp, k) : value != 0.0f;
        store(dxs, c, clipped && pass[c] == 0.0f ? 0.0f : load(dys, c));
      }
    }
  }

  const T *x_;
  const float *range_;
  const T *dy_;           ///< null for the forward
  const float *columns_;  ///< per-column ranges; null without outlier columns
  T *out_;
  bool grad_;
  GroupLayout l_;
  Scheme scheme_;
  FormatConsts consts_;
  Grid grid_;
  /// Per group, computed each call: scales, then zero points, then 1/0 for
  /// a live/empty range (y = 0 for every x of an empty one).
  std::vector<float> grids_;
  int64_t cols_;            ///< x's last dimension
  std::vector<float> pass_; ///< per column, each call: 1 outlier (passes through), 0 kept
};

std::unique_ptr<Kernel> makeFakeQuant(const KernelArgs &args, std::string &error) {
  contracts::QatFakeQuantBinding b;
  if (!contracts::bindQatFakeQuant(args, error, &b)) return nullptr;
  return makeFloatKernel<FakeQuantKernel>(b.dtype, args, b.scheme, b.layout, false);
}
std::unique_ptr<Kernel> makeFakeQuantGrad(const KernelArgs &args, std::string &error) {
  contracts::QatFakeQuantBinding b;
  if (!contracts::bindQatFakeQuantGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<FakeQuantKernel>(b.dtype, args, b.scheme, b.layout, true);
}

//===----------------------------------------------------------------------===//
// qat_ema
//===----------------------------------------------------------------------===//

/// In place (new_state = state) is allowed: a group reads both its entries
/// before writing them.
class EmaKernel final : public Kernel {
public:
  EmaKernel(const KernelArgs &args, float momentum)
      : state_(args.inputs[0].as<float>()), observed_(args.inputs[1].as<float>()),
        out_(args.outputs[0].as<float>()), groups_(args.inputs[0].dim(0)), momentum_(momentum) {}

  void run(const StepContext &) override {
    const float *state = state_, *observed = observed_;
    float *out = out_;
    const float m = momentum_, keep = 1.0f - momentum_;
#pragma omp parallel for schedule(static) if (groups_ > kParallelGrain)
    for (int64_t g = 0; g < groups_; ++g) {
      float s0 = state[2 * g], s1 = state[2 * g + 1], o0 = observed[2 * g],
            o1 = observed[2 * g + 1];
      bool fresh = s0 == 0.0f && s1 == 0.0f; // never observed
      out[2 * g] = fresh ? o0 : m * s0 + keep * o0;
      out[2 * g + 1] = fresh ? o1 : m * s1 + keep * o1;
    }
  }

private:
  const float *state_, *observed_;
  float *out_;
  int64_t groups_;
  float momentum_;
};

std::unique_ptr<Kernel> makeEma(const KernelArgs &args, std::string &error) {
  contracts::QatEmaBinding b;
  if (!contracts::bindQatEma(args, error, &b)) return nullptr;
  return std::make_unique<EmaKernel>(args, static_cast<float>(b.momentum));
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "qat_observe", makeObserve);
LLMC_REGISTER_KERNEL(CPU, "qat_fake_quant", makeFakeQuant);
LLMC_REGISTER_KERNEL(CPU, "qat_fake_quant_grad", makeFakeQuantGrad);
LLMC_REGISTER_KERNEL(CPU, "qat_ema", makeEma);

} // namespace llmc::cpu
