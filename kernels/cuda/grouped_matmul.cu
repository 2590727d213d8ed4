//===- grouped_matmul.cu - each group of rows times its own weight --------===//
//
// The CUDA twin of kernels/cpu/grouped_matmul.cpp (contracts/
// GroupedMatmul.h). How many rows each group has is data in device memory
// and the step may run as a captured CUDA graph, so the host never reads
// the offsets: every launch covers the shapes' worst case, and each block
// reads the offsets itself.
//
// grouped_matmul: a grid over (row tiles of all M rows, column tiles of
// F). A block finds the groups its kTileM rows meet by binary search in the
// offsets and, for each, multiplies those rows by the group's weight (a
// slice of the stacked weights): a tiled GEMM through shared memory, kTileK of K at a time, each
// thread 4×4 outputs accumulated in fp32 and rounded once on store. A tile that straddles a group
// boundary runs once per group it meets (with the other rows masked), so the work is at most (M /
// kTileM + G) tile passes. Its rows past the last group (offsets[G] < M) it writes as zeros.
//
// grouped_matmul_weight_grad: a grid over (output tiles, group); a block
// loops over its group's rows kTileK at a time, accumulating its tile of
// Aᵀ·B in fp32 (A = x, B = dy; or A = dy, B = x with transpose_b), and
// writes zeros for an empty group.
//
// Every block first checks the offsets (offsets[0] = 0, never decreasing,
// offsets[G] <= M) and, when they are invalid, writes NaN over its tile
// instead: every output is then NaN, and nothing is read or written
// outside a tensor.
//
// Speed: CUDA cores (FMA), no tensor cores, no split-K. Correct and
// graph-safe first; a weight gradient whose group has many rows and whose
// [K, F] is small has few blocks, each looping over all the rows.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/GroupedMatmul.h"
#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/GroupOffsets.cuh"

namespace llmc::cuda {
namespace {

using contracts::GroupedMatmulBinding;

constexpr int kTileM = 64, kTileN = 64, kTileK = 16;
/// 16 × 16 threads, each owning 4 × 4 outputs of a 64 × 64 tile, strided
/// by 16 so a warp's loads from shared memory hit distinct banks.
constexpr int kThreads = 256, kSide = 16, kPer = 4;
static_assert(kSide * kPer == kTileM && kSide * kPer == kTileN && kSide * kSide == kThreads);
/// The most blocks in a grid's y dimension.
constexpr int64_t kMaxGridY = 65535;

/// Whether `offsets` cut the first of `rows` rows into `groups` groups;
/// every thread of the block gets the answer.
__device__ bool validOffsets(Offsets offsets, int64_t groups, int64_t rows) {
  int bad = threadIdx.x == 0 && (offsets[0] != 0 || offsets[groups] > rows);
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) bad |= offsets[g + 1] < offsets[g];
  return !__syncthreads_or(bad);
}

/// NaN over the block's tile [r0, r0 + kTileM) × [c0, c0 + kTileN) of a
/// [rows, cols] output.
template <typename T>
__device__ void nanTile(T *out, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
  for (int e = threadIdx.x; e < kTileM * kTileN; e += kThreads) {
    const int64_t r = r0 + e / kTileN, c = c0 + e % kTileN;
    if (r < rows && c < cols)
      store(out, r * cols + c, __int_as_float(0x7fc00000));
  }
}

/// The tiles in shared memory, padded a column so that filling a column
/// of 16 from 16 threads hits distinct banks.
struct Tiles {
  float a[kTileK][kTileM + 1];
  float b[kTileK][kTileN + 1];
};

/// acc[i][j] += Σ_kk a[kk][ty + 16 i] · b[kk][tx + 16 j].
__device__ __forceinline__ void multiplyTiles(const Tiles &t, float (&acc)[kPer][kPer]) {
  const int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
#pragma unroll
  for (int kk = 0; kk < kTileK; ++kk) {
    float a[kPer], b[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) a[i] = t.a[kk][ty + kSide * i], b[i] = t.b[kk][tx + kSide * i];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
  }
}

/// Stores the thread's outputs of the tile at (r0, c0) of a [rows, cols]
/// output whose rows [lo, hi) are this block's to write.
template <typename T>
__device__ void storeTile(const float (&acc)[kPer][kPer], T *out, int64_t r0, int64_t c0,
                          int64_t lo, int64_t hi, int64_t cols) {
  const int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int64_t r = r0 + ty + kSide * i;
    if (r < lo || r >= hi)
      continue;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int64_t c = c0 + tx + kSide * j;
      if (c < cols)
        store(out, r * cols + c, acc[i][j]);
    }
  }
}

/// y's rows [lo, hi) within the tile at (r0, c0) = x's rows · w, w [K, F]
/// (or [F, K] transposed).
template <typename T>
__device__ void groupTile(const T *x, const T *w, T *y, int64_t r0, int64_t c0, int64_t lo,
                          int64_t hi, int64_t k, int64_t f, bool transposeB, Tiles &t) {
  float acc[kPer][kPer] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
    for (int e = threadIdx.x; e < kTileM * kTileK; e += kThreads) {
      const int r = e / kTileK, kk = e % kTileK; // along K: x's contiguous dim
      const int64_t row = r0 + r, col = k0 + kk;
      t.a[kk][r] = row >= lo && row < hi && col < k ? load(x, row * k + col) : 0.0f;
    }
    for (int e = threadIdx.x; e < kTileK * kTileN; e += kThreads) {
      // Along w's contiguous dim: F, or K when transposed.
      const int kk = transposeB ? e % kTileK : e / kTileN;
      const int n = transposeB ? e / kTileK : e % kTileN;
      const int64_t row = k0 + kk, col = c0 + n;
      t.b[kk][n] = row < k && col < f ? load(w, transposeB ? col * k + row : row * f + col) : 0.0f;
    }
    __syncthreads();
    multiplyTiles(t, acc);
    __syncthreads();
  }
  storeTile(acc, y, r0, c0, lo, hi, f);
}

/// Zeros over rows [lo, hi) of the tile at (r0, c0) of a [rows, cols] output.
template <typename T>
__device__ void zeroRows(T *out, int64_t r0, int64_t c0, int64_t lo, int64_t hi, int64_t cols) {
  for (int e = threadIdx.x; e < kTileM * kTileN; e += kThreads) {
    const int64_t r = r0 + e / kTileN, c = c0 + e % kTileN;
    if (r >= lo && r < hi && c < cols)
      store(out, r * cols + c, 0.0f);
  }
}

/// Block (blockIdx.x, blockIdx.y): rows [64 bx, 64 bx + 64) and columns
/// [64 by, 64 by + 64) of y [rows, f], group by group; `weights` are the
/// stacked [groups, K, F] (or [groups, F, K]).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    groupedMatmulKernel(const T *x, Offsets offsets, const T *weights, T *y, int64_t rows,
                        int64_t k, int64_t f, int64_t groups, bool transposeB) {
  __shared__ Tiles tiles;
  const int64_t r0 = blockIdx.x * static_cast<int64_t>(kTileM);
  const int64_t c0 = blockIdx.y * static_cast<int64_t>(kTileN);
  if (!validOffsets(offsets, groups, rows)) {
    nanTile(y, r0, c0, rows, f);
    return;
  }
  const int64_t r1 = min(r0 + kTileM, rows);
  for (int64_t g = groupOf(offsets, groups, r0); g < groups && offsets[g] < r1; ++g) {
    const int64_t lo = max(r0, offsets[g]), hi = min(r1, offsets[g + 1]);
    if (lo < hi)
      groupTile(x, weights + g * k * f, y, r0, c0, lo, hi, k, f, transposeB, tiles);
  }
  zeroRows(y, r0, c0, max(r0, offsets[groups]), r1, f);
}

/// Block (blockIdx.x, g): one tile of dw_g [p, q] = Σ over the group's rows
/// of aᵀ·b, a [rows, p] and b [rows, q]; zeros for an empty group. `dw`:
/// the stacked [groups, p, q].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    groupedWeightGradKernel(const T *a, int64_t p, const T *b, int64_t q, Offsets offsets,
                            int64_t rows, int64_t groups, T *dw) {
  __shared__ Tiles t;
  const int64_t g = blockIdx.y, tilesQ = (q + kTileN - 1) / kTileN;
  const int64_t p0 = (blockIdx.x / tilesQ) * kTileM, q0 = (blockIdx.x % tilesQ) * kTileN;
  T *dwg = dw + g * p * q;
  if (!validOffsets(offsets, groups, rows)) {
    nanTile(dwg, p0, q0, p, q);
    return;
  }
  const int64_t lo = offsets[g], hi = offsets[g + 1];
  float acc[kPer][kPer] = {};
  for (int64_t r0 = lo; r0 < hi; r0 += kTileK) {
    for (int e = threadIdx.x; e < kTileK * kTileM; e += kThreads) {
      const int kk = e / kTileM, i = e % kTileM; // along p and q: contiguous
      const int64_t row = r0 + kk;
      t.a[kk][i] = row < hi && p0 + i < p ? load(a, row * p + p0 + i) : 0.0f;
      t.b[kk][i] = row < hi && q0 + i < q ? load(b, row * q + q0 + i) : 0.0f;
    }
    __syncthreads();
    multiplyTiles(t, acc);
    __syncthreads();
  }
  storeTile(acc, dwg, p0, q0, 0, p, q);
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T> class GroupedMatmulKernel final : public Kernel {
public:
  GroupedMatmulKernel(const KernelArgs &args, const GroupedMatmulBinding &b)
      : b_(b), x_(args.inputs[0].as<T>()),
        offsets_{args.inputs[1].data, args.inputs[1].dtype == DType::I64},
        weights_(args.inputs[2].as<T>()), y_(args.outputs[0].as<T>()) {}

  void run(const StepContext &ctx) override {
    if (b_.rows == 0 || b_.f == 0)
      return;
    const dim3 grid(static_cast<unsigned>(ceilDiv(b_.rows, kTileM)),
                    static_cast<unsigned>(ceilDiv(b_.f, kTileN)));
    groupedMatmulKernel<T><<<grid, kThreads, 0, streamOf(ctx)>>>(
        x_, offsets_, weights_, y_, b_.rows, b_.k, b_.f, b_.groups, b_.transposeB);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  GroupedMatmulBinding b_;
  const T *x_;
  Offsets offsets_;
  const T *weights_; ///< [G, K, F] or [G, F, K]
  T *y_;
};

template <typename T> class GroupedMatmulWeightGradKernel final : public Kernel {
public:
  GroupedMatmulWeightGradKernel(const KernelArgs &args, const GroupedMatmulBinding &b)
      : b_(b), x_(args.inputs[0].as<T>()), dy_(args.inputs[1].as<T>()),
        offsets_{args.inputs[2].data, args.inputs[2].dtype == DType::I64},
        dw_(args.outputs[0].as<T>()) {}

  void run(const StepContext &ctx) override {
    if (b_.k == 0 || b_.f == 0)
      return;
    // dw [K, F] = xᵀ·dy, or [F, K] = dyᵀ·x.
    const T *a = b_.transposeB ? dy_ : x_, *b = b_.transposeB ? x_ : dy_;
    const int64_t p = b_.transposeB ? b_.f : b_.k, q = b_.transposeB ? b_.k : b_.f;
    const dim3 grid(static_cast<unsigned>(ceilDiv(p, kTileM) * ceilDiv(q, kTileN)),
                    static_cast<unsigned>(b_.groups));
    groupedWeightGradKernel<T>
        <<<grid, kThreads, 0, streamOf(ctx)>>>(a, p, b, q, offsets_, b_.rows, b_.groups, dw_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  GroupedMatmulBinding b_;
  const T *x_, *dy_;
  Offsets offsets_;
  T *dw_; ///< [G, K, F] or [G, F, K]
};

std::unique_ptr<Kernel> makeCudaGroupedMatmul(const KernelArgs &args, std::string &error) {
  GroupedMatmulBinding binding;
  if (!contracts::bindGroupedMatmul(args, error, &binding))
    return nullptr;
  Validator v("grouped_matmul", args, error);
  if (ceilDiv(binding.f, kTileN) > kMaxGridY)
    return v.reject("F = " + std::to_string(binding.f) + " needs more than " +
                    std::to_string(kMaxGridY) + " column tiles of " + std::to_string(kTileN));
  return makeFloatKernel<GroupedMatmulKernel>(binding.dtype, args, binding);
}

std::unique_ptr<Kernel> makeCudaGroupedMatmulWeightGrad(const KernelArgs &args,
                                                        std::string &error) {
  GroupedMatmulBinding binding;
  if (!contracts::bindGroupedMatmulWeightGrad(args, error, &binding))
    return nullptr;
  Validator v("grouped_matmul_weight_grad", args, error);
  if (binding.groups > kMaxGridY)
    return v.reject(std::to_string(binding.groups) + " groups are more than the " +
                    std::to_string(kMaxGridY) + " the grid holds");
  if (ceilDiv(binding.k, kTileM) * ceilDiv(binding.f, kTileN) > INT_MAX)
    return v.reject("dw [" + std::to_string(binding.k) + ", " + std::to_string(binding.f) +
                    "] has more tiles than a grid holds");
  return makeFloatKernel<GroupedMatmulWeightGradKernel>(binding.dtype, args, binding);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "grouped_matmul", makeCudaGroupedMatmul);
LLMC_REGISTER_KERNEL(CUDA, "grouped_matmul_weight_grad", makeCudaGroupedMatmulWeightGrad);

} // namespace llmc::cuda
