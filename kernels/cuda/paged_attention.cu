//===- paged_attention.cu - paged KV cache: write and attention -----------===//
//
// The kernels of kernels/cpu/paged_attention.cpp, with its semantics: pools
// [NB, P, KV, D] of pages, a block table [B, M], positions [B, T] (negative:
// padding); token position p of sequence b lives at page
// block_table[b, p/P], slot p % P, and unaddressable positions (p/P >= M,
// a page id outside [0, NB)) are skipped, never read or written.
//
// kv_cache_write: one thread per element of `new`, after a device copy of
// the cache when out is not the cache itself (in place, the usual binding,
// copies nothing). Elements are moved as 2- or 4-byte words.
//
// paged_attention: a block of 4 warps per (b, t, kv head g); the warps take
// the query heads of g in rounds of 4, so for grouped-query attention each
// key tile is staged once for up to 4 heads. Keys 0..p of the sequence
// stream through shared memory in tiles of 32 (each key's page slot looked
// up once per tile), and the rest is attention.cu's forward for one query
// row per warp: in the score phase lane c owns key c of the tile (its dot
// product with the warp's row reads the lane's key row, padded to D+1
// floats, without bank conflicts), then an online softmax per row by warp
// reductions; in the accumulation phase lane owns head-dim elements lane,
// lane+32, … and takes each key's weight by a shuffle. fp32 throughout;
// bf16 and f16 are widened on the way in and rounded once on the way out.
//
// Head dims 64 and 128 have their own instantiations; any other D up to
// 256 runs the generic path rounded up to 32, 64, 128 or 256. Shared memory
// is 4·(4D + 32·(2D+1)) bytes (70 KB at D = 256, so the factory raises the
// kernel's limit); a larger D is a bind error.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/PagedAttention.h"
#include "kernels/cuda/Common.cuh"

#include <climits>

namespace llmc::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 32; // keys per tile: one per lane
constexpr int kMaxHeadDim = 256;
constexpr unsigned kFullMask = 0xffffffffu;

/// Everything a kernel needs besides its tensors, by value.
struct Params {
  int64_t b = 0, t = 0, h = 0, kv = 0, group = 1, blocks = 0, page = 1, maxBlocks = 0;
  int d = 0;
  float scale = 1.0f;
  const void *table = nullptr;     ///< [B, M] i32 or i64
  const void *positions = nullptr; ///< [B, T] i32 or i64
  bool wideTable = false, widePositions = false;
};

__device__ __forceinline__ int64_t readId(const void *ids, bool wide, int64_t i) {
  return wide ? static_cast<const int64_t *>(ids)[i] : static_cast<const int32_t *>(ids)[i];
}

/// The pool page holding position `pos` of sequence b, or −1 when it is
/// padding or unaddressable.
__device__ __forceinline__ int64_t pageOf(const Params &p, int64_t b, int64_t pos) {
  if (pos < 0 || pos / p.page >= p.maxBlocks) return -1;
  const int64_t page = readId(p.table, p.wideTable, b * p.maxBlocks + pos / p.page);
  return page >= 0 && page < p.blocks ? page : -1;
}

//===----------------------------------------------------------------------===//
// kv_cache_write
//===----------------------------------------------------------------------===//

/// Word W (the element's size) i of new [B·T, rowElems = KV·D] to its slot
/// of out.
template <typename W>
__global__ void kvCacheWrite(const W *__restrict__ fresh, W *__restrict__ out, Params p,
                             int64_t rowElems, int64_t n) {
  LLMC_GRID_STRIDE(i, n) {
    const int64_t row = i / rowElems, e = i - row * rowElems;
    const int64_t pos = readId(p.positions, p.widePositions, row);
    const int64_t page = pageOf(p, row / p.t, pos);
    if (page >= 0) out[(page * p.page + pos % p.page) * rowElems + e] = fresh[i];
  }
}

class KvCacheWriteKernel final : public Kernel {
public:
  KvCacheWriteKernel(const KernelArgs &args, const Params &p)
      : cache_(args.inputs[0]), fresh_(args.inputs[1].data), out_(args.outputs[0].data), p_(p),
        rowElems_(args.inputs[1].dim(2) * args.inputs[1].dim(3)), n_(args.inputs[1].numel()) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    if (out_ != cache_.data)
      LLMC_CUDA_CHECK(
          cudaMemcpyAsync(out_, cache_.data, cache_.bytes(), cudaMemcpyDeviceToDevice, stream));
    if (n_ == 0) return;
    if (dtypeSize(cache_.dtype) == 2)
      kvCacheWrite<<<gridFor(n_), kBlock, 0, stream>>>(
          static_cast<const uint16_t *>(fresh_), static_cast<uint16_t *>(out_), p_, rowElems_, n_);
    else
      kvCacheWrite<<<gridFor(n_), kBlock, 0, stream>>>(
          static_cast<const uint32_t *>(fresh_), static_cast<uint32_t *>(out_), p_, rowElems_, n_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  TensorView cache_;
  const void *fresh_;
  void *out_;
  Params p_;
  int64_t rowElems_; ///< KV·D, one token's row
  int64_t n_;        ///< elements of new
};

//===----------------------------------------------------------------------===//
// paged_attention
//===----------------------------------------------------------------------===//

/// Block: (b, t, kv head g). Shared: scale·q [4][D], k [32][D+1], v [32][D],
/// and the tile's key offsets in the pool (−1: not visible).
template <typename T, int kMaxD, bool kExact>
__global__ void __launch_bounds__(kThreads)
    pagedAttention(const T *__restrict__ q, const T *__restrict__ kCache,
                   const T *__restrict__ vCache, T *__restrict__ out, Params p) {
  constexpr int kChunks = kMaxD / 32;
  extern __shared__ float smem[];
  __shared__ int64_t slots[kTile];
  const int d = kExact ? kMaxD : p.d;
  float *qs = smem;
  float *ks = qs + kWarps * d;
  float *vs = ks + kTile * (d + 1);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  const int64_t g = blockIdx.x % p.kv, bt = blockIdx.x / p.kv, b = bt / p.t;
  const int64_t pos = readId(p.positions, p.widePositions, bt);
  const int64_t keyEnd = pos < 0 ? 0 : min(pos + 1, p.maxBlocks * p.page); // block-uniform
  const int64_t lastHead = (g + 1) * p.group;

  for (int64_t h0 = g * p.group; h0 < lastHead; h0 += kWarps) { // block-uniform
    const int64_t h = h0 + warp;
    const bool active = h < lastHead; // warp-uniform
    __syncthreads(); // the previous round's readers of q are done
    if (active)
      for (int e = lane; e < d; e += 32)
        qs[warp * d + e] = p.scale * load(q, (bt * p.h + h) * d + e);
    const float *qw = qs + warp * d;

    float acc[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;

    for (int64_t j0 = 0; j0 < keyEnd; j0 += kTile) {
      __syncthreads(); // the previous tile's readers are done (and q is staged)
      if (threadIdx.x < kTile) {
        const int64_t j = j0 + threadIdx.x;
        const int64_t page = j < keyEnd ? pageOf(p, b, j) : -1;
        slots[threadIdx.x] = page < 0 ? -1 : ((page * p.page + j % p.page) * p.kv + g) * d;
      }
      __syncthreads();
      for (int idx = threadIdx.x; idx < kTile * d; idx += kThreads) {
        const int c = idx / d, e = idx - c * d;
        const int64_t at = slots[c];
        ks[c * (d + 1) + e] = at < 0 ? 0.0f : load(kCache, at + e);
        vs[c * d + e] = at < 0 ? 0.0f : load(vCache, at + e);
      }
      __syncthreads();
      if (!active) continue; // warp-uniform; no block barrier until the next tile

      // Score: lane owns key j0 + lane.
      float s = 0.0f;
      const float *krow = ks + lane * (d + 1);
      for (int e = 0; e < d; ++e) s += qw[e] * krow[e];
      const float score = slots[lane] < 0 ? -INFINITY : s;

      // Online softmax over the tile.
      const float mNew = fmaxf(m, warpMax(score));
      const float safe = mNew == -INFINITY ? 0.0f : mNew; // nothing visible yet: P = 0, not NaN
      const float alpha = expf(m - safe);
      const float weight = expf(score - safe);
      l = l * alpha + warpSum(weight);
      m = mNew;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) acc[c] *= alpha;

      // acc += P·V: lane owns elements lane + 32c.
      for (int jj = 0; jj < kTile; ++jj) {
        const float w = __shfl_sync(kFullMask, weight, jj);
        const float *vrow = vs + jj * d;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int e = lane + 32 * c;
          if (kExact || e < d) acc[c] += w * vrow[e];
        }
      }
    }

    if (!active) continue;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f; // padding rows and rows without keys: 0
    T *dst = out + (bt * p.h + h) * d;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int e = lane + 32 * c;
      if (kExact || e < d) store(dst, e, acc[c] * inv);
    }
  }
}

template <typename T>
using PagedAttentionFn = void (*)(const T *, const T *, const T *, T *, Params);

/// The instantiation for head dim d (1 ≤ d ≤ kMaxHeadDim).
template <typename T> PagedAttentionFn<T> selectFn(int d) {
  if (d == 64) return pagedAttention<T, 64, true>;
  if (d == 128) return pagedAttention<T, 128, true>;
  if (d <= 32) return pagedAttention<T, 32, false>;
  if (d <= 64) return pagedAttention<T, 64, false>;
  if (d <= 128) return pagedAttention<T, 128, false>;
  return pagedAttention<T, 256, false>;
}

size_t pagedSmem(int64_t d) { return sizeof(float) * (kWarps * d + kTile * (2 * d + 1)); }

template <typename T> class PagedAttentionKernel final : public Kernel {
public:
  PagedAttentionKernel(const KernelArgs &args, const Params &p, PagedAttentionFn<T> fn)
      : q_(args.inputs[0].as<T>()), k_(args.inputs[1].as<T>()), v_(args.inputs[2].as<T>()),
        out_(args.outputs[0].as<T>()), p_(p), fn_(fn), blocks_(p.b * p.t * p.kv),
        smem_(pagedSmem(p.d)) {}

  void run(const StepContext &ctx) override {
    if (blocks_ == 0) return;
    fn_<<<static_cast<unsigned>(blocks_), kThreads, smem_, streamOf(ctx)>>>(q_, k_, v_, out_, p_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *q_, *k_, *v_;
  T *out_;
  Params p_;
  PagedAttentionFn<T> fn_;
  int64_t blocks_;
  size_t smem_;
};

//===----------------------------------------------------------------------===//
// Factories: the contract's checks, then the CUDA limits
//===----------------------------------------------------------------------===//

/// The kernels' parameters of a binding whose block table is input
/// `tableIndex` and positions the next.
Params paramsOf(const contracts::PagedCacheBinding &b, const KernelArgs &args, size_t tableIndex) {
  Params p;
  p.b = b.b, p.t = b.t, p.h = b.h, p.kv = b.kv, p.group = b.group;
  p.blocks = b.blocks, p.page = b.page, p.maxBlocks = b.maxBlocks;
  p.scale = b.scale;
  p.table = args.inputs[tableIndex].data;
  p.positions = args.inputs[tableIndex + 1].data;
  p.wideTable = b.tableDType == DType::I64;
  p.widePositions = b.positionDType == DType::I64;
  return p;
}

std::unique_ptr<Kernel> makeCudaKvCacheWrite(const KernelArgs &args, std::string &error) {
  contracts::PagedCacheBinding b;
  if (!contracts::bindKvCacheWrite(args, error, &b)) return nullptr;
  return std::make_unique<KvCacheWriteKernel>(args, paramsOf(b, args, 2));
}

template <typename T>
std::unique_ptr<Kernel> bindPagedAttention(Validator &v, const KernelArgs &args, const Params &p) {
  PagedAttentionFn<T> fn = selectFn<T>(p.d);
  if (!allowSmem(v, reinterpret_cast<const void *>(fn), pagedSmem(p.d))) return nullptr;
  return std::make_unique<PagedAttentionKernel<T>>(args, p, fn);
}

std::unique_ptr<Kernel> makeCudaPagedAttention(const KernelArgs &args, std::string &error) {
  contracts::PagedCacheBinding b;
  if (!contracts::bindPagedAttention(args, error, &b)) return nullptr;
  Validator v("paged_attention", args, error);
  const TensorView &q = v.in(0);
  if (b.d < 1 || b.d > kMaxHeadDim)
    return v.reject("head dim D = " + std::to_string(b.d) +
                    " is outside the CUDA kernel's range [1, " + std::to_string(kMaxHeadDim) +
                    "]: q is " + q.describe());
  if (b.b * b.t * b.kv > INT_MAX)
    return v.reject("q " + q.describe() + " needs more thread blocks than one launch allows");
  Params p = paramsOf(b, args, 3);
  p.d = static_cast<int>(b.d);
  if (b.dtype == DType::BF16) return bindPagedAttention<bf16>(v, args, p);
  if (b.dtype == DType::F16) return bindPagedAttention<f16>(v, args, p);
  return bindPagedAttention<float>(v, args, p);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "kv_cache_write", makeCudaKvCacheWrite);
LLMC_REGISTER_KERNEL(CUDA, "paged_attention", makeCudaPagedAttention);

} // namespace llmc::cuda
