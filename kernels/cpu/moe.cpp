//===- moe.cpp - mixture-of-experts routing, dispatch and combine ---------===//
//
// The five kernels of a mixture-of-experts layer (dialects/LLM/MoEOps.td).
//
// moe_route works on chunks of kMoeRouteChunk tokens (contracts/MoE.h),
// one chunk per OpenMP iteration: each token's softmax and top-k (picked by
// logit in routeBeats' order, one pass over the experts per pick, no
// sort), and the chunk's sums of p, lse² and copies per expert, each in
// token order. A sigmoid router scores each expert σ(logit) instead, picks
// by σ + bias when it has a bias, and sums the scores normalised over the
// experts as its p; the logsumexp (z-loss) is the logits' either way.
// The chunks' sums are then added in chunk order (prob_sum, z_sum,
// counts, offsets), which also gives each chunk its first row per expert;
// a second parallel pass over the chunks hands out the positions from
// there in token order, then j: the stable counting sort the op defines,
// independent of the thread count.
//
// moe_dispatch gathers rather than scatters: a serial pass over the N·k
// positions finds each row's copy, then rows are filled in parallel, so a
// row that no copy or several copies land on (positions that are not a
// permutation) is NaN instead of left unwritten or raced for. Positions and
// experts outside their range are never used as addresses: moe_combine
// gives the token's row NaN, moe_combine_weight_grad the copy's entry,
// moe_route_grad the token's logits' gradients.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/MoE.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

using contracts::kMoeRouteChunk;
using contracts::MoeRouteBinding;
using contracts::MoeRowsBinding;

/// Row `n` of logits [N, E] widened into `logits`, its softmax in `p`;
/// returns its log-sum-exp. A NaN logit makes the row's p NaN.
template <typename T>
float softmaxRow(const T *all, int64_t n, int64_t e, float *logits, float *p) {
  const T *row = all + n * e;
  float m = kNegInf;
  for (int64_t i = 0; i < e; ++i) m = std::max(m, logits[i] = load(row, i));
  float sum = 0.0f;
  for (int64_t i = 0; i < e; ++i) sum += p[i] = expFast(logits[i] - m);
  for (int64_t i = 0; i < e; ++i) p[i] /= sum;
  return m + std::log(sum);
}

/// The next expert after `previous` (−1: the first) in routeBeats' order.
int64_t nextExpert(const float *logits, int64_t e, int64_t previous) {
  int64_t best = -1;
  for (int64_t i = 0; i < e; ++i) {
    if (previous >= 0 && !contracts::routeBeats(logits[previous], previous, logits[i], i))
      continue;
    if (best < 0 || contracts::routeBeats(logits[i], i, logits[best], best))
      best = i;
  }
  return best;
}

template <typename T> class MoeRouteKernel final : public Kernel {
public:
  MoeRouteKernel(const KernelArgs &args, const MoeRouteBinding &b)
      : logits_(args.inputs[0].as<T>()), weights_(args.outputs[0].as<float>()),
        experts_(args.outputs[1].as<int32_t>()), positions_(args.outputs[2].as<int32_t>()),
        offsets_(args.outputs[3].as<int32_t>()), probSum_(args.outputs[4].as<float>()),
        counts_(args.outputs[5].as<float>()), zSum_(args.outputs[6].as<float>()),
        bias_(b.biased ? args.inputs[1].as<float>() : nullptr), n_(b.tokens), e_(b.experts),
        k_(b.topK), normalize_(b.normalize), sigmoid_(b.score == RouterScore::Sigmoid),
        scale_(static_cast<float>(b.scale)), chunks_((n_ + kMoeRouteChunk - 1) / kMoeRouteChunk),
        threads_(bindThreads()), rows_(threads_, 4 * e_), chunkProb_(chunks_ * e_),
        chunkZ_(chunks_), chunkRows_(chunks_ * e_) {}

  void run(const StepContext &) override {
#pragma omp parallel num_threads(threads_) if (n_ * e_ > kParallelGrain)
    {
      float *row = rows_.at(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks_; ++c) routeChunk(c, row);
    }
    addChunks();
#pragma omp parallel for num_threads(threads_) schedule(static) if (n_ * k_ > kParallelGrain)
    for (int64_t c = 0; c < chunks_; ++c) placeChunk(c);
  }

private:
  /// Routes chunk c's tokens and sums its p, lse² and copies per expert;
  /// `row` is scratch for 4·E floats.
  void routeChunk(int64_t c, float *row) {
    float *prob = chunkProb_.data() + c * e_;
    int64_t *rows = chunkRows_.data() + c * e_;
    std::fill(prob, prob + e_, 0.0f);
    std::fill(rows, rows + e_, 0);
    float z = 0.0f;
    for (int64_t n = c * kMoeRouteChunk; n < std::min(n_, (c + 1) * kMoeRouteChunk); ++n) {
      float *logits = row, *p = row + e_;
      const float lse = softmaxRow(logits_, n, e_, logits, p);
      z += lse * lse;
      const float *scores = p, *keys = logits;
      if (sigmoid_)
        scores = sigmoidScores(logits, prob, row + 2 * e_, row + 3 * e_, &keys);
      else
        for (int64_t i = 0; i < e_; ++i) prob[i] += p[i];
      pick(n, keys, scores, rows);
    }
    chunkZ_[c] = z;
  }

  /// A sigmoid router's scores σ(logits) into `s`, their normalised
  /// values added to `prob`; `*keys` becomes σ + bias when there is one.
  const float *sigmoidScores(const float *logits, float *prob, float *s, float *biased,
                             const float **keys) const {
    float total = 0.0f;
    for (int64_t i = 0; i < e_; ++i) total += s[i] = contracts::routerSigmoid(logits[i]);
    for (int64_t i = 0; i < e_; ++i) prob[i] += s[i] / total;
    if (bias_) {
      for (int64_t i = 0; i < e_; ++i) biased[i] = s[i] + bias_[i];
      *keys = biased;
    }
    return s;
  }

  /// Token n's top-k by `keys`, weighted by their `scores`.
  void pick(int64_t n, const float *keys, const float *scores, int64_t *rows) {
    int32_t *experts = experts_ + n * k_;
    float *weights = weights_ + n * k_, chosen = 0.0f;
    for (int64_t j = 0, previous = -1; j < k_; ++j) {
      previous = nextExpert(keys, e_, previous);
      experts[j] = static_cast<int32_t>(previous);
      chosen += weights[j] = scores[previous];
      ++rows[previous];
    }
    for (int64_t j = 0; j < k_; ++j)
      weights[j] = (normalize_ ? weights[j] / chosen : weights[j]) * scale_;
  }

  /// The chunks' sums in chunk order; chunkRows_ becomes each chunk's
  /// first row per expert.
  void addChunks() {
    float z = 0.0f;
    for (int64_t c = 0; c < chunks_; ++c) z += chunkZ_[c];
    *zSum_ = z;
    int64_t next = 0;
    for (int64_t i = 0; i < e_; ++i) {
      float prob = 0.0f;
      offsets_[i] = static_cast<int32_t>(next);
      for (int64_t c = 0; c < chunks_; ++c) {
        prob += chunkProb_[c * e_ + i];
        const int64_t rows = chunkRows_[c * e_ + i];
        chunkRows_[c * e_ + i] = next;
        next += rows;
      }
      probSum_[i] = prob;
      counts_[i] = static_cast<float>(next - offsets_[i]);
    }
    offsets_[e_] = static_cast<int32_t>(next);
  }

  /// Positions of chunk c's copies: in token order, then j, per expert.
  void placeChunk(int64_t c) {
    int64_t *cursor = chunkRows_.data() + c * e_;
    const int64_t end = std::min(n_, (c + 1) * kMoeRouteChunk) * k_;
    for (int64_t copy = c * kMoeRouteChunk * k_; copy < end; ++copy)
      positions_[copy] = static_cast<int32_t>(cursor[experts_[copy]]++);
  }

  const T *logits_;
  float *weights_;
  int32_t *experts_, *positions_, *offsets_;
  float *probSum_, *counts_, *zSum_;
  const float *bias_;
  int64_t n_, e_, k_;
  bool normalize_, sigmoid_;
  float scale_;
  int64_t chunks_;
  int threads_;
  ThreadScratch rows_;              // per thread: a token's logits, p, σ, σ + bias
  std::vector<float> chunkProb_;    // [chunks, E]: Σ p over the chunk
  std::vector<float> chunkZ_;       // [chunks]: Σ lse²
  std::vector<int64_t> chunkRows_;  // [chunks, E]: copies, then first rows
};

template <typename T> class MoeRouteGradKernel final : public Kernel {
public:
  MoeRouteGradKernel(const KernelArgs &args, const MoeRouteBinding &b)
      : logits_(args.inputs[0].as<T>()), experts_(args.inputs[1]),
        dweights_(args.inputs[2].as<float>()), dprobSum_(args.inputs[3].as<float>()),
        dzSum_(args.inputs[4].as<float>()), dlogits_(args.outputs[0].as<T>()), n_(b.tokens),
        e_(b.experts), k_(b.topK), normalize_(b.normalize),
        sigmoid_(b.score == RouterScore::Sigmoid), scale_(static_cast<float>(b.scale)),
        threads_(bindThreads()), rows_(threads_, 4 * e_) {}

  void run(const StepContext &) override {
#pragma omp parallel num_threads(threads_) if (n_ * e_ > kParallelGrain)
    {
      float *row = rows_.at(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t n = 0; n < n_; ++n) token(n, row, row + e_, row + 2 * e_, row + 3 * e_);
    }
  }

private:
  /// dlogits of token n: through the chosen weights (and their
  /// normalization), prob_sum and z_sum, then the softmax or the sigmoid.
  void token(int64_t n, float *logits, float *p, float *s, float *g) const {
    T *out = dlogits_ + n * e_;
    for (int64_t j = 0; j < k_; ++j) {
      const int64_t expert = experts_[n * k_ + j];
      if (expert < 0 || expert >= e_) {
        for (int64_t i = 0; i < e_; ++i) store(out, i, kNaN);
        return;
      }
    }
    const float lse = softmaxRow(logits_, n, e_, logits, p), dz = *dzSum_;
    const float *scores = sigmoid_ ? sigmoidGrad(logits, s, g) : p;
    if (!sigmoid_)
      std::copy(dprobSum_, dprobSum_ + e_, g);
    addWeightsGrad(n, scores, g);
    if (sigmoid_) {
      for (int64_t i = 0; i < e_; ++i)
        store(out, i, g[i] * s[i] * (1.0f - s[i]) + 2.0f * lse * p[i] * dz);
      return;
    }
    float mean = 0.0f;
    for (int64_t i = 0; i < e_; ++i) mean += g[i] * p[i];
    for (int64_t i = 0; i < e_; ++i) store(out, i, p[i] * (g[i] - mean) + 2.0f * lse * p[i] * dz);
  }

  /// σ(logits) into `s`; `g` = d prob_sum's terms / ds, where each adds
  /// s_i / Σ s: g_i = (dprob_sum_i − Σ_m dprob_sum_m s_m / Σ s) / Σ s.
  const float *sigmoidGrad(const float *logits, float *s, float *g) const {
    float total = 0.0f, weighted = 0.0f;
    for (int64_t i = 0; i < e_; ++i) total += s[i] = contracts::routerSigmoid(logits[i]);
    for (int64_t i = 0; i < e_; ++i) weighted += dprobSum_[i] * s[i];
    for (int64_t i = 0; i < e_; ++i) g[i] = (dprobSum_[i] - weighted / total) / total;
    return s;
  }

  /// Adds to `g` the chosen weights' gradient with respect to `scores`:
  /// w_j = scale·q_j (/ Σ_chosen q with normalize).
  void addWeightsGrad(int64_t n, const float *scores, float *g) const {
    const float *dw = dweights_ + n * k_;
    float chosen = 0.0f, weighted = 0.0f;
    for (int64_t j = 0; j < k_; ++j) {
      const float q = scores[experts_[n * k_ + j]];
      chosen += q;
      weighted += scale_ * dw[j] * q;
    }
    for (int64_t j = 0; j < k_; ++j)
      g[experts_[n * k_ + j]] +=
          normalize_ ? scale_ * dw[j] / chosen - weighted / (chosen * chosen) : scale_ * dw[j];
  }

  const T *logits_;
  IdView experts_;
  const float *dweights_, *dprobSum_, *dzSum_;
  T *dlogits_;
  int64_t n_, e_, k_;
  bool normalize_, sigmoid_;
  float scale_;
  int threads_;
  ThreadScratch rows_; // per thread: a token's logits, p, σ and dL/dscore
};

/// Row `copy` of positions [N, k] when it is in [0, N·k), else −1.
int64_t validRow(const IdView &positions, int64_t copy, int64_t copies) {
  const int64_t row = positions[copy];
  return row >= 0 && row < copies ? row : -1;
}

template <typename T> class MoeDispatchKernel final : public Kernel {
public:
  MoeDispatchKernel(const KernelArgs &args, const MoeRowsBinding &b)
      : x_(args.inputs[0].as<T>()), positions_(args.inputs[1]),
        weights_(b.weighted ? args.inputs[2].as<float>() : nullptr), out_(args.outputs[0].as<T>()),
        k_(b.topK), c_(b.width), copies_(b.tokens * b.topK), source_(copies_) {}

  void run(const StepContext &) override {
    // Each row's copy; −2 where several land on one row.
    std::fill(source_.begin(), source_.end(), -1);
    for (int64_t copy = 0; copy < copies_; ++copy) {
      const int64_t row = validRow(positions_, copy, copies_);
      if (row >= 0)
        source_[row] = source_[row] == -1 ? copy : -2;
    }
    const int64_t c = c_;
#pragma omp parallel for schedule(static) if (copies_ * c > kParallelGrain)
    for (int64_t row = 0; row < copies_; ++row) {
      const int64_t copy = source_[row];
      T *out = out_ + row * c;
      if (copy < 0) {
        for (int64_t i = 0; i < c; ++i) store(out, i, kNaN);
      } else if (!weights_) {
        std::memcpy(out, x_ + copy / k_ * c, c * sizeof(T));
      } else {
        const T *x = x_ + copy / k_ * c;
        const float w = weights_[copy];
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) store(out, i, w * load(x, i));
      }
    }
  }

private:
  const T *x_;
  IdView positions_;
  const float *weights_;
  T *out_;
  int64_t k_, c_, copies_;
  std::vector<int64_t> source_; // [N·k]: the copy each row holds
};

template <typename T> class MoeCombineKernel final : public Kernel {
public:
  MoeCombineKernel(const KernelArgs &args, const MoeRowsBinding &b)
      : ys_(args.inputs[0].as<T>()), positions_(args.inputs[1]),
        weights_(b.weighted ? args.inputs[2].as<float>() : nullptr), y_(args.outputs[0].as<T>()),
        n_(b.tokens), k_(b.topK), c_(b.width), threads_(bindThreads()), acc_(threads_, c_) {}

  void run(const StepContext &) override {
#pragma omp parallel num_threads(threads_) if (n_ * k_ * c_ > kParallelGrain)
    {
      float *acc = acc_.at(omp_get_thread_num());
#pragma omp for schedule(static)
      for (int64_t n = 0; n < n_; ++n) token(n, acc);
    }
  }

private:
  void token(int64_t n, float *acc) const {
    const int64_t c = c_;
    T *y = y_ + n * c;
    std::fill(acc, acc + c, 0.0f);
    for (int64_t j = 0; j < k_; ++j) {
      const int64_t row = validRow(positions_, n * k_ + j, n_ * k_);
      if (row < 0) {
        for (int64_t i = 0; i < c; ++i) store(y, i, kNaN);
        return;
      }
      const T *ys = ys_ + row * c;
      const float w = weights_ ? weights_[n * k_ + j] : 1.0f;
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) acc[i] += w * load(ys, i);
    }
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) store(y, i, acc[i]);
  }

  const T *ys_;
  IdView positions_;
  const float *weights_;
  T *y_;
  int64_t n_, k_, c_;
  int threads_;
  ThreadScratch acc_; // per thread: a token's row in fp32
};

template <typename T> class MoeCombineWeightGradKernel final : public Kernel {
public:
  MoeCombineWeightGradKernel(const KernelArgs &args, const MoeRowsBinding &b)
      : ys_(args.inputs[0].as<T>()), positions_(args.inputs[1]), dy_(args.inputs[2].as<T>()),
        dweights_(args.outputs[0].as<float>()), k_(b.topK), c_(b.width),
        copies_(b.tokens * b.topK) {}

  void run(const StepContext &) override {
    const int64_t c = c_;
#pragma omp parallel for schedule(static) if (copies_ * c > kParallelGrain)
    for (int64_t copy = 0; copy < copies_; ++copy) {
      const int64_t row = validRow(positions_, copy, copies_);
      if (row < 0) {
        dweights_[copy] = kNaN;
        continue;
      }
      const T *ys = ys_ + row * c, *dy = dy_ + copy / k_ * c;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < c; ++i) sum += load(ys, i) * load(dy, i);
      dweights_[copy] = sum;
    }
  }

private:
  const T *ys_;
  IdView positions_;
  const T *dy_;
  float *dweights_;
  int64_t k_, c_, copies_;
};

/// router_loss: a handful of products, in order, in double.
class RouterLossKernel final : public Kernel {
public:
  RouterLossKernel(const KernelArgs &args, const contracts::RouterLossBinding &b)
      : probSum_(args.inputs[0].as<float>()), counts_(args.inputs[1].as<float>()),
        zSum_(args.inputs[2].as<float>()), loss_(args.outputs[0].as<float>()), b_(b) {}

  void run(const StepContext &) override {
    double balance = 0;
    for (int64_t e = 0; e < b_.experts; ++e) balance += double(counts_[e]) * double(probSum_[e]);
    *loss_ = static_cast<float>(b_.auxScale * balance + b_.zScale * double(*zSum_));
  }

private:
  const float *probSum_, *counts_, *zSum_;
  float *loss_;
  contracts::RouterLossBinding b_;
};

std::unique_ptr<Kernel> makeRouterLoss(const KernelArgs &args, std::string &error) {
  contracts::RouterLossBinding b;
  if (!contracts::bindRouterLoss(args, error, &b))
    return nullptr;
  return std::make_unique<RouterLossKernel>(args, b);
}

std::unique_ptr<Kernel> makeMoeRoute(const KernelArgs &args, std::string &error) {
  MoeRouteBinding b;
  if (!contracts::bindMoeRoute(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeRouteKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeMoeRouteGrad(const KernelArgs &args, std::string &error) {
  MoeRouteBinding b;
  if (!contracts::bindMoeRouteGrad(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeRouteGradKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeMoeDispatch(const KernelArgs &args, std::string &error) {
  MoeRowsBinding b;
  if (!contracts::bindMoeDispatch(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeDispatchKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeMoeCombine(const KernelArgs &args, std::string &error) {
  MoeRowsBinding b;
  if (!contracts::bindMoeCombine(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeCombineKernel>(b.dtype, args, b);
}

std::unique_ptr<Kernel> makeMoeCombineWeightGrad(const KernelArgs &args, std::string &error) {
  MoeRowsBinding b;
  if (!contracts::bindMoeCombineWeightGrad(args, error, &b))
    return nullptr;
  return makeFloatKernel<MoeCombineWeightGradKernel>(b.dtype, args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "moe_route", makeMoeRoute);
LLMC_REGISTER_KERNEL(CPU, "moe_route_grad", makeMoeRouteGrad);
LLMC_REGISTER_KERNEL(CPU, "moe_dispatch", makeMoeDispatch);
LLMC_REGISTER_KERNEL(CPU, "moe_combine", makeMoeCombine);
LLMC_REGISTER_KERNEL(CPU, "moe_combine_weight_grad", makeMoeCombineWeightGrad);
LLMC_REGISTER_KERNEL(CPU, "router_loss", makeRouterLoss);

} // namespace llmc::cpu
