//===- GenerateTest.cpp - KV cache blocks, sampler, continuous batching ---===//

#include "TestUtil.h"
#include "runtime/generate/BlockAllocator.h"
#include "runtime/generate/Sampler.h"
#include "runtime/generate/RequestScheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
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

//===----------------------------------------------------------------------===//
// RequestScheduler
//===----------------------------------------------------------------------===//

namespace {
constexpr int64_t kVocab = 37;

uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ULL;
  x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dULL;
  return x ^ (x >> 33);
}

/// Logits after a sequence whose (position, token) history hashes to `h`.
void logitsOf(uint64_t h, float *out) {
  for (int64_t v = 0; v < kVocab; ++v)
    out[v] = static_cast<float>(mix(h * kVocab + v) % 1000) / 100.f;
}

uint64_t extend(uint64_t h, int64_t position, int32_t token) {
  return mix(h ^ mix(static_cast<uint64_t>(position) * kVocab + token));
}

/// A stand-in for the compiled programs over a real paged cache (of
/// tokens): a call writes each fed token where block_table and
/// cache_positions say, then a row's logits are a function of every token
/// the cache holds for that row, read back through its block table. So a
/// block shared by two live sequences or a token at a wrong position
/// changes what a request generates. It also checks each call's layout.
class FakeModel {
public:
  FakeModel(int64_t numBlocks, int64_t blockSize)
      : blockSize(blockSize), pool(numBlocks * blockSize, -1) {}

  const float *operator()(const Batch &batch) {
    calls.push_back(batch);
    logits.assign(batch.rows * kVocab, std::nanf(""));
    EXPECT_EQ(batch.tokens.size(), static_cast<size_t>(batch.rows * batch.columns));
    EXPECT_EQ(batch.blockTable.size(), static_cast<size_t>(batch.rows * batch.blocksPerRow));
    for (int64_t b = 0; b < batch.rows; ++b) {
      const int32_t *cp = &batch.cachePositions[b * batch.columns];
      const int32_t *pos = &batch.positions[b * batch.columns];
      const int32_t *tok = &batch.tokens[b * batch.columns];
      const int32_t *table = &batch.blockTable[b * batch.blocksPerRow];
      int64_t last = -1;
      for (int64_t t = 0; t < batch.columns; ++t) {
        EXPECT_EQ(pos[t], std::max(cp[t], 0));
        if (cp[t] < 0) {
          EXPECT_EQ(last, -1) << "padding after a token in row " << b;
          continue;
        }
        if (last >= 0) {
          EXPECT_EQ(cp[t], last + 1) << "row " << b;
        }
        last = cp[t];
        pool[table[cp[t] / blockSize] * blockSize + cp[t] % blockSize] = tok[t];
      }
      EXPECT_EQ(last >= 0, batch.requests[b] >= 0) << "row " << b;
      if (last < 0)
        continue;
      uint64_t h = 0;
      for (int64_t p = 0; p <= last; ++p)
        h = extend(h, p, pool[table[p / blockSize] * blockSize + p % blockSize]);
      logitsOf(h, &logits[b * kVocab]);
    }
    return logits.data();
  }

  int64_t blockSize;
  std::vector<int32_t> pool;
  std::vector<float> logits;
  std::vector<Batch> calls;
};

/// Greedy generation of one sequence, the plain way.
std::vector<int32_t> reference(const std::vector<int32_t> &prompt, int64_t maxNew,
                               int64_t stop = -1) {
  uint64_t h = 0;
  int64_t p = 0;
  for (int32_t t : prompt)
    h = extend(h, p++, t);
  std::vector<int32_t> out;
  std::vector<float> row(kVocab);
  while (static_cast<int64_t>(out.size()) < maxNew) {
    logitsOf(h, row.data());
    int32_t next = static_cast<int32_t>(argmax(row));
    out.push_back(next);
    if (next == stop)
      break;
    h = extend(h, p++, next);
  }
  return out;
}

GenerationRequest request(int64_t id, int64_t length, int64_t maxNew) {
  GenerationRequest r;
  r.id = id;
  r.maxNewTokens = maxNew;
  for (int64_t t = 0; t < length; ++t)
    r.prompt.push_back(static_cast<int32_t>((id * 7 + t * 3) % kVocab));
  return r;
}

RequestSchedulerOptions schedulerOptions(int64_t maxBatch, int64_t chunk, SamplingOptions s = {}) {
  RequestSchedulerOptions o;
  o.maxBatch = maxBatch;
  o.chunk = chunk;
  o.vocab = kVocab;
  o.sampling = s;
  return o;
}

std::map<int64_t, std::vector<int32_t>> outputs(const RequestScheduler &s) {
  std::map<int64_t, std::vector<int32_t>> out;
  for (const GenerationResult &r : s.results())
    out[r.id] = r.tokens;
  return out;
}

/// A mix of prompt lengths (shorter, equal to and longer than a chunk of 4).
std::vector<GenerationRequest> workload() {
  std::vector<GenerationRequest> all;
  int64_t lengths[] = {6, 3, 8, 1, 13, 4, 9};
  int64_t news[] = {5, 9, 2, 7, 4, 1, 6};
  for (int64_t i = 0; i < 7; ++i)
    all.push_back(request(100 + i, lengths[i], news[i]));
  return all;
}

std::map<int64_t, std::vector<int32_t>> runWorkload(int64_t maxBatch, int64_t chunk,
                                                    SamplingOptions s = {}) {
  FakeModel model(32, 4);
  RequestScheduler scheduler(schedulerOptions(maxBatch, chunk, s), BlockAllocator(32, 4, 8));
  for (GenerationRequest &r : workload())
    scheduler.submit(r);
  scheduler.run(std::ref(model));
  EXPECT_EQ(scheduler.allocator().freeBlocks(), 32);
  return outputs(scheduler);
}
} // namespace

TEST(RequestScheduler, ChunksArePaddedOnTheLeft) {
  FakeModel model(16, 4);
  RequestScheduler scheduler(schedulerOptions(3, 4), BlockAllocator(16, 4, 4));
  scheduler.submit(request(0, 6, 2));
  scheduler.submit(request(1, 3, 2));
  scheduler.submit(request(2, 8, 2));
  scheduler.run(std::ref(model));
  ASSERT_GE(model.calls.size(), 3u);
  using V = std::vector<int32_t>;
  const Batch &first = model.calls[0];
  EXPECT_EQ(first.kind, Batch::Kind::Prefill);
  EXPECT_EQ(first.columns, 4);
  EXPECT_EQ(first.cachePositions, (V{-1, -1, 0, 1, /**/ -1, 0, 1, 2, /**/ 0, 1, 2, 3}));
  EXPECT_EQ(first.positions, (V{0, 0, 0, 1, /**/ 0, 0, 1, 2, /**/ 0, 1, 2, 3}));
  GenerationRequest r0 = request(0, 6, 2), r2 = request(2, 8, 2);
  EXPECT_EQ(first.tokens[2], r0.prompt[0]);
  EXPECT_EQ(first.tokens[3], r0.prompt[1]);
  // Request 1's prompt is done after one chunk: it sits out the second.
  const Batch &second = model.calls[1];
  EXPECT_EQ(second.kind, Batch::Kind::Prefill);
  EXPECT_EQ(second.cachePositions, (V{2, 3, 4, 5, /**/ -1, -1, -1, -1, /**/ 4, 5, 6, 7}));
  EXPECT_EQ(second.requests, (std::vector<int64_t>{0, -1, 2}));
  EXPECT_EQ(V(second.tokens.begin() + 8, second.tokens.end()),
            V(r2.prompt.begin() + 4, r2.prompt.end()));
  // Then one decode call: each row's first generated token at its position.
  const Batch &third = model.calls[2];
  EXPECT_EQ(third.kind, Batch::Kind::Decode);
  EXPECT_EQ(third.columns, 1);
  EXPECT_EQ(third.cachePositions, (V{6, 3, 8}));
  std::map<int64_t, std::vector<int32_t>> out = outputs(scheduler);
  EXPECT_EQ(third.tokens, (V{out[0][0], out[1][0], out[2][0]}));
  EXPECT_EQ(model.calls.size(), 3u);
  EXPECT_EQ(scheduler.stats().prefillCalls, 2);
  EXPECT_EQ(scheduler.stats().decodeCalls, 1);
  EXPECT_EQ(scheduler.stats().promptTokens, 17);
  EXPECT_EQ(scheduler.stats().generatedTokens, 6);
}

TEST(RequestScheduler, BlockTablesAreTheAllocatorsBlocks) {
  FakeModel fake(12, 4);
  RequestScheduler scheduler(schedulerOptions(3, 4), BlockAllocator(12, 4, 6));
  for (GenerationRequest &r : workload())
    scheduler.submit(r);
  int64_t calls = 0;
  scheduler.run([&](const Batch &batch) -> const float * {
    ++calls;
    std::set<int32_t> used;
    for (int64_t b = 0; b < batch.rows; ++b) {
      const int32_t *table = &batch.blockTable[b * batch.blocksPerRow];
      if (batch.requests[b] < 0) {
        EXPECT_TRUE(
            std::all_of(table, table + batch.blocksPerRow, [](int32_t e) { return e == 0; }));
        continue;
      }
      const std::vector<int32_t> &blocks = scheduler.allocator().blocks(batch.requests[b]);
      EXPECT_FALSE(blocks.empty());
      for (int64_t i = 0; i < batch.blocksPerRow; ++i) {
        EXPECT_EQ(table[i], i < static_cast<int64_t>(blocks.size()) ? blocks[i] : 0);
        if (i < static_cast<int64_t>(blocks.size())) {
          EXPECT_TRUE(used.insert(table[i]).second) << "block " << table[i] << " in two rows";
        }
      }
    }
    return fake(batch);
  });
  EXPECT_GT(calls, 0);
  EXPECT_EQ(scheduler.results().size(), 7u);
  EXPECT_EQ(scheduler.allocator().freeBlocks(), 12);
}

TEST(RequestScheduler, AdmitsAWaitingRequestAsSoonAsARowFrees) {
  FakeModel model(16, 4);
  RequestScheduler scheduler(schedulerOptions(2, 4), BlockAllocator(16, 4, 4));
  scheduler.submit(request(1, 3, 2));
  scheduler.submit(request(2, 3, 6));
  scheduler.submit(request(3, 3, 3));
  EXPECT_EQ(scheduler.waiting(), 3);
  size_t finishedAt = 0;
  scheduler.run(std::ref(model), [&](const GeneratedToken &t) {
    if (t.request == 1 && t.finished)
      finishedAt = model.calls.size();
  });
  // Request 1 finishes on the first decode (call 2); request 3 takes its
  // row in the very next call, a prefill that request 2 sits out.
  ASSERT_EQ(finishedAt, 2u);
  EXPECT_EQ(model.calls[0].requests, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(model.calls[1].requests, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(model.calls[2].kind, Batch::Kind::Prefill);
  EXPECT_EQ(model.calls[2].requests, (std::vector<int64_t>{3, -1}));
  EXPECT_EQ(model.calls[3].kind, Batch::Kind::Decode);
  EXPECT_EQ(model.calls[3].requests, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(scheduler.waiting(), 0);
  EXPECT_EQ(scheduler.running(), 0);
  std::map<int64_t, std::vector<int32_t>> out = outputs(scheduler);
  for (int64_t id : {1, 2, 3}) {
    GenerationRequest r = request(id, 3, id == 1 ? 2 : id == 2 ? 6 : 3);
    EXPECT_EQ(out[id], reference(r.prompt, r.maxNewTokens)) << "request " << id;
  }
}

TEST(RequestScheduler, WaitsForBlocksFirstComeFirstServed) {
  // Room for one 8-token request at a time although there are two rows.
  FakeModel model(2, 4);
  RequestScheduler scheduler(schedulerOptions(2, 4), BlockAllocator(2, 4, 2));
  scheduler.submit(request(1, 5, 3));
  scheduler.submit(request(2, 2, 6));
  scheduler.submit(request(3, 1, 1)); // would fit beside request 1, waits its turn
  std::vector<int64_t> order;
  scheduler.run([&](const Batch &batch) {
    EXPECT_EQ(scheduler.running(), 1);
    return model(batch);
  });
  for (const GenerationResult &r : scheduler.results())
    order.push_back(r.id);
  EXPECT_EQ(order, (std::vector<int64_t>{1, 2, 3}));
  std::map<int64_t, std::vector<int32_t>> out = outputs(scheduler);
  EXPECT_EQ(out[1], reference(request(1, 5, 3).prompt, 3));
  EXPECT_EQ(out[2], reference(request(2, 2, 6).prompt, 6));
}

TEST(RequestScheduler, BatchedEqualsOneAtATime) {
  std::map<int64_t, std::vector<int32_t>> single = runWorkload(1, 4);
  EXPECT_EQ(single.size(), 7u);
  for (const GenerationRequest &r : workload())
    EXPECT_EQ(single[r.id], reference(r.prompt, r.maxNewTokens)) << "request " << r.id;
  EXPECT_EQ(runWorkload(4, 4), single);
  EXPECT_EQ(runWorkload(3, 1), single);
  EXPECT_EQ(runWorkload(7, 16), single);
  // Sampled: each request draws from its own seeded sampler.
  SamplingOptions s = sampling(0.9, 20, 0.95, 77);
  std::map<int64_t, std::vector<int32_t>> sampled = runWorkload(1, 4, s);
  EXPECT_EQ(runWorkload(4, 4, s), sampled);
  EXPECT_EQ(runWorkload(2, 3, s), sampled);
  EXPECT_NE(sampled, single);
}

TEST(RequestScheduler, StreamsEveryTokenInOrder) {
  FakeModel model(32, 4);
  RequestScheduler scheduler(schedulerOptions(3, 4), BlockAllocator(32, 4, 8));
  for (GenerationRequest &r : workload())
    scheduler.submit(r);
  std::map<int64_t, std::vector<int32_t>> streamed;
  std::map<int64_t, int> lastFlags;
  GenerationStats stats = scheduler.run(std::ref(model), [&](const GeneratedToken &t) {
    EXPECT_EQ(lastFlags[t.request], 0) << "token after the last one of " << t.request;
    streamed[t.request].push_back(t.token);
    lastFlags[t.request] += t.finished;
  });
  EXPECT_EQ(streamed, outputs(scheduler));
  int64_t prompt = 0, generated = 0;
  for (const GenerationRequest &r : workload()) {
    EXPECT_EQ(lastFlags[r.id], 1);
    prompt += static_cast<int64_t>(r.prompt.size());
    generated += r.maxNewTokens;
  }
  EXPECT_EQ(stats.promptTokens, prompt);
  EXPECT_EQ(stats.generatedTokens, generated);
  EXPECT_EQ(stats.finishedRequests, 7);
  EXPECT_FALSE(scheduler.step(std::ref(model)));
}

TEST(RequestScheduler, StopTokenFinishesARequest) {
  GenerationRequest r = request(5, 7, 20);
  std::vector<int32_t> full = reference(r.prompt, r.maxNewTokens);
  // The first token that did not come earlier, so it stops there.
  size_t at = 1;
  while (std::count(full.begin(), full.begin() + at, full[at]))
    ++at;
  ASSERT_LT(at, full.size());
  RequestSchedulerOptions o = schedulerOptions(2, 4);
  o.stopToken = full[at];
  FakeModel model(16, 4);
  RequestScheduler scheduler(o, BlockAllocator(16, 4, 8));
  scheduler.submit(r);
  scheduler.run(std::ref(model));
  ASSERT_EQ(scheduler.results().size(), 1u);
  const GenerationResult &done = scheduler.results()[0];
  EXPECT_EQ(done.reason, FinishReason::Stop);
  EXPECT_EQ(done.tokens, std::vector<int32_t>(full.begin(), full.begin() + at + 1));
  EXPECT_EQ(scheduler.allocator().freeBlocks(), 16);
}

TEST(RequestScheduler, RejectsRequestsThatCanNeverFit) {
  RequestScheduler scheduler(schedulerOptions(2, 4), BlockAllocator(16, 4, 4));
  EXPECT_RUNTIME_ERROR(
      scheduler.submit(request(42, 10, 8)),
      "generate: request 42 can never fit: its prompt of 10 tokens and 8 new tokens take 17 "
      "cache positions (the last new token is not fed back), more than the context of 16");
  RequestScheduler small(schedulerOptions(2, 4), BlockAllocator(2, 4, 4));
  EXPECT_RUNTIME_ERROR(small.submit(request(7, 9, 4)),
                       "generate: request 7 can never fit: its 12 cache positions need 3 KV cache blocks, "
                       "the cache has 2");
  EXPECT_EQ(small.waiting(), 0);
  // The rest of the queue is unaffected.
  small.submit(request(8, 4, 4));
  FakeModel model(2, 4);
  small.run(std::ref(model));
  EXPECT_EQ(small.results().size(), 1u);
}

TEST(RequestScheduler, RejectsMalformedRequests) {
  RequestScheduler scheduler(schedulerOptions(2, 4), BlockAllocator(16, 4, 4));
  EXPECT_RUNTIME_ERROR(scheduler.submit(request(1, 0, 3)),
                       "generate: request 1 has an empty prompt");
  EXPECT_RUNTIME_ERROR(scheduler.submit(request(2, 3, 0)),
                       "generate: request 2 asks for 0 new tokens");
  GenerationRequest bad = request(3, 3, 2);
  bad.prompt[1] = kVocab;
  EXPECT_RUNTIME_ERROR(scheduler.submit(bad),
                       "generate: request 3: prompt token 1 is 37, outside the vocabulary of 37");
  scheduler.submit(request(4, 3, 2));
  EXPECT_RUNTIME_ERROR(scheduler.submit(request(4, 2, 2)),
                       "generate: request id 4 is already used");
  EXPECT_RUNTIME_ERROR(RequestScheduler(schedulerOptions(0, 4), BlockAllocator(1, 1, 1)), "max batch 0");
  EXPECT_RUNTIME_ERROR(RequestScheduler(schedulerOptions(1, 0), BlockAllocator(1, 1, 1)),
                       "chunk of 0 tokens");
  EXPECT_RUNTIME_ERROR(RequestScheduler(schedulerOptions(1, 1, sampling(-1)), BlockAllocator(1, 1, 1)),
                       "sampler: temperature -1");
  RequestSchedulerOptions o = schedulerOptions(1, 1);
  o.stopToken = kVocab;
  EXPECT_RUNTIME_ERROR(RequestScheduler(o, BlockAllocator(1, 1, 1)),
                       "stop token 37 outside the vocabulary");
  FakeModel model(16, 4);
  EXPECT_RUNTIME_ERROR(scheduler.step([](const Batch &) -> const float * { return nullptr; }),
                       "generate: the model returned no logits for a prefill call");
}
