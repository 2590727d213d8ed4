//===- Sampler.cpp - the next token from a row of logits ------------------===//

#include "runtime/generate/Sampler.h"

#include "runtime/support/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace llmc {

Sampler::Sampler(const SamplingOptions &options) : options_(options), rng_(options.seed) {
  // Written so that NaN fails too.
  if (!(options.temperature >= 0) || std::isinf(options.temperature))
    fail("sampler: temperature ", options.temperature,
         "; expected a finite value >= 0 (0: greedy)");
  if (!(options.topP > 0 && options.topP <= 1))
    fail("sampler: top-p ", options.topP, "; expected a value in (0, 1] (1: off)");
}

int32_t Sampler::next(const float *logits, int64_t vocab) {
  if (vocab < 1 || vocab > std::numeric_limits<int32_t>::max())
    fail("sampler: vocabulary of ", vocab, " tokens");
  // The greedy answer, needed anyway: it is the top candidate.
  int64_t best = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    if (std::isnan(logits[v]))
      fail("sampler: logit of token ", v, " is NaN");
    if (logits[v] > logits[best])
      best = v;
  }
  float top = logits[best];
  int64_t k = options_.topK <= 0 || options_.topK >= vocab ? vocab : options_.topK;
  // +inf leaves no probability to any other token.
  if (options_.temperature == 0 || k == 1 || std::isinf(top))
    return static_cast<int32_t>(best);

  // exp((l − max) / T): the softmax up to its normalization, which
  // std::discrete_distribution does itself. The difference is taken in
  // float, as the logits are.
  double temperature = options_.temperature;
  auto weight = [&](int32_t v) {
    return std::exp(static_cast<double>(logits[v] - top) / temperature);
  };
  auto higher = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  ranked_.resize(vocab);
  std::iota(ranked_.begin(), ranked_.end(), 0);

  int64_t kept = k;
  if (options_.topP >= 1) {
    std::partial_sort(ranked_.begin(), ranked_.begin() + k, ranked_.end(), higher);
  } else {
    // Only the head of the ranking is needed to find the nucleus; sort it
    // in growing pieces rather than all V tokens.
    int64_t sorted = 0;
    double total = 0;
    if (k < vocab) {
      std::partial_sort(ranked_.begin(), ranked_.begin() + k, ranked_.end(), higher);
      sorted = k;
      for (int64_t i = 0; i < k; ++i)
        total += weight(ranked_[i]);
    } else {
      for (int64_t v = 0; v < vocab; ++v)
        total += weight(static_cast<int32_t>(v));
    }
    double mass = 0;
    kept = 0;
    while (kept < k) {
      if (kept == sorted) {
        int64_t more = std::min(k, std::max<int64_t>(2 * sorted, 64));
        std::partial_sort(ranked_.begin() + sorted, ranked_.begin() + more, ranked_.end(), higher);
        sorted = more;
      }
      mass += weight(ranked_[kept++]);
      if (mass >= options_.topP * total)
        break;
    }
  }
  if (kept == 1)
    return ranked_[0];
  weights_.resize(kept);
  for (int64_t i = 0; i < kept; ++i)
    weights_[i] = weight(ranked_[i]);
  std::discrete_distribution<int64_t> pick(weights_.begin(), weights_.end());
  return ranked_[pick(rng_)];
}

} // namespace llmc
