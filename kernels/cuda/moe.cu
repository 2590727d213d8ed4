//===- moe.cu - mixture-of-experts routing, dispatch and combine on the GPU ===//
//
// The five kernels of a mixture-of-experts layer (dialects/LLM/MoEOps.td),
// deterministic without float atomics:
//
// moe_route, in four launches:
//  1. one warp per token: the softmax (lanes over the experts, warp max and
//     sum), p and lse² into scratch, and the top k picked one at a time by
//     a warp reduction in routeBeats' order (contracts/MoE.h: a strict
//     total order, so the CPU's sequential scan picks the same experts);
//     a sigmoid router's p is σ normalised over the experts (a warp sum),
//     its key σ + bias when it has a bias, its weights σ;
//  2. one thread per (chunk of kMoeRouteChunk tokens, expert): the chunk's
//     Σ p and copies in token order, and its Σ lse²;
//  3. one block: the chunks' sums in chunk order (prob_sum, counts, z_sum),
//     the offsets, and each chunk's first row per expert;
//  4. one thread per chunk: the positions, in token order, then j.
// Steps 2 and 3 add in the CPU's order, so the sums differ from the CPU's
// only through the exp of the probabilities they add; experts, positions
// and offsets are equal.
//
// moe_dispatch gathers: rows first learn their copy (an atomic
// compare-and-swap per copy; a row several copies land on is marked, one no
// copy lands on stays unmarked), then every element of the N·k rows reads
// its token's, NaN where the positions are not a permutation.
// moe_combine sums each token's k rows per column in j order in fp32;
// moe_combine_weight_grad gives each copy a warp (its dot product summed by
// lanes, then warpSum); moe_route_grad one warp per token. Positions and
// experts out of range are never used as addresses: they give NaN where an
// output depends on them, as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/MoE.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {
namespace {

using contracts::kMoeRouteChunk;
using contracts::MoeRouteBinding;
using contracts::MoeRowsBinding;
using contracts::routeBeats;

constexpr int kWarpsPerBlock = kBlock / 32;

__device__ __forceinline__ float nanValue() { return __int_as_float(0x7fc00000); }

/// Blocks for one warp per item.
int warpGrid(int64_t items) {
  const int64_t blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<int>(blocks < 1 ? 1 : blocks < 65535 * 8 ? blocks : 65535 * 8);
}

/// for (w = this warp; w < n; w += all warps)
#define LLMC_WARP_STRIDE(w, n)                                                                     \
  for (int64_t w = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5; w < (n);    \
       w += (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5)

/// A token's softmax statistics: max, Σ exp(l − max) (every lane has them).
struct RowStats {
  float max, sum;
  __device__ float p(float logit) const { return expf(logit - max) / sum; }
  __device__ float lse() const { return max + logf(sum); }
};

template <typename T> __device__ RowStats rowStats(const T *row, int64_t e) {
  const int lane = threadIdx.x & 31;
  float m = -INFINITY;
  for (int64_t i = lane; i < e; i += 32) m = fmaxf(m, load(row, i));
  m = warpMax(m);
  float s = 0.0f;
  for (int64_t i = lane; i < e; i += 32) s += expf(load(row, i) - m);
  return {m, warpSum(s)};
}

/// How a router scores and chooses: softmax, or sigmoid (with a bias [E]
/// on the choice, or none); the weights times `scale`.
struct Scoring {
  bool sigmoid = false;
  float scale = 1.0f;
  const float *bias = nullptr;

  /// What expert i of `row` is chosen by: its logit, or σ + bias.
  template <typename T> __device__ float key(const T *row, int64_t i) const {
    const float l = load(row, i);
    return sigmoid && bias ? contracts::routerSigmoid(l) + bias[i] : l;
  }
  /// What expert i is weighted by: p from the softmax, or σ.
  template <typename T>
  __device__ float score(const T *row, int64_t i, const RowStats &stats) const {
    const float l = load(row, i);
    return sigmoid ? contracts::routerSigmoid(l) : stats.p(l);
  }
};

/// Σ σ(logits) of a token's row, on every lane.
template <typename T> __device__ float sigmoidTotal(const T *row, int64_t e) {
  float s = 0.0f;
  for (int64_t i = threadIdx.x & 31; i < e; i += 32) s += contracts::routerSigmoid(load(row, i));
  return warpSum(s);
}

/// The next expert after `previous` (−1: the first) in routeBeats' order
/// of `scoring`'s keys, on every lane; its key in `logit`.
template <typename T>
__device__ int nextExpert(const T *row, int64_t e, const Scoring &scoring, int previous,
                          float previousLogit, float *logit) {
  const int lane = threadIdx.x & 31;
  int best = -1;
  float bestLogit = 0.0f;
  for (int i = lane; i < e; i += 32) {
    const float l = scoring.key(row, i);
    if (previous >= 0 && !routeBeats(previousLogit, previous, l, i))
      continue;
    if (best < 0 || routeBeats(l, i, bestLogit, best))
      best = i, bestLogit = l;
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const int other = __shfl_xor_sync(0xffffffffu, best, offset);
    const float otherLogit = __shfl_xor_sync(0xffffffffu, bestLogit, offset);
    if (other >= 0 && (best < 0 || routeBeats(otherLogit, other, bestLogit, best)))
      best = other, bestLogit = otherLogit;
  }
  *logit = bestLogit;
  return best;
}

/// Step 1: one warp per token.
template <typename T>
__global__ void routeTokensKernel(const T *logits, int64_t n, int64_t e, int64_t k, bool normalize,
                                  Scoring scoring, float *p, float *lseSquared, float *weights,
                                  int32_t *experts) {
  const int lane = threadIdx.x & 31;
  LLMC_WARP_STRIDE(t, n) {
    const T *row = logits + t * e;
    const RowStats stats = rowStats(row, e);
    const float total = scoring.sigmoid ? sigmoidTotal(row, e) : 1.0f;
    for (int64_t i = lane; i < e; i += 32) p[t * e + i] = scoring.score(row, i, stats) / total;
    if (lane == 0)
      lseSquared[t] = stats.lse() * stats.lse();
    int previous = -1;
    float previousKey = 0.0f, chosen = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      previous = nextExpert(row, e, scoring, previous, previousKey, &previousKey);
      const float w = scoring.score(row, previous, stats);
      chosen += w;
      if (lane == 0)
        experts[t * k + j] = previous, weights[t * k + j] = w;
    }
    if (lane == 0)
      for (int64_t j = 0; j < k; ++j)
        weights[t * k + j] =
            (normalize ? weights[t * k + j] / chosen : weights[t * k + j]) * scoring.scale;
  }
}

/// Step 2: one thread per (chunk, expert).
__global__ void chunkSumsKernel(const float *p, const float *lseSquared, const int32_t *experts,
                                int64_t n, int64_t e, int64_t k, int64_t chunks, float *chunkProb,
                                float *chunkZ, int32_t *chunkRows) {
  LLMC_GRID_STRIDE(slot, chunks * e) {
    const int64_t c = slot / e, i = slot % e;
    const int64_t begin = c * kMoeRouteChunk, end = min(n, begin + kMoeRouteChunk);
    float prob = 0.0f;
    int32_t rows = 0;
    for (int64_t t = begin; t < end; ++t) {
      prob += p[t * e + i];
      for (int64_t j = 0; j < k; ++j) rows += experts[t * k + j] == i;
    }
    chunkProb[slot] = prob;
    chunkRows[slot] = rows;
    if (i == 0) {
      float z = 0.0f;
      for (int64_t t = begin; t < end; ++t) z += lseSquared[t];
      chunkZ[c] = z;
    }
  }
}

/// Step 3: one block; chunkRows becomes each chunk's first row per expert.
__global__ void totalsKernel(const float *chunkProb, const float *chunkZ, int32_t *chunkRows,
                             int64_t e, int64_t chunks, float *probSum, float *counts,
                             int32_t *offsets, float *zSum) {
  for (int64_t i = threadIdx.x; i < e; i += blockDim.x) {
    float prob = 0.0f;
    int32_t rows = 0;
    for (int64_t c = 0; c < chunks; ++c) prob += chunkProb[c * e + i], rows += chunkRows[c * e + i];
    probSum[i] = prob;
    counts[i] = static_cast<float>(rows);
    offsets[i + 1] = rows;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    offsets[0] = 0;
    for (int64_t i = 0; i < e; ++i) offsets[i + 1] += offsets[i];
    float z = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) z += chunkZ[c];
    *zSum = z;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < e; i += blockDim.x) {
    int32_t next = offsets[i];
    for (int64_t c = 0; c < chunks; ++c) {
      const int32_t rows = chunkRows[c * e + i];
      chunkRows[c * e + i] = next;
      next += rows;
    }
  }
}

/// Step 4: one thread per chunk.
__global__ void placeKernel(const int32_t *experts, int64_t n, int64_t e, int64_t k, int64_t chunks,
                            int32_t *chunkRows, int32_t *positions) {
  LLMC_GRID_STRIDE(c, chunks) {
    int32_t *cursor = chunkRows + c * e;
    const int64_t end = min(n, (c + 1) * kMoeRouteChunk) * k;
    for (int64_t copy = c * kMoeRouteChunk * k; copy < end; ++copy)
      positions[copy] = cursor[experts[copy]]++;
  }
}

template <typename T> class MoeRouteKernel final : public Kernel {
public:
  MoeRouteKernel(const KernelArgs &args, const MoeRouteBinding &b)
      : logits_(args.inputs[0].as<T>()), weights_(args.outputs[0].as<float>()),
        experts_(args.outputs[1].as<int32_t>()), positions_(args.outputs[2].as<int32_t>()),
        offsets_(args.outputs[3].as<int32_t>()), probSum_(args.outputs[4].as<float>()),
        counts_(args.outputs[5].as<float>()), zSum_(args.outputs[6].as<float>()), n_(b.tokens),
        e_(b.experts), k_(b.topK), normalize_(b.normalize),
        scoring_{b.score == RouterScore::Sigmoid, static_cast<float>(b.scale),
                 b.biased ? args.inputs[1].as<float>() : nullptr},
        chunks_((n_ + kMoeRouteChunk - 1) / kMoeRouteChunk),
        p_(static_cast<size_t>(n_ * e_ + n_) * sizeof(float)),
        chunkProb_(static_cast<size_t>(chunks_ * e_ + chunks_) * sizeof(float)),
        chunkRows_(static_cast<size_t>(chunks_ * e_) * sizeof(int32_t)) {}

  void run(const StepContext &ctx) override {
    cudaStream_t stream = streamOf(ctx);
    float *p = p_.as<float>(), *lseSquared = p + n_ * e_;
    float *chunkProb = chunkProb_.as<float>(), *chunkZ = chunkProb + chunks_ * e_;
    int32_t *chunkRows = chunkRows_.as<int32_t>();
    if (n_ > 0) {
      routeTokensKernel<T><<<warpGrid(n_), kBlock, 0, stream>>>(
          logits_, n_, e_, k_, normalize_, scoring_, p, lseSquared, weights_, experts_);
      LLMC_CUDA_CHECK_LAUNCH();
      chunkSumsKernel<<<gridFor(chunks_ * e_), kBlock, 0, stream>>>(
          p, lseSquared, experts_, n_, e_, k_, chunks_, chunkProb, chunkZ, chunkRows);
      LLMC_CUDA_CHECK_LAUNCH();
    }
    totalsKernel<<<1, kBlock, 0, stream>>>(chunkProb, chunkZ, chunkRows, e_, chunks_, probSum_,
                                           counts_, offsets_, zSum_);
    LLMC_CUDA_CHECK_LAUNCH();
    if (n_ > 0) {
      placeKernel<<<gridFor(chunks_), kBlock, 0, stream>>>(experts_, n_, e_, k_, chunks_, chunkRows,
                                                           positions_);
      LLMC_CUDA_CHECK_LAUNCH();
    }
  }

private:
  const T *logits_;
  float *weights_;
  int32_t *experts_, *positions_, *offsets_;
  float *probSum_, *counts_, *zSum_;
  int64_t n_, e_, k_;
  bool normalize_;
  Scoring scoring_;
  int64_t chunks_;
  BindScratch p_;         // [N, E] p, then [N] lse²
  BindScratch chunkProb_; // [chunks, E] Σ p, then [chunks] Σ lse²
  BindScratch chunkRows_; // [chunks, E] copies, then first rows
};

/// One warp per token: dlogits through the chosen weights, prob_sum and
/// z_sum, then the softmax or the sigmoid.
template <typename T, typename I>
__global__ void routeGradKernel(const T *logits, const I *experts, const float *dweights,
                                const float *dprobSum, const float *dzSum, T *dlogits, int64_t n,
                                int64_t e, int64_t k, bool normalize, Scoring scoring) {
  const int lane = threadIdx.x & 31;
  LLMC_WARP_STRIDE(t, n) {
    const T *row = logits + t * e;
    const I *chosenExperts = experts + t * k;
    const float *dw = dweights + t * k;
    T *out = dlogits + t * e;
    bool invalid = false;
    for (int64_t j = lane; j < k; j += 32) invalid |= chosenExperts[j] < 0 || chosenExperts[j] >= e;
    if (__any_sync(0xffffffffu, invalid)) {
      for (int64_t i = lane; i < e; i += 32) store(out, i, nanValue());
      continue;
    }
    const RowStats stats = rowStats(row, e);
    float chosen = 0.0f, weighted = 0.0f;
    for (int64_t j = lane; j < k; j += 32) {
      const float q = scoring.score(row, static_cast<int64_t>(chosenExperts[j]), stats);
      chosen += q;
      weighted += scoring.scale * dw[j] * q;
    }
    chosen = warpSum(chosen);
    weighted = warpSum(weighted);
    // A sigmoid router's prob_sum adds σ_i / Σ σ: its gradient through the
    // normalisation needs Σ σ and Σ dprob_sum·σ.
    float total = 1.0f, probWeighted = 0.0f;
    if (scoring.sigmoid) {
      total = sigmoidTotal(row, e);
      for (int64_t i = lane; i < e; i += 32)
        probWeighted += dprobSum[i] * contracts::routerSigmoid(load(row, i));
      probWeighted = warpSum(probWeighted);
    }
    // dL/dscore_i: prob_sum's gradient, plus the weights' of each copy of i.
    auto gradientOfScore = [&](int64_t i) {
      float g = scoring.sigmoid ? (dprobSum[i] - probWeighted / total) / total : dprobSum[i];
      for (int64_t j = 0; j < k; ++j)
        if (chosenExperts[j] == i) {
          const float d = scoring.scale * dw[j];
          g += normalize ? d / chosen - weighted / (chosen * chosen) : d;
        }
      return g;
    };
    const float lse = stats.lse(), dz = *dzSum;
    if (scoring.sigmoid) {
      for (int64_t i = lane; i < e; i += 32) {
        const float l = load(row, i), s = contracts::routerSigmoid(l);
        store(out, i, gradientOfScore(i) * s * (1.0f - s) + 2.0f * lse * stats.p(l) * dz);
      }
      continue;
    }
    float mean = 0.0f;
    for (int64_t i = lane; i < e; i += 32) mean += gradientOfScore(i) * stats.p(load(row, i));
    mean = warpSum(mean);
    for (int64_t i = lane; i < e; i += 32) {
      const float p = stats.p(load(row, i));
      store(out, i, p * (gradientOfScore(i) - mean) + 2.0f * lse * p * dz);
    }
  }
}

template <typename T> class MoeRouteGradKernel final : public Kernel {
public:
  MoeRouteGradKernel(const KernelArgs &args, const MoeRouteBinding &b)
      : logits_(args.inputs[0].as<T>()), experts_(args.inputs[1].data),
        wideExperts_(args.inputs[1].dtype == DType::I64), dweights_(args.inputs[2].as<float>()),
        dprobSum_(args.inputs[3].as<float>()), dzSum_(args.inputs[4].as<float>()),
        dlogits_(args.outputs[0].as<T>()), n_(b.tokens), e_(b.experts), k_(b.topK),
        normalize_(b.normalize),
        scoring_{b.score == RouterScore::Sigmoid, static_cast<float>(b.scale), nullptr} {}

  void run(const StepContext &ctx) override {
    if (n_ == 0)
      return;
    if (wideExperts_)
      launch<int64_t>(streamOf(ctx));
    else
      launch<int32_t>(streamOf(ctx));
  }

private:
  template <typename I> void launch(cudaStream_t stream) {
    routeGradKernel<T, I><<<warpGrid(n_), kBlock, 0, stream>>>(
        logits_, static_cast<const I *>(experts_), dweights_, dprobSum_, dzSum_, dlogits_, n_, e_,
        k_, normalize_, scoring_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

  const T *logits_;
  const void *experts_;
  bool wideExperts_;
  const float *dweights_, *dprobSum_, *dzSum_;
  T *dlogits_;
  int64_t n_, e_, k_;
  bool normalize_;
  Scoring scoring_;
};

/// moe_dispatch, first pass: source[row] = the copy landing on it (−1
/// none, −2 several).
template <typename I>
__global__ void findSourcesKernel(const I *positions, int64_t copies, int32_t *source) {
  LLMC_GRID_STRIDE(copy, copies) {
    const int64_t row = static_cast<int64_t>(positions[copy]);
    if (row < 0 || row >= copies)
      continue;
    if (atomicCAS(&source[row], -1, static_cast<int32_t>(copy)) != -1)
      atomicExch(&source[row], -2);
  }
}

/// moe_dispatch, second pass: every element of the N·k rows.
template <typename T>
__global__ void gatherCopiesKernel(const T *x, const float *weights, const int32_t *source, T *out,
                                   int64_t copies, int64_t k, int64_t c) {
  LLMC_GRID_STRIDE(el, copies * c) {
    const int64_t copy = source[el / c];
    if (copy < 0) {
      store(out, el, nanValue());
      continue;
    }
    const float v = load(x, copy / k * c + el % c);
    store(out, el, weights ? weights[copy] * v : v);
  }
}

template <typename T> class MoeDispatchKernel final : public Kernel {
public:
  MoeDispatchKernel(const KernelArgs &args, const MoeRowsBinding &b)
      : x_(args.inputs[0].as<T>()), positions_(args.inputs[1].data),
        widePositions_(args.inputs[1].dtype == DType::I64),
        weights_(b.weighted ? args.inputs[2].as<float>() : nullptr), out_(args.outputs[0].as<T>()),
        k_(b.topK), c_(b.width), copies_(b.tokens * b.topK),
        source_(static_cast<size_t>(copies_) * sizeof(int32_t)) {}

  void run(const StepContext &ctx) override {
    if (copies_ == 0)
      return;
    cudaStream_t stream = streamOf(ctx);
    LLMC_CUDA_CHECK(cudaMemsetAsync(source_.as<int32_t>(), 0xff,
                                    static_cast<size_t>(copies_) * sizeof(int32_t), stream));
    if (widePositions_)
      findSourcesKernel<int64_t><<<gridFor(copies_), kBlock, 0, stream>>>(
          static_cast<const int64_t *>(positions_), copies_, source_.as<int32_t>());
    else
      findSourcesKernel<int32_t><<<gridFor(copies_), kBlock, 0, stream>>>(
          static_cast<const int32_t *>(positions_), copies_, source_.as<int32_t>());
    LLMC_CUDA_CHECK_LAUNCH();
    if (c_ == 0)
      return;
    gatherCopiesKernel<T><<<gridFor(copies_ * c_), kBlock, 0, stream>>>(
        x_, weights_, source_.as<int32_t>(), out_, copies_, k_, c_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_;
  const void *positions_;
  bool widePositions_;
  const float *weights_;
  T *out_;
  int64_t k_, c_, copies_;
  BindScratch source_; // [N·k] i32: the copy each row holds
};

/// y[t, i] = Σ_j w[t, j]·ys[positions[t, j], i] in j order; NaN for a
/// token with a position out of range.
template <typename T, typename I>
__global__ void combineKernel(const T *ys, const I *positions, const float *weights, T *y,
                              int64_t n, int64_t k, int64_t c) {
  LLMC_GRID_STRIDE(el, n * c) {
    const int64_t t = el / c, i = el % c;
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = static_cast<int64_t>(positions[t * k + j]);
      if (row < 0 || row >= n * k) {
        acc = nanValue();
        break;
      }
      acc += (weights ? weights[t * k + j] : 1.0f) * load(ys, row * c + i);
    }
    store(y, el, acc);
  }
}

template <typename T> class MoeCombineKernel final : public Kernel {
public:
  MoeCombineKernel(const KernelArgs &args, const MoeRowsBinding &b)
      : ys_(args.inputs[0].as<T>()), positions_(args.inputs[1].data),
        widePositions_(args.inputs[1].dtype == DType::I64),
        weights_(b.weighted ? args.inputs[2].as<float>() : nullptr), y_(args.outputs[0].as<T>()),
        n_(b.tokens), k_(b.topK), c_(b.width) {}

  void run(const StepContext &ctx) override {
    if (n_ * c_ == 0)
      return;
    if (widePositions_)
      launch<int64_t>(streamOf(ctx));
    else
      launch<int32_t>(streamOf(ctx));
  }

private:
  template <typename I> void launch(cudaStream_t stream) {
    combineKernel<T, I><<<gridFor(n_ * c_), kBlock, 0, stream>>>(
        ys_, static_cast<const I *>(positions_), weights_, y_, n_, k_, c_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

  const T *ys_;
  const void *positions_;
  bool widePositions_;
  const float *weights_;
  T *y_;
  int64_t n_, k_, c_;
};

/// One warp per copy: ⟨ys[positions[copy]], dy[copy / k]⟩ in fp32.
template <typename T, typename I>
__global__ void combineWeightGradKernel(const T *ys, const I *positions, const T *dy,
                                        float *dweights, int64_t copies, int64_t k, int64_t c) {
  const int lane = threadIdx.x & 31;
  LLMC_WARP_STRIDE(copy, copies) {
    const int64_t row = static_cast<int64_t>(positions[copy]);
    if (row < 0 || row >= copies) {
      if (lane == 0)
        dweights[copy] = nanValue();
      continue;
    }
    const T *a = ys + row * c, *b = dy + copy / k * c;
    float sum = 0.0f;
    for (int64_t i = lane; i < c; i += 32) sum += load(a, i) * load(b, i);
    sum = warpSum(sum);
    if (lane == 0)
      dweights[copy] = sum;
  }
}

template <typename T> class MoeCombineWeightGradKernel final : public Kernel {
public:
  MoeCombineWeightGradKernel(const KernelArgs &args, const MoeRowsBinding &b)
      : ys_(args.inputs[0].as<T>()), positions_(args.inputs[1].data),
        widePositions_(args.inputs[1].dtype == DType::I64), dy_(args.inputs[2].as<T>()),
        dweights_(args.outputs[0].as<float>()), k_(b.topK), c_(b.width),
        copies_(b.tokens * b.topK) {}

  void run(const StepContext &ctx) override {
    if (copies_ == 0)
      return;
    if (widePositions_)
      launch<int64_t>(streamOf(ctx));
    else
      launch<int32_t>(streamOf(ctx));
  }

private:
  template <typename I> void launch(cudaStream_t stream) {
    combineWeightGradKernel<T, I><<<warpGrid(copies_), kBlock, 0, stream>>>(
        ys_, static_cast<const I *>(positions_), dy_, dweights_, copies_, k_, c_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

  const T *ys_;
  const void *positions_;
  bool widePositions_;
  const T *dy_;
  float *dweights_;
  int64_t k_, c_, copies_;
};

/// router_loss on one thread: E products in order, in double, as the CPU.
__global__ void routerLossKernel(const float *probSum, const float *counts, const float *zSum,
                                 float *loss, int64_t experts, double auxScale, double zScale) {
  double balance = 0;
  for (int64_t e = 0; e < experts; ++e) balance += double(counts[e]) * double(probSum[e]);
  *loss = static_cast<float>(auxScale * balance + zScale * double(*zSum));
}

class RouterLossKernel final : public Kernel {
public:
  RouterLossKernel(const KernelArgs &args, const contracts::RouterLossBinding &b)
      : probSum_(args.inputs[0].as<float>()), counts_(args.inputs[1].as<float>()),
        zSum_(args.inputs[2].as<float>()), loss_(args.outputs[0].as<float>()), b_(b) {}

  void run(const StepContext &ctx) override {
    routerLossKernel<<<1, 1, 0, streamOf(ctx)>>>(probSum_, counts_, zSum_, loss_, b_.experts,
                                                 b_.auxScale, b_.zScale);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const float *probSum_, *counts_, *zSum_;
  float *loss_;
  contracts::RouterLossBinding b_;
};

std::unique_ptr<Kernel> makeCudaRouterLoss(const KernelArgs &args, std::string &error) {
  contracts::RouterLossBinding b;
  if (!contracts::bindRouterLoss(args, error, &b))
    return nullptr;
  return std::make_unique<RouterLossKernel>(args, b);
}

std::unique_ptr<Kernel> makeCudaMoeRoute(const KernelArgs &args, std::string &error) {
  MoeRouteBinding b;
  if (!contracts::bindMoeRoute(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeRouteKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeCudaMoeRouteGrad(const KernelArgs &args, std::string &error) {
  MoeRouteBinding b;
  if (!contracts::bindMoeRouteGrad(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeRouteGradKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeCudaMoeDispatch(const KernelArgs &args, std::string &error) {
  MoeRowsBinding b;
  if (!contracts::bindMoeDispatch(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeDispatchKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeCudaMoeCombine(const KernelArgs &args, std::string &error) {
  MoeRowsBinding b;
  if (!contracts::bindMoeCombine(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeCombineKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeCudaMoeCombineWeightGrad(const KernelArgs &args, std::string &error) {
  MoeRowsBinding b;
  if (!contracts::bindMoeCombineWeightGrad(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeCombineWeightGradKernel>(b.dtype, args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "moe_route", makeCudaMoeRoute);
LLMC_REGISTER_KERNEL(CUDA, "moe_route_grad", makeCudaMoeRouteGrad);
LLMC_REGISTER_KERNEL(CUDA, "moe_dispatch", makeCudaMoeDispatch);
LLMC_REGISTER_KERNEL(CUDA, "moe_combine", makeCudaMoeCombine);
LLMC_REGISTER_KERNEL(CUDA, "moe_combine_weight_grad", makeCudaMoeCombineWeightGrad);
LLMC_REGISTER_KERNEL(CUDA, "router_loss", makeCudaRouterLoss);

} // namespace llmc::cuda
