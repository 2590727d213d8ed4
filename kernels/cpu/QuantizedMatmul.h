//===- QuantizedMatmul.h - x · W with W expanded inside the product -*- C++ -*-===//
//
// The CPU kernel behind matmul_nf4 and matmul_int: y[m, :] = x[m, :] · W
// (or · Wᵀ), W held in quantized storage that an Expander turns into fp32
// a piece at a time. W is never expanded whole: a decode step is memory
// bound, and reading 4–8 bits per weight instead of 32 is the point. The
// tiling below is QuantizedGemm, which matmul's kernel runs at its rows and
// the grouped kernels (grouped_matmul_int, grouped_matmul_nf4: a mixture
// of experts' stacked weights) run at each expert's rows with an expander
// over that expert's storage, so an expert's decode rows take the same
// paths a dense decode product takes.
//
//  - Few rows (M ≤ kFewRows, a decode step): threads share out the output
//    columns. W [K, N]: a thread takes a tile of columns (its share of N
//    where its accumulators fit, in whole groups of the storage), expands
//    a few rows of it at a time into its own L1-sized scratch — each a
//    contiguous read of the codes, so the prefetchers keep up — and adds
//    x[m, k] · row into an fp32 accumulator over the tile's contiguous
//    columns. One row of x (batch 1) multiplies each weight in as it is
//    expanded. W [N, K] (transpose_b): a thread expands a few rows of W and
//    takes each one's dot product with every row of x. No BLAS here:
//    OpenBLAS must not be called from inside an OpenMP region.
//  - Many rows (prefill): W is expanded one column chunk (a few MiB) at a
//    time into scratch allocated at bind time, and sgemm writes that chunk's
//    columns of y (ldc = N). The expansion costs K·N, the product M·K·N.
//
// An Expander, over W flattened row-major:
//   void operator()(int64_t first, int64_t count, float *out) const;
//       out[j] = W[first + j]
//   bool canAccumulate(int64_t first, int64_t count) const;
//   void accumulate(int64_t first, int64_t count, float xv, float *acc) const;
//       acc[j] += xv · W[first + j] (for ranges canAccumulate accepts)
//   int64_t alignment() const;  columns a tile is a multiple of
//   bool canDotRows(int64_t k) const;  whether dotRows takes W [N, K]
//   bool stepsEvensThenOdds() const;  dotRows steps x permuted, evens then
//       odds in every 32 (4-bit and E4M3 codes)
//   void dotRows(int64_t r0, int64_t r1, const decode::Rows &d, bool avx512) const;
//       rows [r0, r1) of y = x · Wᵀ, decoded in registers (DecodeGemv.h)
//   bool canDotQuantized(int64_t k) const;  whether dotQuantized takes W [N, K]
//   decode::QLayout quantizedLayout() const;  how it wants x quantized
//   void dotQuantized(int64_t r0, int64_t r1, const decode::QRows &d) const;
//       rows [r0, r1) of y = x · Wᵀ with x quantized to int8 per 32
//       (DecodeGemvInt8.h)
//   bool packs() const;  whether those products may run from a repacked
//       copy (DecodeGemvPacked.h), made when the kernel is prepared with
//       its weights constant (Kernel::prepare)
//   decode::QLayout packedLayout() const;  how the copy's body wants x
//   std::shared_ptr<const decode::PackedNibbles> pack(int64_t n, int64_t k) const;
//       that copy
// W [N, K] with few rows goes to dotQuantized, else dotRows, where the
// expander takes it: a decode step's weights are multiplied from their
// codes, never expanded into memory.
// bf16 and f16 x are widened into fp32 scratch and y rounded back once.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_QUANTIZEDMATMUL_H
#define LLMC_KERNELS_CPU_QUANTIZEDMATMUL_H

#include "kernels/contracts/QuantizedMatmul.h"
#include "kernels/cpu/Blas.h"
#include "kernels/cpu/Common.h"
#include "kernels/cpu/DecodeGemv.h"
#include "kernels/cpu/DecodeGemvPacked.h"
#include "kernels/cpu/DecodeGemvQuantized.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace llmc::cpu {

/// The product y [m, N] = x [m, K] · W (fp32), W read through the Expander
/// passed to run(): the paths above, chosen by m on each call. Planned for
/// `d.m` rows alone (matmul's kernel), or with `anyRows` for every m up to
/// d.m, the scratch sized once for the largest need (the grouped kernels,
/// which run it at each expert's rows with that expert's expander).
template <typename Expander> class QuantizedGemm {
public:
  /// Rows up to which the product is a per-thread tile loop, not sgemm.
  static constexpr int64_t kFewRows = 16;

  QuantizedGemm(const contracts::QuantizedProduct &d, const Expander &like, SgemmFn sgemm,
                bool anyRows)
      : d_(d), sgemm_(sgemm), align_(like.alignment()), threads_(bindThreads()) {
    // The most rows a few-rows call can have (0: none comes).
    const int64_t few = anyRows ? std::min(d.m, kFewRows) : d.m <= kFewRows ? d.m : 0;
    if (few > 0 && d.transposeB && like.canDotQuantized(d.k)) {
      // A copy per weight: not for the grouped kernels' experts.
      pack_ = !anyRows && like.packs();
      few_ = few;
      qx_.resize(like.quantizedLayout(), few, d.k);
    } else if (few > 0 && d.transposeB && like.canDotRows(d.k)) {
      dotRows_ = true;
      avx512_ = useAvx512();
      if (like.stepsEvensThenOdds())
        xStep_.resize(few * d.k);
    } else if (few > 0) {
      // Per thread: W [N, K]: a few rows of W expanded; W [K, N]: a column
      // tile's accumulators and k-chunk of expanded rows (the widest of
      // any m up to `few`).
      perThread_ = d.transposeB ? kRowGroup * d.k : 0;
      for (int64_t m = anyRows ? 1 : few; !d.transposeB && m <= few; ++m)
        perThread_ = std::max(perThread_, tileOf(m).perThread);
      scratch_.resize(perThread_ * threads_);
    }
    if (d.m > kFewRows) {
      chunk_ = std::max<int64_t>(1, kChunkBytes / (4 * d.k));
      if (!d.transposeB && chunk_ >= align_)
        chunk_ -= chunk_ % align_;
      chunk_ = std::min(chunk_, d.n);
      scratch_.resize(std::max<size_t>(scratch_.size(), chunk_ * d.k));
    }
  }

  /// Makes the repacked copy of W for the few-rows products that take
  /// one (Kernel::prepare: the weights loaded and constant).
  void prepare(const Expander &expand) {
    if (!pack_ || packed_)
      return;
    packed_ = expand.pack(d_.n, d_.k);
    if (packed_) // else (no memory for it) the codes in place
      qx_.resize(expand.packedLayout(), few_, d_.k);
  }

  /// y [m, N] = x [m, K] · W, m <= the planned rows.
  void run(const Expander &expand, const float *x, float *y, int64_t m) {
    if (m == 0)
      return;
    if (m > kFewRows)
      manyRows(expand, x, y, m);
    else if (qx_.k > 0)
      fewRowsQuantized(expand, x, y, m);
    else if (dotRows_)
      fewRowsFromCodes(expand, x, y, m);
    else if (d_.transposeB)
      fewRowsTransposed(expand, x, y, m);
    else
      fewRows(expand, x, y, m);
  }

private:
  /// Few-rows path, W [K, N]: a thread's accumulators (rows × tile columns)
  /// and its expanded rows of W, in floats; both stay in L1/L2.
  static constexpr int64_t kAccFloats = 8192, kExpandedFloats = 4096;
  /// Rows of W [N, K] a thread expands at a time on the few-rows path.
  static constexpr int64_t kRowGroup = 4;
  /// Bytes of expanded W per sgemm on the many-rows path.
  static constexpr int64_t kChunkBytes = 4 << 20;

  /// The few-rows W [K, N] tiling for m rows of x: as wide as a thread's
  /// share of N (each row segment a contiguous read), within the
  /// accumulator budget; whole groups.
  struct Tile {
    int64_t width = 0, rows = 0, perThread = 0;
  };
  Tile tileOf(int64_t m) const {
    const int64_t threads = threads_;
    Tile t;
    int64_t width = std::min((d_.n + threads - 1) / threads, kAccFloats / m);
    t.width = std::max(align_, width - width % align_);
    t.rows = std::max<int64_t>(1, kExpandedFloats / t.width);
    t.perThread = (t.rows + m) * t.width;
    return t;
  }

  /// W [K, N]: column tiles over threads (one per thread where the
  /// accumulators fit); per tile, chunks of rows of W expanded into scratch
  /// and added into an fp32 accumulator row per x row. Every row segment is
  /// a contiguous read of the codes.
  void fewRows(const Expander &expand, const float *x, float *y, int64_t m) {
    const int64_t k = d_.k, n = d_.n;
    const Tile tile = tileOf(m);
    const int64_t tw = tile.width, kr = tile.rows;
    const int64_t tiles = (n + tw - 1) / tw;
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t t = 0; t < tiles; ++t) {
      float *rows = scratch_.data() + perThread_ * omp_get_thread_num();
      float *acc = rows + kr * tw;
      const int64_t c0 = t * tw, w = std::min(tw, n - c0);
      std::fill(acc, acc + m * tw, 0.0f);
      if (m == 1 && expand.canAccumulate(c0, w)) {
        // One row of x (batch-1 decode): each weight is read once, so it is
        // multiplied in as it is expanded, never stored.
        for (int64_t r = 0; r < k; ++r) expand.accumulate(r * n + c0, w, x[r], acc);
        std::memcpy(y + c0, acc, w * sizeof(float));
        continue;
      }
      for (int64_t k0 = 0; k0 < k; k0 += kr) {
        const int64_t kc = std::min(kr, k - k0);
        for (int64_t r = 0; r < kc; ++r) expand((k0 + r) * n + c0, w, rows + r * tw);
        for (int64_t i = 0; i < m; ++i) {
          float *row = acc + i * tw;
          const float *xi = x + i * k + k0;
          for (int64_t r = 0; r < kc; ++r) {
            const float xv = xi[r];
            const float *wr = rows + r * tw;
#pragma omp simd
            for (int64_t j = 0; j < w; ++j) row[j] += xv * wr[j];
          }
        }
      }
      for (int64_t i = 0; i < m; ++i)
        std::memcpy(y + i * n + c0, acc + i * tw, w * sizeof(float));
    }
  }

  /// W [N, K], decoded in registers: contiguous ranges of its rows over
  /// threads.
  void fewRowsFromCodes(const Expander &expand, const float *x, float *y, int64_t m) {
    decode::Rows rows{x, x, m, d_.k, y, d_.n};
    if (!xStep_.empty()) {
      decode::permuteEvensThenOdds(x, m, d_.k, xStep_.data());
      rows.xStep = xStep_.data();
    }
    const int64_t n = d_.n;
    const bool avx512 = avx512_;
#pragma omp parallel if (n * d_.k > (1 << 15)) num_threads(threads_)
    {
      const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
      expand.dotRows(n * t / threads, n * (t + 1) / threads, rows, avx512);
    }
  }

  /// W [N, K], x quantized to int8 per 32 elements, integer dots with the
  /// codes: contiguous ranges of W's rows over threads.
  void fewRowsQuantized(const Expander &expand, const float *x, float *y, int64_t m) {
    qx_.m = m; // the rows' layout does not depend on their count
    qx_.quantize(x);
    const decode::QRows rows{&qx_, y, d_.n};
    const int64_t n = d_.n;
    if (packed_) {
      const int64_t groups = packed_->groups();
#pragma omp parallel if (n * d_.k > (1 << 15)) num_threads(threads_)
      {
        const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
        packed_->rows(groups * t / threads, groups * (t + 1) / threads, rows);
      }
      return;
    }
#pragma omp parallel if (n * d_.k > (1 << 15)) num_threads(threads_)
    {
      const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
      expand.dotQuantized(n * t / threads, n * (t + 1) / threads, rows);
    }
  }

  /// W [N, K]: groups of rows of W over threads; each row expanded whole
  /// (K floats) and dotted with every row of x.
  void fewRowsTransposed(const Expander &expand, const float *x, float *y, int64_t m) {
    const int64_t k = d_.k, n = d_.n;
    const int64_t groups = (n + kRowGroup - 1) / kRowGroup;
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t g = 0; g < groups; ++g) {
      float *rows = scratch_.data() + perThread_ * omp_get_thread_num();
      const int64_t r0 = g * kRowGroup, rc = std::min(kRowGroup, n - r0);
      expand(r0 * k, rc * k, rows);
      for (int64_t i = 0; i < m; ++i) {
        const float *xi = x + i * k;
        for (int64_t r = 0; r < rc; ++r) {
          const float *wr = rows + r * k;
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int64_t p = 0; p < k; ++p) sum += xi[p] * wr[p];
          y[i * n + r0 + r] = sum;
        }
      }
    }
  }

  /// Column chunks of W expanded into bind-time scratch, one sgemm each.
  void manyRows(const Expander &expand, const float *x, float *y, int64_t m) {
    const int64_t k = d_.k, n = d_.n;
    float *w = scratch_.data();
    for (int64_t c0 = 0; c0 < n; c0 += chunk_) {
      const int64_t nc = std::min(chunk_, n - c0);
      if (d_.transposeB) {
        // Rows c0.. of W [N, K]: one contiguous range, [nc, K].
#pragma omp parallel for schedule(static) num_threads(threads_)
        for (int64_t r = 0; r < nc; ++r) expand((c0 + r) * k, k, w + r * k);
        sgemm_(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m),
               static_cast<int>(nc), static_cast<int>(k), 1.0f, x, static_cast<int>(k), w,
               static_cast<int>(k), 0.0f, y + c0, static_cast<int>(n));
      } else {
        // Columns c0.. of W [K, N]: a segment of every row, [K, nc].
#pragma omp parallel for schedule(static) num_threads(threads_)
        for (int64_t r = 0; r < k; ++r) expand(r * n + c0, nc, w + r * nc);
        sgemm_(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
               static_cast<int>(nc), static_cast<int>(k), 1.0f, x, static_cast<int>(k), w,
               static_cast<int>(nc), 0.0f, y + c0, static_cast<int>(n));
      }
    }
  }

  contracts::QuantizedProduct d_; // m: the most rows of a call
  SgemmFn sgemm_;
  int64_t align_ = 16;
  /// Threads of every parallel region, taken when the product is planned:
  /// its per-thread scratch is sized for them, and a run on another thread
  /// (a CUDA host function's, whose OpenMP default is every core, not this
  /// rank's share) must not use more.
  int threads_ = 1;
  int64_t perThread_ = 0, chunk_ = 0;
  bool dotRows_ = false, avx512_ = false; // few rows of W [N, K] from its codes
  std::vector<float> xStep_;               // x permuted, evens then odds
  decode::QuantizedX qx_;                  // x quantized (k > 0: the integer-dot path)
  bool pack_ = false; // that path may take a repacked copy of W
  int64_t few_ = 0; // the most rows it takes
  std::shared_ptr<const decode::PackedNibbles> packed_; // the copy, once made
  std::vector<float> scratch_; // expanded tiles (and accumulators), and a column chunk
};

/// x's and y's fp32 form: themselves, or bf16/f16 widened into scratch and
/// rounded back once.
template <typename T> class WideRows {
public:
  WideRows(int64_t xSize, int64_t ySize) {
    if constexpr (!std::is_same_v<T, float>) {
      xWide_.resize(xSize);
      yWide_.resize(ySize);
    }
  }
  const float *in(const T *x) {
    if constexpr (std::is_same_v<T, float>) {
      return x;
    } else {
      const int64_t n = static_cast<int64_t>(xWide_.size());
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) xWide_[i] = load(x, i);
      return xWide_.data();
    }
  }
  float *out(T *y) {
    if constexpr (std::is_same_v<T, float>)
      return y;
    else
      return yWide_.data();
  }
  /// Rounds the first `n` results into y.
  void finish(T *y, int64_t n) {
    if constexpr (!std::is_same_v<T, float>) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) store(y, i, yWide_[i]);
    }
  }

private:
  std::vector<float> xWide_, yWide_; // bf16, f16 only: fp32 copies
};

template <typename T, typename Expander> class QuantizedMatmulKernel final : public Kernel {
public:
  QuantizedMatmulKernel(const KernelArgs &args, const contracts::QuantizedProduct &d,
                        Expander expand, SgemmFn sgemm)
      : d_(d), expand_(std::move(expand)), gemm_(d, expand_, sgemm, /*anyRows=*/false),
        wide_(d.m * d.k, d.m * d.n), x_(args.inputs[0].as<T>()), y_(args.outputs[0].as<T>()) {}

  void run(const StepContext &) override {
    if (d_.m == 0)
      return;
    gemm_.run(expand_, wide_.in(x_), wide_.out(y_), d_.m);
    wide_.finish(y_, d_.m * d_.n);
  }
  /// The copy needs every weight input (all after x) constant.
  void prepare(const std::vector<bool> &constantInputs) override {
    if (constantInputs.size() > 1 &&
        std::all_of(constantInputs.begin() + 1, constantInputs.end(), [](bool c) { return c; }))
      gemm_.prepare(expand_);
  }

private:
  contracts::QuantizedProduct d_;
  Expander expand_;
  QuantizedGemm<Expander> gemm_;
  WideRows<T> wide_;
  const T *x_;
  T *y_;
};

/// grouped_matmul over quantized stacked weights: each expert's rows times
/// its own slice through one QuantizedGemm planned for the most rows an
/// expert can get (all of x's), `expertOf(g)` giving expert g's Expander
/// over its slice's storage. A decode step's few rows per expert take the
/// paths a dense decode product takes; no expert is expanded whole. The
/// offsets are read on every run; invalid ones make y NaN, rows past the
/// last group are zero (contracts/GroupedMatmul.h).
template <typename T, typename ExpertOf> class GroupedQuantizedMatmulKernel final : public Kernel {
public:
  using Expander = decltype(std::declval<const ExpertOf &>()(0));

  GroupedQuantizedMatmulKernel(const KernelArgs &args, const contracts::GroupedQuantizedProduct &d,
                               ExpertOf expertOf, SgemmFn sgemm)
      : d_(d), expertOf_(std::move(expertOf)),
        gemm_(d.expert, expertOf_(0), sgemm, /*anyRows=*/true),
        wide_(d.expert.m * d.expert.k, d.expert.m * d.expert.n), x_(args.inputs[0].as<T>()),
        offsets_(args.inputs[1]), y_(args.outputs[0].as<T>()) {}

  void run(const StepContext &) override {
    const int64_t m = d_.expert.m, k = d_.expert.k, n = d_.expert.n;
    if (m * n == 0)
      return;
    float *y = wide_.out(y_);
    if (!validGroupOffsets(offsets_, d_.groups, m)) {
      std::fill(y, y + m * n, std::numeric_limits<float>::quiet_NaN());
      wide_.finish(y_, m * n);
      return;
    }
    const float *x = wide_.in(x_);
    for (int64_t g = 0; g < d_.groups; ++g) {
      const int64_t begin = offsets_[g], end = offsets_[g + 1];
      if (begin < end)
        gemm_.run(expertOf_(g), x + begin * k, y + begin * n, end - begin);
    }
    std::fill(y + offsets_[d_.groups] * n, y + m * n, 0.0f);
    wide_.finish(y_, m * n);
  }

private:
  contracts::GroupedQuantizedProduct d_;
  ExpertOf expertOf_;
  QuantizedGemm<Expander> gemm_;
  WideRows<T> wide_;
  const T *x_;
  IdView offsets_;
  T *y_;
};

/// The grouped kernel for `d` over `expertOf`, or null with `error` set.
template <typename ExpertOf>
std::unique_ptr<Kernel> makeGroupedQuantizedMatmul(const char *name, const KernelArgs &args,
                                                   const contracts::GroupedQuantizedProduct &d,
                                                   ExpertOf expertOf, std::string &error) {
  using Expander = typename GroupedQuantizedMatmulKernel<float, ExpertOf>::Expander;
  SgemmFn sgemm = nullptr;
  if (d.expert.m > QuantizedGemm<Expander>::kFewRows) {
    std::string blasError;
    sgemm = blasSgemm(blasError);
    if (!sgemm)
      return Validator(name, args, error).reject(blasError);
  }
  return dispatchFloat<FloatTypes>(d.expert.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using Instance = GroupedQuantizedMatmulKernel<typename decltype(tag)::type, ExpertOf>;
    return std::make_unique<Instance>(args, d, std::move(expertOf), sgemm);
  });
}

/// The kernel for `d` over `expand`, or null with `error` set (sgemm, which
/// the many-rows path needs, unavailable).
template <typename Expander>
std::unique_ptr<Kernel> makeQuantizedMatmul(const char *name, const KernelArgs &args,
                                            const contracts::QuantizedProduct &d,
                                            Expander expand, std::string &error) {
  SgemmFn sgemm = nullptr;
  if (d.m > QuantizedGemm<Expander>::kFewRows) {
    std::string blasError;
    sgemm = blasSgemm(blasError);
    if (!sgemm) return Validator(name, args, error).reject(blasError);
  }
  return dispatchFloat<FloatTypes>(d.dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using Instance = QuantizedMatmulKernel<typename decltype(tag)::type, Expander>;
    return std::make_unique<Instance>(args, d, std::move(expand), sgemm);
  });
}

} // namespace llmc::cpu

#endif
