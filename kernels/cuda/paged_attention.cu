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
// copies nothing). Elements are moved as 2- or 4-byte words; into a bf16 or
// f16 cache under f32 each is rounded to nearest even. Into a cache of
// codes (int8 or fp8 E4M3) one warp quantizes one (token, kv head) row:
// absmax by a warp reduction, then the scale and codes of
// common/KvCacheCodes.h (IEEE division, the shared fp8 rounding), as the
// CPU kernel and the reference compute them, so the codes and scales agree
// bit for bit.
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
// A cache narrower than q (bf16, f16 under f32; int8 or fp8 codes) is
// widened as its tile is staged, a code's value times its slot's scale (the
// tile's scales staged beside its slots), so fp32 q and caches run the same
// code as before.
//
// Head dims 64 and 128 have their own instantiations; any other D up to
// 256 runs the generic path rounded up to 32, 64, 128 or 256. Shared memory
// is 4·(4D + 32·(2D+1)) bytes (70 KB at D = 256, so the factory raises the
// kernel's limit); a larger D is a bind error.
//
//===----------------------------------------------------------------------===//

#include "common/KvCacheCodes.h"
#include "kernels/contracts/PagedAttention.h"
#include "kernels/cuda/Common.cuh"

#include <climits>
#include <type_traits>

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
  int64_t window = 0; ///< position pos sees (pos − window, pos]; 0: 0..pos
  float softcap = 0.0f; ///< scores capped to c·tanh(s / c); 0: uncapped
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

/// Element i of new (T) rounded into its slot of a 16-bit float cache C.
template <typename T, typename C>
__global__ void kvCacheNarrow(const T *__restrict__ fresh, C *__restrict__ out, Params p,
                              int64_t rowElems, int64_t n) {
  LLMC_GRID_STRIDE(i, n) {
    const int64_t row = i / rowElems, e = i - row * rowElems;
    const int64_t pos = readId(p.positions, p.widePositions, row);
    const int64_t page = pageOf(p, row / p.t, pos);
    if (page >= 0) store(out, (page * p.page + pos % p.page) * rowElems + e, load(fresh, i));
  }
}

using kvcache::Fp8E4M3Code;

/// One warp per (token row, kv head) of new [B·T, KV, D]: the codes and
/// the scale into the row's slot.
template <typename T, typename Code>
__global__ void kvCacheQuantize(const T *__restrict__ fresh, Code *__restrict__ out,
                                float *__restrict__ scales, Params p, int64_t heads) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; w < heads;
       w += warps) { // warp-uniform
    const int64_t row = w / p.kv, g = w - row * p.kv;
    const int64_t pos = readId(p.positions, p.widePositions, row);
    const int64_t page = pageOf(p, row / p.t, pos);
    if (page < 0) continue;
    const T *src = fresh + w * p.d;
    float absmax = 0.0f;
    for (int e = lane; e < p.d; e += 32) absmax = fmaxf(absmax, fabsf(load(src, e)));
    absmax = warpMax(absmax);
    const float s = kvcache::rowScale<Code>(absmax);
    const int64_t head = (page * p.page + pos % p.page) * p.kv + g;
    Code *dst = out + head * p.d;
    for (int e = lane; e < p.d; e += 32) dst[e] = kvcache::encode<Code>(load(src, e), s);
    if (lane == 0) scales[head] = s;
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

/// new of T into a cache of another type: a 16-bit float under f32, or
/// codes of format `codes` with their scale pool (input 4, output 1).
template <typename T> class KvCacheConvertKernel final : public Kernel {
public:
  KvCacheConvertKernel(const KernelArgs &args, const Params &p, quant::Format codes)
      : cache_(args.inputs[0]), fresh_(args.inputs[1].as<T>()), out_(args.outputs[0].data), p_(p),
        codes_(codes), rowElems_(args.inputs[1].dim(2) * args.inputs[1].dim(3)),
        n_(args.inputs[1].numel()) {
    if (cache_.dtype == DType::U8) {
      scales_ = args.inputs[4];
      outScales_ = args.outputs[1].as<float>();
    }
  }

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    if (out_ != cache_.data)
      LLMC_CUDA_CHECK(
          cudaMemcpyAsync(out_, cache_.data, cache_.bytes(), cudaMemcpyDeviceToDevice, stream));
    if (outScales_ && outScales_ != scales_.data)
      LLMC_CUDA_CHECK(cudaMemcpyAsync(outScales_, scales_.data, scales_.bytes(),
                                      cudaMemcpyDeviceToDevice, stream));
    if (n_ == 0) return;
    if (cache_.dtype == DType::U8 && codes_ == quant::Format::Fp8E4M3) {
      quantize<Fp8E4M3Code>(stream);
    } else if (cache_.dtype == DType::U8) {
      quantize<int8_t>(stream);
    } else if (cache_.dtype == DType::BF16) {
      kvCacheNarrow<<<gridFor(n_), kBlock, 0, stream>>>(fresh_, static_cast<bf16 *>(out_), p_,
                                                        rowElems_, n_);
    } else {
      kvCacheNarrow<<<gridFor(n_), kBlock, 0, stream>>>(fresh_, static_cast<f16 *>(out_), p_,
                                                        rowElems_, n_);
    }
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  /// One warp per (token, kv head) row of new: its codes and scale.
  template <typename Code> void quantize(cudaStream_t stream) {
    const int64_t heads = n_ / p_.d;
    kvCacheQuantize<<<gridFor(heads * 32), kBlock, 0, stream>>>(fresh_, static_cast<Code *>(out_),
                                                                outScales_, p_, heads);
  }

  TensorView cache_, scales_;
  const T *fresh_;
  void *out_;
  float *outScales_ = nullptr;
  Params p_;
  quant::Format codes_; ///< a u8 cache's codes
  int64_t rowElems_;    ///< KV·D, one token's row
  int64_t n_;           ///< elements of new
};

//===----------------------------------------------------------------------===//
// paged_attention
//===----------------------------------------------------------------------===//

/// Block: (b, t, kv head g). Shared: scale·q [4][D], k [32][D+1], v [32][D],
/// and the tile's key offsets in the pool (−1: not visible).
template <typename T, typename C, int kMaxD, bool kExact>
__global__ void __launch_bounds__(kThreads)
    pagedAttention(const T *__restrict__ q, const C *__restrict__ kCache,
                   const C *__restrict__ vCache, const float *__restrict__ kScales,
                   const float *__restrict__ vScales, T *__restrict__ out, Params p) {
  constexpr int kChunks = kMaxD / 32;
  constexpr bool kCodes = kvcache::kIsCode<C>;
  extern __shared__ float smem[];
  __shared__ int64_t slots[kTile];
  __shared__ float kScale[kCodes ? kTile : 1], vScale[kCodes ? kTile : 1];
  const int d = kExact ? kMaxD : p.d;
  float *qs = smem;
  float *ks = qs + kWarps * d;
  float *vs = ks + kTile * (d + 1);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  const int64_t g = blockIdx.x % p.kv, bt = blockIdx.x / p.kv, b = bt / p.t;
  const int64_t pos = readId(p.positions, p.widePositions, bt);
  const int64_t keyEnd = pos < 0 ? 0 : min(pos + 1, p.maxBlocks * p.page); // block-uniform
  // The sliding window's first key (block-uniform); tiles start at its tile.
  const int64_t keyBegin = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
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

    for (int64_t j0 = keyBegin / kTile * kTile; j0 < keyEnd; j0 += kTile) {
      __syncthreads(); // the previous tile's readers are done (and q is staged)
      if (threadIdx.x < kTile) {
        const int64_t j = j0 + threadIdx.x;
        const int64_t page = j < keyEnd && j >= keyBegin ? pageOf(p, b, j) : -1;
        const int64_t head = (page * p.page + j % p.page) * p.kv + g;
        slots[threadIdx.x] = page < 0 ? -1 : head * d;
        if constexpr (kCodes) {
          kScale[threadIdx.x] = page < 0 ? 0.0f : kScales[head];
          vScale[threadIdx.x] = page < 0 ? 0.0f : vScales[head];
        }
      }
      __syncthreads();
      for (int idx = threadIdx.x; idx < kTile * d; idx += kThreads) {
        const int c = idx / d, e = idx - c * d;
        const int64_t at = slots[c];
        // A float as it is, a code as its value times its slot's scale.
        float kx = 0.0f, vx = 0.0f;
        if (at >= 0) {
          if constexpr (kCodes) {
            kx = kvcache::valueOf(kCache[at + e], kScale[c]);
            vx = kvcache::valueOf(vCache[at + e], vScale[c]);
          } else {
            kx = load(kCache, at + e);
            vx = load(vCache, at + e);
          }
        }
        ks[c * (d + 1) + e] = kx;
        vs[c * d + e] = vx;
      }
      __syncthreads();
      if (!active) continue; // warp-uniform; no block barrier until the next tile

      // Score: lane owns key j0 + lane.
      float s = 0.0f;
      const float *krow = ks + lane * (d + 1);
      for (int e = 0; e < d; ++e) s += qw[e] * krow[e];
      const float capped = p.softcap > 0.0f ? p.softcap * tanhf(s / p.softcap) : s;
      const float score = slots[lane] < 0 ? -INFINITY : capped;

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

template <typename T, typename C>
using PagedAttentionFn = void (*)(const T *, const C *, const C *, const float *, const float *,
                                  T *, Params);

/// The instantiation for head dim d (1 ≤ d ≤ kMaxHeadDim).
template <typename T, typename C> PagedAttentionFn<T, C> selectFn(int d) {
  if (d == 64) return pagedAttention<T, C, 64, true>;
  if (d == 128) return pagedAttention<T, C, 128, true>;
  if (d <= 32) return pagedAttention<T, C, 32, false>;
  if (d <= 64) return pagedAttention<T, C, 64, false>;
  if (d <= 128) return pagedAttention<T, C, 128, false>;
  return pagedAttention<T, C, 256, false>;
}

size_t pagedSmem(int64_t d) { return sizeof(float) * (kWarps * d + kTile * (2 * d + 1)); }

template <typename T, typename C> class PagedAttentionKernel final : public Kernel {
public:
  PagedAttentionKernel(const KernelArgs &args, const Params &p, PagedAttentionFn<T, C> fn)
      : q_(args.inputs[0].as<T>()), k_(static_cast<const C *>(args.inputs[1].data)),
        v_(static_cast<const C *>(args.inputs[2].data)),
        kScales_(args.inputs.size() == 7 ? args.inputs[5].as<float>() : nullptr),
        vScales_(args.inputs.size() == 7 ? args.inputs[6].as<float>() : nullptr),
        out_(args.outputs[0].as<T>()), p_(p), fn_(fn), blocks_(p.b * p.t * p.kv),
        smem_(pagedSmem(p.d)) {}

  void run(const StepContext &ctx) override {
    if (blocks_ == 0) return;
    fn_<<<static_cast<unsigned>(blocks_), kThreads, smem_, streamOf(ctx)>>>(q_, k_, v_, kScales_,
                                                                             vScales_, out_, p_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *q_;
  const C *k_, *v_;
  const float *kScales_, *vScales_; ///< code pools' [NB, P, KV] scales
  T *out_;
  Params p_;
  PagedAttentionFn<T, C> fn_;
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
  p.window = b.window;
  p.softcap = b.softcap;
  p.table = args.inputs[tableIndex].data;
  p.positions = args.inputs[tableIndex + 1].data;
  p.wideTable = b.tableDType == DType::I64;
  p.widePositions = b.positionDType == DType::I64;
  return p;
}

std::unique_ptr<Kernel> makeCudaKvCacheWrite(const KernelArgs &args, std::string &error) {
  contracts::PagedCacheBinding b;
  if (!contracts::bindKvCacheWrite(args, error, &b)) return nullptr;
  Params p = paramsOf(b, args, 2);
  p.d = static_cast<int>(b.d);
  // A cache of new's type takes its rows as words.
  if (b.cacheDType == b.dtype) return std::make_unique<KvCacheWriteKernel>(args, p);
  return makeFloatKernel<KvCacheConvertKernel>(b.dtype, args, p, b.codes);
}

template <typename T, typename C>
std::unique_ptr<Kernel> bindPagedAttention(Validator &v, const KernelArgs &args, const Params &p) {
  PagedAttentionFn<T, C> fn = selectFn<T, C>(p.d);
  if (!allowSmem(v, reinterpret_cast<const void *>(fn), pagedSmem(p.d))) return nullptr;
  return std::make_unique<PagedAttentionKernel<T, C>>(args, p, fn);
}

/// The pools' type the contract allowed for q of T: T, int8 or fp8 E4M3
/// codes, or under f32 bf16 or f16.
template <typename T>
std::unique_ptr<Kernel> bindForCache(Validator &v, const KernelArgs &args, const Params &p,
                                     const contracts::PagedCacheBinding &b) {
  if (b.quantized && b.codes == quant::Format::Fp8E4M3)
    return bindPagedAttention<T, Fp8E4M3Code>(v, args, p);
  if (b.quantized)
    return bindPagedAttention<T, int8_t>(v, args, p);
  if constexpr (std::is_same_v<T, float>) {
    if (b.cacheDType == DType::BF16)
      return bindPagedAttention<float, bf16>(v, args, p);
    if (b.cacheDType == DType::F16)
      return bindPagedAttention<float, f16>(v, args, p);
  }
  return bindPagedAttention<T, T>(v, args, p);
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
  return dispatchFloat<FloatTypes>(b.dtype, [&](auto compute) {
    return bindForCache<typename decltype(compute)::type>(v, args, p, b);
  });
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "kv_cache_write", makeCudaKvCacheWrite);
LLMC_REGISTER_KERNEL(CUDA, "paged_attention", makeCudaPagedAttention);

} // namespace llmc::cuda
