//===- RequestScheduler.h - continuous batching over a paged KV cache -*- C++ -*-===//
//
// A generation artifact has two programs of a fixed batch of B rows:
// `prefill` reads a chunk of up to Tc prompt tokens per row and `decode`
// one token per row. Both take, per row, the tokens, their `positions` and
// `cache_positions` ([B, Tc], int32) and a `block_table` ([B, M], int32),
// write the tokens' keys and values to the paged cache and return the
// logits [B, V] of each row's last column. The scheduler decides what every
// call holds; running the program is the caller's callback, so the policy
// is tested with a fake model.
//
// Layout of a call, per row:
//   cache_positions[b, t]  the token's position in its sequence, or -1 for
//                          padding (nothing written, output ignored);
//   positions[b, t]        max(cache_positions[b, t], 0);
//   block_table[b, i]      the pool block holding positions [i·P, (i+1)·P)
//                          of the row's sequence (unused entries 0).
// A prompt of L tokens is fed in ⌈L/Tc⌉ chunks so that its last token
// lands in the last column, where the logits are read: the first chunk
// holds L − (⌈L/Tc⌉ − 1)·Tc tokens right-aligned after -1 padding, later
// chunks are full. A row without work in a call is all -1.
//
// Policy:
//   - Requests are admitted first come, first served into free rows. A
//     request reserves blocks for its whole prompt + max_new_tokens − 1 (the
//     last new token is returned, never fed back) at
//     admission, so a running request never waits for cache and nothing is
//     ever preempted or deadlocks; when the oldest waiting request does not
//     fit yet, later ones wait behind it (no starvation).
//   - Prefill first: a step is a prefill call when any row has prompt
//     chunks left (the others sit out), else a decode call of every running
//     row. A new request's first token so comes after ⌈L/Tc⌉ calls, at the
//     cost of pausing decodes meanwhile.
//   - A request finishes after max_new_tokens tokens or on the stop token
//     (which is kept as its last token); its blocks and row are free for
//     the next waiting request at the very next step.
//
// Every request samples with its own Sampler, seeded from the options' seed
// and the request id, so what a request generates does not depend on which
// other requests share its batch.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_GENERATE_REQUESTSCHEDULER_H
#define LLMC_RUNTIME_GENERATE_REQUESTSCHEDULER_H

#include "runtime/generate/BlockAllocator.h"
#include "runtime/generate/Sampler.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <unordered_set>
#include <vector>

namespace llmc {

struct GenerationRequest {
  int64_t id = 0;              ///< unique among the scheduler's requests
  std::vector<int32_t> prompt; ///< at least one token
  int64_t maxNewTokens = 1;    ///< at least 1
};

struct RequestSchedulerOptions {
  int64_t maxBatch = 1;   ///< B, the programs' rows
  int64_t chunk = 1;      ///< Tc, prefill's columns
  int64_t vocab = 0;      ///< V, the logits' row length
  int64_t stopToken = -1; ///< finishes a request (e.g. end of text); -1: none
  SamplingOptions sampling;
};

/// The inputs of one program call, as the program takes them. Owned by the
/// scheduler and valid until its next step.
struct Batch {
  enum class Kind { Prefill, Decode };
  Kind kind = Kind::Prefill;
  int64_t rows = 0;                                       ///< B
  int64_t columns = 0;                                    ///< Tc for prefill, 1 for decode
  int64_t blocksPerRow = 0;                               ///< M
  std::vector<int32_t> tokens, positions, cachePositions; ///< [rows, columns]
  std::vector<int32_t> blockTable;                        ///< [rows, blocksPerRow]
  std::vector<int64_t> requests; ///< per row: the request it feeds, -1: none
};

enum class FinishReason { Length, Stop };

struct GenerationResult {
  int64_t id = 0;
  std::vector<int32_t> tokens; ///< generated, stop token included
  FinishReason reason = FinishReason::Length;
};

/// A token as it is generated; `finished` on a request's last one.
struct GeneratedToken {
  int64_t request = 0;
  int32_t token = 0;
  bool finished = false;
};

/// Counts over a run; timing is the caller's.
struct GenerationStats {
  int64_t promptTokens = 0;    ///< fed to prefill
  int64_t generatedTokens = 0; ///< sampled
  int64_t prefillCalls = 0, decodeCalls = 0;
  int64_t finishedRequests = 0;
};

class RequestScheduler {
public:
  /// Runs one call: returns the logits [B, V] of each row's last column,
  /// valid until the scheduler has read them (the end of the step).
  using Model = std::function<const float *(const Batch &)>;
  using TokenCallback = std::function<void(const GeneratedToken &)>;

  /// Throws RuntimeError on options out of range.
  RequestScheduler(const RequestSchedulerOptions &options, BlockAllocator allocator);

  /// Queues a request. Throws RuntimeError naming it when it is malformed
  /// (empty prompt, token outside the vocabulary, max_new_tokens < 1, an id
  /// already used) or can never fit the cache, even empty.
  void submit(GenerationRequest request);

  /// Admits what fits, makes one call and consumes its logits. Returns
  /// false, calling nothing, when no request is left.
  bool step(const Model &model, const TokenCallback &onToken = {});
  /// Steps until every request has finished.
  GenerationStats run(const Model &model, const TokenCallback &onToken = {});

  /// Finished requests, in the order they finished.
  const std::vector<GenerationResult> &results() const { return results_; }
  const GenerationStats &stats() const { return stats_; }
  const BlockAllocator &allocator() const { return allocator_; }
  /// The last call's inputs.
  const Batch &batch() const { return batch_; }
  int64_t waiting() const { return static_cast<int64_t>(queue_.size()); }
  /// Requests holding a row.
  int64_t running() const;

private:
  struct Row {
    std::optional<GenerationRequest> request; ///< none: the row is free
    int64_t fed = 0;                          ///< prompt tokens in the cache
    std::vector<int32_t> output;
    std::optional<Sampler> sampler;
    bool inPrefill() const { return request && fed < static_cast<int64_t>(request->prompt.size()); }
  };

  static int64_t cachedTokens(const GenerationRequest &request);
  void admit();
  /// Fill batch_ for the call, and sampledRows_ with the rows whose logits
  /// are a next token.
  void fillPrefill();
  void fillDecode();
  void fillBlockTable(int64_t row);
  void consume(const float *logits, const TokenCallback &onToken);

  RequestSchedulerOptions options_;
  BlockAllocator allocator_;
  std::deque<GenerationRequest> queue_;
  std::unordered_set<int64_t> ids_;
  std::vector<Row> rows_;
  Batch batch_;
  std::vector<int64_t> sampledRows_; ///< rows whose logits this call are read
  std::vector<GenerationResult> results_;
  GenerationStats stats_;
};

} // namespace llmc

#endif
