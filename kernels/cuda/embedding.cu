//===- embedding.cu - row lookup and its scatter-add backward on the GPU --===//
//
// Forward: a grid-stride loop over the output's elements; element (n, i)
// copies table[row(ids[n]), i], so reads and writes are coalesced along C.
//
// Backward: every dy row is added into the row of its id, ids repeat, and
// the sum must not depend on scheduling — so no float atomics. Like the
// CPU kernel, it groups positions by id with a stable sort and sums each
// table row in the order contracts/Embedding.h fixes for both backends
// (kEmbeddingGradSegment), so the sums are the CPU's bit for bit:
//  1. keys[n] = the local row of ids[n] (the table's row count for ids
//     that are invalid or another shard's, which sorts them last), and
//     values[n] = n;
//  2. CUB's radix sort of (key, position) pairs — stable, and deterministic
//     (integer keys, no atomics in the result), so each row's positions
//     come out in increasing order;
//  3. one warp per segment of S sorted positions (S = 32): the segment's
//     pieces (its runs of one row) are summed in position order; a piece
//     that is its row's whole run is written to the table at once, a piece
//     of a run that crosses the segment's ends goes to the segment's fp32
//     partials — slot 0 for the piece starting the segment, slot 1 for the
//     one ending it (a segment has at most one of each);
//  4. one warp per table row: rows whose run crosses segments add their
//     partials in segment order, rows with no positions are zeroed, the
//     others were written in step 3.
// A frequent id's run is thus summed by run/S warps at once plus one pass
// over run/S partials, where one warp used to walk all of it: on an H200
// the byte-token stories' space (about 3 300 of GPT-2 124M's 16k positions
// per step) made that warp 10 ms of the step. Lanes take 8 columns each
// (8 loads in flight per position). Costs: O(N log V) for the sort,
// O(N·C) for the segments, O(V·C + N·C/S) for the rows; the sort's
// buffers, CUB's temporary storage and the partials ([N/S, 2, C] f32) are
// sized from the ids' count at bind time.
//
// Ids outside [0, V) are the runtime's to report and are never used as
// addresses: the forward writes NaN rows, the backward skips them. A
// vocabulary shard (`vocab_size` > 0) holds rows [row_offset, row_offset +
// rows): valid ids of other shards give zero rows forward and nothing
// backward.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Embedding.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace llmc::cuda {
namespace {

/// Which rows of the whole vocabulary a table holds.
using contracts::VocabShard;
using contracts::vocabShard;

template <typename T, typename I>
__global__ void embeddingKernel(const T *table, const I *ids, T *out, int64_t n, int64_t c,
                                VocabShard shard) {
  LLMC_GRID_STRIDE(e, n * c) {
    const int64_t k = e / c, i = e % c;
    const int64_t row = shard.row(static_cast<int64_t>(ids[k]));
    if (row >= 0) out[e] = table[row * c + i];
    else store(out, e, row == -1 ? 0.0f : __int_as_float(0x7fc00000)); // NaN for invalid ids
  }
}

template <typename I>
__global__ void sortKeysKernel(const I *ids, int64_t n, VocabShard shard, uint32_t *keys,
                               uint32_t *positions) {
  LLMC_GRID_STRIDE(k, n) {
    const int64_t row = shard.row(static_cast<int64_t>(ids[k]));
    keys[k] = static_cast<uint32_t>(row >= 0 ? row : shard.rows);
    positions[k] = static_cast<uint32_t>(k);
  }
}

/// The first index of sorted keys[0, n) whose key is >= key.
__device__ __forceinline__ int64_t lowerBound(const uint32_t *keys, int64_t n, uint32_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = (lo + hi) >> 1;
    if (keys[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

constexpr int kWarpsPerBlock = kBlock / 32;
/// Columns a lane sums at once: that many independent loads in flight per
/// position.
constexpr int kColumnsPerLane = 8;
constexpr int64_t kSegment = contracts::kEmbeddingGradSegment;
/// Columns a warp covers per pass.
constexpr int64_t kWarpColumns = 32 * kColumnsPerLane;

/// Row `v`'s run [begin, end) of the sorted keys lies in one segment.
__device__ __forceinline__ bool oneSegment(int64_t begin, int64_t end) {
  return begin / kSegment == (end - 1) / kSegment;
}

/// Stores this lane's columns i0 + lane + 32·u of `acc` into `out`.
template <typename T>
__device__ __forceinline__ void storeColumns(T *out, const float *acc, int64_t i0, int64_t c) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < kColumnsPerLane; ++u) {
    const int64_t i = i0 + lane + 32 * u;
    if (i < c) store(out, i, acc[u]);
  }
}

/// Step 3: one warp per segment of the sorted positions. Each piece (run
/// of one key inside the segment) is summed in position order; a whole run
/// goes to dtable, a part of a longer run to partial[segment][slot].
template <typename T>
__global__ void segmentSumKernel(const uint32_t *keys, const uint32_t *positions, int64_t n,
                                 const T *dy, T *dtable, float *partial, int64_t rows,
                                 int64_t c) {
  const int warp = threadIdx.x >> 5;
  const int64_t segments = (n + kSegment - 1) / kSegment;
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp; s < segments;
       s += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const int64_t first = s * kSegment, last = first + kSegment < n ? first + kSegment : n;
    for (int64_t i0 = 0; i0 < c; i0 += kWarpColumns) {
      int64_t k = first;
      while (k < last && keys[k] < rows) {
        const uint32_t key = keys[k];
        const int64_t pieceBegin = k;
        float acc[kColumnsPerLane];
#pragma unroll
        for (int u = 0; u < kColumnsPerLane; ++u) acc[u] = 0.0f;
        for (; k < last && keys[k] == key; ++k) {
          const T *src = dy + static_cast<int64_t>(positions[k]) * c;
          const int lane = threadIdx.x & 31;
          float x[kColumnsPerLane];
#pragma unroll
          for (int u = 0; u < kColumnsPerLane; ++u) {
            const int64_t i = i0 + lane + 32 * u;
            x[u] = i < c ? load(src, i) : 0.0f;
          }
#pragma unroll
          for (int u = 0; u < kColumnsPerLane; ++u) acc[u] += x[u];
        }
        const bool continued = pieceBegin == first && first > 0 && keys[first - 1] == key;
        const bool continues = k == last && last < n && keys[last] == key;
        if (!continued && !continues)
          storeColumns(dtable + static_cast<int64_t>(key) * c, acc, i0, c);
        else
          storeColumns(partial + (s * 2 + (pieceBegin == first ? 0 : 1)) * c, acc, i0, c);
      }
    }
  }
}

/// Step 4: one warp per table row; a run over several segments adds its
/// pieces' partials in segment order, a row without positions is zeroed.
template <typename T>
__global__ void rowFinishKernel(const uint32_t *keys, int64_t n, const float *partial, T *dtable,
                                int64_t rows, int64_t c) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp; v < rows;
       v += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const int64_t begin = lowerBound(keys, n, static_cast<uint32_t>(v));
    const int64_t end = lowerBound(keys, n, static_cast<uint32_t>(v + 1));
    if (begin < end && oneSegment(begin, end)) continue; // written by segmentSumKernel
    T *out = dtable + v * c;
    const int64_t s0 = begin / kSegment, s1 = begin < end ? (end - 1) / kSegment : s0 - 1;
    for (int64_t i0 = 0; i0 < c; i0 += kWarpColumns) {
      float acc[kColumnsPerLane];
#pragma unroll
      for (int u = 0; u < kColumnsPerLane; ++u) acc[u] = 0.0f;
      for (int64_t s = s0; s <= s1; ++s) {
        // The run's piece of segment s starts it (slot 0) unless the run
        // begins inside s0.
        const float *src =
            partial + (s * 2 + (s == s0 && begin != s0 * kSegment ? 1 : 0)) * c;
#pragma unroll
        for (int u = 0; u < kColumnsPerLane; ++u) {
          const int64_t i = i0 + lane + 32 * u;
          acc[u] += i < c ? src[i] : 0.0f;
        }
      }
      storeColumns(out, acc, i0, c);
    }
  }
}

template <typename T> class EmbeddingKernel final : public Kernel {
public:
  EmbeddingKernel(const KernelArgs &args, VocabShard shard)
      : table_(args.inputs[0].as<T>()), ids_(args.inputs[1].data),
        wideIds_(args.inputs[1].dtype == DType::I64), out_(args.outputs[0].as<T>()),
        shard_(shard), c_(args.inputs[0].dim(1)), n_(args.inputs[1].numel()) {}

  void run(const StepContext &ctx) override {
    const int64_t total = n_ * c_;
    if (total == 0) return;
    if (wideIds_)
      embeddingKernel<T, int64_t><<<gridFor(total), kBlock, 0, streamOf(ctx)>>>(
          table_, static_cast<const int64_t *>(ids_), out_, n_, c_, shard_);
    else
      embeddingKernel<T, int32_t><<<gridFor(total), kBlock, 0, streamOf(ctx)>>>(
          table_, static_cast<const int32_t *>(ids_), out_, n_, c_, shard_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *table_;
  const void *ids_;
  bool wideIds_;
  T *out_;
  VocabShard shard_;
  int64_t c_, n_;
};

template <typename T> class EmbeddingGradKernel final : public Kernel {
public:
  EmbeddingGradKernel(const KernelArgs &args, VocabShard shard)
      : ids_(args.inputs[0].data), wideIds_(args.inputs[0].dtype == DType::I64),
        dy_(args.inputs[1].as<T>()), dtable_(args.outputs[0].as<T>()), shard_(shard),
        rows_(shard.rows), c_(args.outputs[0].dim(1)), n_(args.inputs[0].numel()),
        buffers_(static_cast<size_t>(4 * n_) * sizeof(uint32_t)),
        partial_(static_cast<size_t>((n_ + kSegment - 1) / kSegment * 2 * c_) * sizeof(float)) {
    // Key bits: enough for the sentinel `rows`.
    while (endBit_ < 32 && (uint64_t(1) << endBit_) <= static_cast<uint64_t>(rows_)) ++endBit_;
    if (n_ > 0) {
      LLMC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
          nullptr, tempBytes_, keysIn(), keysOut(), positionsIn(), positionsOut(),
          static_cast<int>(n_), 0, endBit_));
      temp_ = BindScratch(tempBytes_);
    }
  }

  void run(const StepContext &ctx) override {
    if (rows_ == 0 || c_ == 0) return;
    cudaStream_t stream = streamOf(ctx);
    if (n_ > 0) {
      if (wideIds_)
        sortKeysKernel<int64_t><<<gridFor(n_), kBlock, 0, stream>>>(
            static_cast<const int64_t *>(ids_), n_, shard_, keysIn(), positionsIn());
      else
        sortKeysKernel<int32_t><<<gridFor(n_), kBlock, 0, stream>>>(
            static_cast<const int32_t *>(ids_), n_, shard_, keysIn(), positionsIn());
      LLMC_CUDA_CHECK_LAUNCH();
      size_t bytes = tempBytes_;
      LLMC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.as<void>(), bytes, keysIn(),
                                                      keysOut(), positionsIn(), positionsOut(),
                                                      static_cast<int>(n_), 0, endBit_, stream));
    }
    if (n_ > 0) {
      segmentSumKernel<T><<<warpGrid((n_ + kSegment - 1) / kSegment), kBlock, 0, stream>>>(
          keysOut(), positionsOut(), n_, dy_, dtable_, partial_.as<float>(), rows_, c_);
      LLMC_CUDA_CHECK_LAUNCH();
    }
    rowFinishKernel<T><<<warpGrid(rows_), kBlock, 0, stream>>>(keysOut(), n_, partial_.as<float>(),
                                                                dtable_, rows_, c_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  /// Blocks for one warp per item.
  static int warpGrid(int64_t items) {
    const int64_t blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
    return static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
  }
  uint32_t *keysIn() const { return buffers_.as<uint32_t>(); }
  uint32_t *keysOut() const { return buffers_.as<uint32_t>() + n_; }
  uint32_t *positionsIn() const { return buffers_.as<uint32_t>() + 2 * n_; }
  uint32_t *positionsOut() const { return buffers_.as<uint32_t>() + 3 * n_; }

  const void *ids_;
  bool wideIds_;
  const T *dy_;
  T *dtable_;
  VocabShard shard_;
  int64_t rows_, c_, n_;
  int endBit_ = 1;
  size_t tempBytes_ = 0;
  BindScratch buffers_; // keys, sorted keys, positions, sorted positions: n each
  BindScratch temp_;    // CUB's temporary storage
  BindScratch partial_; // [segments, 2, C] f32: pieces of runs that cross segments
};

std::unique_ptr<Kernel> makeCudaEmbedding(const KernelArgs &args, std::string &error) {
  contracts::EmbeddingBinding b;
  if (!contracts::bindEmbedding(args, error, &b)) return nullptr;
  return makeFloatKernel<EmbeddingKernel>(b.dtype, args, vocabShard(b));
}

std::unique_ptr<Kernel> makeCudaEmbeddingGrad(const KernelArgs &args, std::string &error) {
  contracts::EmbeddingBinding b;
  if (!contracts::bindEmbeddingGrad(args, error, &b)) return nullptr;
  return makeFloatKernel<EmbeddingGradKernel>(b.dtype, args, vocabShard(b));
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "embedding", makeCudaEmbedding);
LLMC_REGISTER_KERNEL(CUDA, "embedding_grad", makeCudaEmbeddingGrad);

} // namespace llmc::cuda
