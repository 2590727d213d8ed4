//===- Sampler.h - the next token from a row of logits ----------*- C++ -*-===//
//
// One sampler for everything that generates text (llmc-run's --sample and
// generation), so both read the same options the same way:
//
//   temperature 0   greedy: the highest logit, ties to the lowest token id
//                   (so a greedy run is the same on every platform);
//   temperature T   softmax(logits / T), narrowed by
//     top-k k       to the k most likely tokens (k ≤ 0 or k ≥ V: off), then
//     top-p p       to the smallest most-likely set holding at least p of
//                   what is left (nucleus sampling; p = 1: off),
//                   and drawn from with a std::mt19937_64 of the given seed.
//
// Candidates are ranked most likely first (ties: lower id first) and the
// draw walks them in that order, so a seed reproduces a run exactly. When
// one candidate is left no random number is drawn.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_GENERATE_SAMPLER_H
#define LLMC_RUNTIME_GENERATE_SAMPLER_H

#include <cstdint>
#include <random>
#include <vector>

namespace llmc {

struct SamplingOptions {
  double temperature = 0; ///< 0: greedy
  int64_t topK = 0;       ///< ≤ 0 or ≥ vocabulary: off
  double topP = 1;        ///< in (0, 1]; 1: off
  uint64_t seed = 0;
};

class Sampler {
public:
  /// Throws RuntimeError naming the option when temperature < 0 or top-p is
  /// outside (0, 1].
  explicit Sampler(const SamplingOptions &options);

  /// The next token from `vocab` logits. Throws RuntimeError on a NaN logit.
  int32_t next(const float *logits, int64_t vocab);

  const SamplingOptions &options() const { return options_; }

private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
  // Reused between calls: sampling a long text allocates once.
  std::vector<int32_t> ranked_;
  std::vector<double> weights_;
};

} // namespace llmc

#endif
