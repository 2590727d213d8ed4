//===- GenerateTest.cpp - KV cache blocks, sampler ------------------------===//

#include "TestUtil.h"
#include "runtime/generate/BlockAllocator.h"
#include "runtime/generate/Sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

using namespace llmc;

//===----------------------------------------------------------------------===//
// BlockAllocator
//===----------------------------------------------------------------------===//

TEST(BlockAllocator, HandsOutEachBlockOnce) {
  BlockAllocator cache(8, 4, 8);
  EXPECT_EQ(cache.maxContext(), 32);
  cache.grow(1, 10);
  cache.grow(2, 16);
  EXPECT_EQ(cache.blocks(1), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(cache.blocks(2), (std::vector<int32_t>{3, 4, 5, 6}));
  EXPECT_EQ(cache.freeBlocks(), 1);
  EXPECT_TRUE(cache.fits(4));
  EXPECT_FALSE(cache.fits(5));
}

TEST(BlockAllocator, FullCacheChangesNothing) {
  BlockAllocator cache(8, 4, 8);
  cache.grow(1, 28);
  EXPECT_RUNTIME_ERROR(cache.grow(3, 8),
                       "kv cache full: sequence 3 needs 2 more blocks, 1 of 8 are free");
  EXPECT_EQ(cache.freeBlocks(), 1);
  EXPECT_FALSE(cache.holds(3));
  EXPECT_TRUE(cache.blocks(3).empty());
  // A sequence that holds blocks keeps exactly those.
  cache.grow(2, 4);
  EXPECT_RUNTIME_ERROR(cache.grow(1, 29),
                       "kv cache full: sequence 1 needs 1 more blocks, 0 of 8 are free");
  EXPECT_RUNTIME_ERROR(cache.grow(1, 32 + 1), "more than the context of 32");
  EXPECT_EQ(cache.blocks(1).size(), 7u);
  cache.release(2);
  cache.grow(1, 32);
  EXPECT_EQ(cache.blocks(1).back(), 7);
  EXPECT_EQ(cache.freeBlocks(), 0);
}

TEST(BlockAllocator, ReusesReleasedBlocks) {
  BlockAllocator cache(6, 2, 6);
  cache.grow(1, 6);
  cache.grow(2, 6);
  EXPECT_EQ(cache.freeBlocks(), 0);
  cache.release(1);
  EXPECT_EQ(cache.freeBlocks(), 3);
  EXPECT_FALSE(cache.holds(1));
  cache.grow(3, 5);
  EXPECT_EQ(cache.blocks(3), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_RUNTIME_ERROR(cache.release(1), "kv cache: sequence 1 holds no blocks");
  cache.release(2);
  cache.release(3);
  EXPECT_EQ(cache.freeBlocks(), 6);
}

TEST(BlockAllocator, GrowsWithTheSequence) {
  BlockAllocator cache(4, 4, 4);
  cache.grow(7, 1);
  EXPECT_EQ(cache.blocks(7).size(), 1u);
  cache.grow(7, 4);
  EXPECT_EQ(cache.blocks(7).size(), 1u);
  cache.grow(9, 1); // interleaved: sequence 7's next block is not adjacent
  cache.grow(7, 5);
  EXPECT_EQ(cache.blocks(7), (std::vector<int32_t>{0, 2}));
  cache.grow(7, 2); // never shrinks
  EXPECT_EQ(cache.blocks(7).size(), 2u);
  EXPECT_EQ(cache.blocksFor(0), 0);
  EXPECT_EQ(cache.blocksFor(8), 2);
  EXPECT_EQ(cache.blocksFor(9), 3);
}

TEST(BlockAllocator, Errors) {
  BlockAllocator cache(16, 4, 2);
  EXPECT_RUNTIME_ERROR(
      cache.grow(5, 9),
      "kv cache: sequence 5 needs 9 tokens, more than the context of 8 (2 blocks of 4 tokens)");
  EXPECT_FALSE(cache.fits(9));
  EXPECT_RUNTIME_ERROR(BlockAllocator(0, 4, 2), "kv cache: 0 blocks");
  EXPECT_RUNTIME_ERROR(BlockAllocator(4, 0, 2), "block size 0");
  EXPECT_RUNTIME_ERROR(BlockAllocator(4, 4, 0), "0 blocks per sequence");
}

//===----------------------------------------------------------------------===//
// Sampler
//===----------------------------------------------------------------------===//

namespace {
SamplingOptions sampling(double temperature, int64_t topK = 0, double topP = 1, uint64_t seed = 0) {
  SamplingOptions o;
  o.temperature = temperature;
  o.topK = topK;
  o.topP = topP;
  o.seed = seed;
  return o;
}

std::vector<float> randomLogits(int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 2);
  std::vector<float> logits(vocab);
  for (float &l : logits)
    l = normal(rng);
  return logits;
}

int64_t argmax(const std::vector<float> &logits) {
  return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

/// Draw frequencies of `n` tokens.
std::vector<double> frequencies(Sampler &sampler, const std::vector<float> &logits, int n) {
  std::vector<double> seen(logits.size());
  for (int i = 0; i < n; ++i)
    seen[sampler.next(logits.data(), logits.size())] += 1.0 / n;
  return seen;
}
} // namespace

TEST(Sampler, GreedyPicksTheHighestLogit) {
  Sampler greedy(sampling(0));
  for (uint64_t s = 0; s < 20; ++s) {
    std::vector<float> logits = randomLogits(100, s);
    EXPECT_EQ(greedy.next(logits.data(), 100), argmax(logits));
  }
}

TEST(Sampler, GreedyTiesGoToTheLowestId) {
  std::vector<float> logits = {1, 3, -2, 3, 3};
  EXPECT_EQ(Sampler(sampling(0)).next(logits.data(), 5), 1);
  // top-k 1 and a tiny nucleus both narrow to the same single token.
  EXPECT_EQ(Sampler(sampling(1, 1)).next(logits.data(), 5), 1);
  EXPECT_EQ(Sampler(sampling(1, 0, 1e-6)).next(logits.data(), 5), 1);
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  Sampler topK(sampling(1.5, 1, 1, 3)), topP(sampling(1.5, 0, 1e-6, 3)),
      both(sampling(0.7, 5, 1e-6, 3));
  for (uint64_t s = 0; s < 50; ++s) {
    std::vector<float> logits = randomLogits(300, s);
    EXPECT_EQ(topK.next(logits.data(), 300), argmax(logits));
    EXPECT_EQ(topP.next(logits.data(), 300), argmax(logits));
    EXPECT_EQ(both.next(logits.data(), 300), argmax(logits));
  }
}

TEST(Sampler, SeedReproducesADraw) {
  std::vector<float> logits = randomLogits(64, 1);
  auto draws = [&](uint64_t seed) {
    Sampler s(sampling(1.0, 20, 0.9, seed));
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i)
      out.push_back(s.next(logits.data(), 64));
    return out;
  };
  EXPECT_EQ(draws(5), draws(5));
  EXPECT_NE(draws(5), draws(6));
}

TEST(Sampler, DrawsFollowTheSoftmax) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (ids shuffled, so rank ≠ id).
  std::vector<double> p = {0.15, 0.5, 0.05, 0.3};
  std::vector<float> logits;
  for (double q : p)
    logits.push_back(static_cast<float>(std::log(q)));
  const int n = 200000;
  auto expectNear = [&](const std::vector<double> &seen, const std::vector<double> &want) {
    for (size_t v = 0; v < want.size(); ++v)
      EXPECT_NEAR(seen[v], want[v], 0.006) << "token " << v;
  };
  Sampler plain(sampling(1.0, 0, 1, 11));
  expectNear(frequencies(plain, logits, n), p);
  // Temperature 2: p^(1/2), renormalized.
  std::vector<double> hot;
  double sum = 0;
  for (double q : p)
    sum += std::sqrt(q);
  for (double q : p)
    hot.push_back(std::sqrt(q) / sum);
  Sampler warm(sampling(2.0, 0, 1, 12));
  expectNear(frequencies(warm, logits, n), hot);
  // top-k 2: 0.5 and 0.3 renormalized.
  Sampler topK(sampling(1.0, 2, 1, 13));
  expectNear(frequencies(topK, logits, n), {0, 0.625, 0, 0.375});
  // top-p 0.7: 0.5 alone is short of it, 0.5 + 0.3 holds it.
  Sampler topP(sampling(1.0, 0, 0.7, 14));
  expectNear(frequencies(topP, logits, n), {0, 0.625, 0, 0.375});
  // top-p 0.85 keeps three; top-k 3 with top-p 0.9 too (0.95 of the three).
  Sampler nucleus(sampling(1.0, 0, 0.85, 15)), combined(sampling(1.0, 3, 0.9, 16));
  expectNear(frequencies(nucleus, logits, n), {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95});
  expectNear(frequencies(combined, logits, n), {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95});
}

TEST(Sampler, LargeNucleusOverAWideVocabulary) {
  // 200 equally likely tokens among 1000: a nucleus of half the mass is the
  // 100 lowest ids among them, more than one piece of the sort.
  std::vector<float> logits(1000, -100.f);
  for (int v = 0; v < 400; v += 2)
    logits[v] = 0;
  Sampler s(sampling(1.0, 0, 0.5, 21));
  std::set<int32_t> drawn;
  for (int i = 0; i < 5000; ++i)
    drawn.insert(s.next(logits.data(), 1000));
  EXPECT_EQ(drawn.size(), 100u);
  EXPECT_EQ(*drawn.begin(), 0);
  EXPECT_EQ(*drawn.rbegin(), 198);
}

TEST(Sampler, MatchesTheTopKSamplerOfTraining) {
  // What llmc-run's --sample did before it used Sampler: rank by logit,
  // keep k, draw over exp((l − max) / T) in rank order. A seed must keep
  // giving the same text.
  const int64_t V = 256, k = 40;
  const double T = 0.8;
  Sampler sampler(sampling(T, k, 1, 1337));
  std::mt19937_64 rng(1337);
  std::vector<std::pair<float, int>> ranked(V);
  for (uint64_t step = 0; step < 300; ++step) {
    std::vector<float> row = randomLogits(V, 1000 + step);
    for (int64_t v = 0; v < V; ++v)
      ranked[v] = {row[v], static_cast<int>(v)};
    std::partial_sort(ranked.begin(), ranked.begin() + k, ranked.end(),
                      [](auto &a, auto &b) { return a.first > b.first; });
    std::vector<double> weights(k);
    for (int64_t i = 0; i < k; ++i)
      weights[i] = std::exp((ranked[i].first - ranked[0].first) / T);
    std::discrete_distribution<int64_t> pick(weights.begin(), weights.end());
    ASSERT_EQ(sampler.next(row.data(), V), ranked[pick(rng)].second) << "step " << step;
  }
}

TEST(Sampler, Errors) {
  EXPECT_RUNTIME_ERROR(Sampler(sampling(-0.5)),
                       "sampler: temperature -0.5; expected a finite value >= 0");
  EXPECT_RUNTIME_ERROR(Sampler(sampling(std::nan(""))), "sampler: temperature");
  EXPECT_RUNTIME_ERROR(Sampler(sampling(1, 0, 0)), "sampler: top-p 0; expected a value in (0, 1]");
  EXPECT_RUNTIME_ERROR(Sampler(sampling(1, 0, 1.5)), "sampler: top-p 1.5");
  std::vector<float> logits = {0, std::numeric_limits<float>::quiet_NaN(), 1};
  Sampler s(sampling(1));
  EXPECT_RUNTIME_ERROR(s.next(logits.data(), 3), "sampler: logit of token 1 is NaN");
  EXPECT_RUNTIME_ERROR(s.next(logits.data(), 0), "sampler: vocabulary of 0 tokens");
}
