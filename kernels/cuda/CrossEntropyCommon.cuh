//===- CrossEntropyCommon.cuh - what the cross-entropy kernels share ------===//
//
// The losses are means over rows: per-row values are summed by one block in
// a fixed order (each thread a strided set of rows, then a tree over the
// block), so the result does not depend on scheduling. Sums are in double
// and counts in 64-bit integers, like the CPU's.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_CROSSENTROPYCOMMON_CUH
#define LLMC_KERNELS_CUDA_CROSSENTROPYCOMMON_CUH

#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {

/// Threads of the one-block loss reductions.
constexpr int kLossThreads = 1024;

/// Threads per row for kernels that own a row per block: a multiple of 32,
/// at most 1024 (a vocabulary row is long).
inline int lossRowThreads(int64_t width) {
  int64_t t = (width + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : t > 1024 ? 1024 : t);
}

/// Blocks for a loop over rows (rows > 0).
inline int lossRowGrid(int64_t rows) {
  const int64_t cap = 65535 * 8;
  return static_cast<int>(rows < cap ? rows : cap);
}

/// Rows whose target is not `ignoreIndex`, for every thread of the block.
template <typename I>
__device__ __forceinline__ long long countTargets(const I *targets, int64_t rows,
                                                  int64_t ignoreIndex, long long *shared) {
  long long count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    count += static_cast<int64_t>(targets[r]) != ignoreIndex;
  return blockSum(count, shared);
}

/// dloss / count (0 when every target is ignored), as the CPU forms it.
template <typename I>
__global__ void gradScaleKernel(const I *targets, int64_t rows, int64_t ignoreIndex,
                                const float *dloss, float *scale) {
  __shared__ long long red[32];
  long long count = countTargets(targets, rows, ignoreIndex, red);
  if (threadIdx.x == 0) *scale = count ? *dloss / static_cast<float>(count) : 0.0f;
}

/// The block's log Σ exp from each thread's running max `m` and Σ exp(x − m).
__device__ __forceinline__ float blockLogSumExp(float m, float s, float *red) {
  const float rowMax = blockMax(m, red);
  const float scaled = m == -INFINITY ? 0.0f : s * expf(m - rowMax);
  const float sum = blockSum(scaled, red);
  return rowMax + logf(sum);
}

/// Adds x to a running max `m` and Σ exp(x − m). A NaN x makes both NaN
/// for good (every later step keeps them NaN), so the row's loss is NaN as
/// on the CPU, even where no comparison with the max would have seen it.
__device__ __forceinline__ void onlineAdd(float x, float &m, float &s) {
  if (x > m) {
    s = s * expf(m - x) + 1.0f; // exp(−inf) = 0 rescales an empty sum
    m = x;
  } else if (isnan(x)) {
    m = s = x;
  } else if (m != -INFINITY) {
    s += expf(x - m);
  }
}

/// log Σ_j exp(row[j]) over the first `vocab` columns of one row, for every
/// thread of the block.
template <typename T>
__device__ __forceinline__ float rowLogSumExp(const T *row, int64_t vocab, float *red) {
  float m = -INFINITY, s = 0.0f;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) onlineAdd(load(row, j), m, s);
  return blockLogSumExp(m, s, red);
}

//===----------------------------------------------------------------------===//
// 16-byte rows: a padded vocabulary (llmc-pad-vocab) makes every row of
// logits start 16-byte aligned, so a thread moves 8 bf16 (4 f32) at once.
//===----------------------------------------------------------------------===//

/// Elements of T in 16 bytes.
template <typename T> constexpr int kVec = 16 / static_cast<int>(sizeof(T));

/// Whether rows `width` elements apart from `base` (and from `other`, when
/// given) all start 16-byte aligned.
template <typename T>
inline bool vectorRows(const void *base, int64_t width, const void *other = nullptr) {
  auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return aligned(base) && (!other || aligned(other)) &&
         (width * static_cast<int64_t>(sizeof(T))) % 16 == 0;
}

template <typename T> struct alignas(16) Vec16 {
  T v[kVec<T>];
};

/// The 16 bytes at element `j` of `row` (16-byte aligned), as floats.
template <typename T>
__device__ __forceinline__ void loadVec(const T *row, int64_t j, float (&x)[kVec<T>]) {
  const Vec16<T> in = *reinterpret_cast<const Vec16<T> *>(row + j);
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k) x[k] = load(in.v, k);
}

template <typename T>
__device__ __forceinline__ void storeVec(T *row, int64_t j, const float (&x)[kVec<T>]) {
  Vec16<T> out;
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k) store(out.v, k, x[k]);
  *reinterpret_cast<Vec16<T> *>(row + j) = out;
}

/// rowLogSumExp over the first `classes` columns of a 16-byte row whose
/// width is a whole number of 16-byte pieces: one running (max, sum) per
/// piece rather than per element.
template <typename T>
__device__ __forceinline__ float rowLogSumExpVec(const T *row, int64_t classes, float *red) {
  constexpr int V = kVec<T>;
  float m = -INFINITY, s = 0.0f;
  for (int64_t j = static_cast<int64_t>(threadIdx.x) * V; j < classes;
       j += static_cast<int64_t>(blockDim.x) * V) {
    float x[V];
    loadVec(row, j, x);
    float pieceMax = -INFINITY;
    bool nan = false; // fmaxf passes over NaN; the loss must not (onlineAdd)
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (j + k < classes) {
        pieceMax = fmaxf(pieceMax, x[k]);
        nan |= isnan(x[k]);
      }
    if (nan) {
      m = s = __int_as_float(0x7fc00000);
      continue;
    }
    if (pieceMax == -INFINITY) continue;
    const float next = fmaxf(m, pieceMax);
    float sum = m == -INFINITY ? 0.0f : s * expf(m - next);
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (j + k < classes) sum += expf(x[k] - next);
    m = next;
    s = sum;
  }
  return blockLogSumExp(m, s, red);
}

/// The loss's gradient of one row in place of (or beside) its logits:
/// (softmax − onehot(target))·factor for the first `classes` columns, 0 for
/// the padding to `width`. `in` and `out` may alias; the vector form needs
/// both 16-byte aligned and `width` a whole number of pieces.
template <typename T, bool Vector>
__device__ __forceinline__ void writeRowGrad(const T *in, T *out, int64_t classes, int64_t width,
                                             int64_t target, float lse, float factor) {
  if constexpr (Vector) {
    constexpr int V = kVec<T>;
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * V; j < width;
         j += static_cast<int64_t>(blockDim.x) * V) {
      float x[V];
      loadVec(in, j, x);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        // The padding is exactly 0, whatever the factor (a NaN dloss, say).
        const float p = expf(x[k] - lse);
        x[k] = j + k < classes ? (j + k == target ? p - 1.0f : p) * factor : 0.0f;
      }
      storeVec(out, j, x);
    }
  } else {
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
      const float p = j < classes ? expf(load(in, j) - lse) : 0.0f;
      store(out, j, j < classes ? (j == target ? p - 1.0f : p) * factor : 0.0f);
    }
  }
}

/// Threads for a row of `width` elements: one per element, or per 16-byte
/// piece.
template <typename T> inline int rowThreads(int64_t width, bool vector) {
  return lossRowThreads(vector ? (width + kVec<T> - 1) / kVec<T> : width);
}

/// rowLogSumExp of the first `classes` columns, in 16-byte pieces or not.
template <typename T, bool Vector>
__device__ __forceinline__ float rowLogSumExpOf(const T *row, int64_t classes, float *red) {
  if constexpr (Vector)
    return rowLogSumExpVec(row, classes, red);
  else
    return rowLogSumExp(row, classes, red);
}

/// loss = Σ rowLoss / count, in double (one block).
template <typename I>
__global__ void meanLossKernel(const float *rowLoss, const I *targets, int64_t rows,
                               int64_t ignoreIndex, float *loss) {
  __shared__ double sums[32];
  __shared__ long long counts[32];
  double total = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) total += static_cast<double>(rowLoss[r]);
  total = blockSum(total, sums);
  const long long count = countTargets(targets, rows, ignoreIndex, counts);
  if (threadIdx.x == 0)
    *loss = count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
}

/// ids as i32 or i64.
struct Ids {
  const void *data;
  bool wide;
  explicit Ids(const TensorView &t) : data(t.data), wide(t.dtype == DType::I64) {}
  const int32_t *narrow() const { return static_cast<const int32_t *>(data); }
  const int64_t *wide64() const { return static_cast<const int64_t *>(data); }
};

} // namespace llmc::cuda

#endif
