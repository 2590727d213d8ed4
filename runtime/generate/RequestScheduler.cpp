//===- RequestScheduler.cpp - continuous batching over a paged KV cache --===//

#include "runtime/generate/RequestScheduler.h"

#include "runtime/support/Error.h"
#include "runtime/support/SplitMix.h"

#include <algorithm>

namespace llmc {

RequestScheduler::RequestScheduler(const RequestSchedulerOptions &options, BlockAllocator allocator)
    : options_(options), allocator_(std::move(allocator)) {
  if (options.maxBatch < 1)
    fail("generate: max batch ", options.maxBatch, "; expected at least 1 row");
  if (options.chunk < 1)
    fail("generate: prefill chunk of ", options.chunk, " tokens; expected at least 1");
  if (options.vocab < 1)
    fail("generate: vocabulary of ", options.vocab, " tokens; expected at least 1");
  if (options.stopToken < -1 || options.stopToken >= options.vocab)
    fail("generate: stop token ", options.stopToken, " outside the vocabulary of ", options.vocab,
         " tokens");
  Sampler check(options.sampling); // the options' errors now, not at the first token
  rows_.resize(options.maxBatch);
  batch_.rows = options.maxBatch;
  batch_.blocksPerRow = allocator_.maxBlocksPerSequence();
}

/// The positions a request's sequence fills in the cache: its prompt and
/// every new token but the last, which is returned, never fed back.
int64_t RequestScheduler::cachedTokens(const GenerationRequest &request) {
  return static_cast<int64_t>(request.prompt.size()) + request.maxNewTokens - 1;
}

void RequestScheduler::submit(GenerationRequest request) {
  int64_t id = request.id;
  int64_t L = static_cast<int64_t>(request.prompt.size());
  if (L == 0)
    fail("generate: request ", id, " has an empty prompt");
  if (request.maxNewTokens < 1)
    fail("generate: request ", id, " asks for ", request.maxNewTokens,
         " new tokens; expected at least 1");
  for (int64_t t = 0; t < L; ++t)
    if (request.prompt[t] < 0 || request.prompt[t] >= options_.vocab)
      fail("generate: request ", id, ": prompt token ", t, " is ", request.prompt[t],
           ", outside the vocabulary of ", options_.vocab, " tokens");
  int64_t total = cachedTokens(request);
  if (total > allocator_.maxContext())
    fail("generate: request ", id, " can never fit: its prompt of ", L, " tokens and ",
         request.maxNewTokens, " new tokens take ", total,
         " cache positions (the last new token is not fed back), more than the context of ",
         allocator_.maxContext());
  if (allocator_.blocksFor(total) > allocator_.numBlocks())
    fail("generate: request ", id, " can never fit: its ", total, " cache positions need ",
         allocator_.blocksFor(total), " KV cache blocks, the cache has ", allocator_.numBlocks());
  if (!ids_.insert(id).second)
    fail("generate: request id ", id, " is already used");
  queue_.push_back(std::move(request));
}

int64_t RequestScheduler::running() const {
  return std::count_if(rows_.begin(), rows_.end(),
                       [](const Row &r) { return r.request.has_value(); });
}

void RequestScheduler::admit() {
  for (Row &row : rows_) {
    if (queue_.empty())
      return;
    if (row.request)
      continue;
    GenerationRequest &next = queue_.front();
    int64_t total = cachedTokens(next);
    // First come, first served: a later, smaller request does not overtake.
    if (!allocator_.fits(total))
      return;
    allocator_.grow(next.id, total);
    SamplingOptions sampling = options_.sampling;
    // Request seeds far apart even for adjacent ids.
    sampling.seed = splitMix64(sampling.seed ^ splitMix64(static_cast<uint64_t>(next.id)));
    row.request = std::move(next);
    queue_.pop_front();
    row.fed = 0;
    row.output.clear();
    row.sampler.emplace(sampling);
  }
}

void RequestScheduler::fillBlockTable(int64_t row) {
  const std::vector<int32_t> &blocks = allocator_.blocks(rows_[row].request->id);
  std::copy(blocks.begin(), blocks.end(), batch_.blockTable.begin() + row * batch_.blocksPerRow);
}

void RequestScheduler::fillPrefill() {
  int64_t Tc = options_.chunk;
  for (int64_t b = 0; b < batch_.rows; ++b) {
    Row &row = rows_[b];
    if (!row.inPrefill())
      continue;
    const std::vector<int32_t> &prompt = row.request->prompt;
    int64_t L = static_cast<int64_t>(prompt.size());
    // The first chunk takes the remainder, so every later chunk is full and
    // the prompt's last token ends in the last column.
    int64_t n = row.fed == 0 ? L - ((L + Tc - 1) / Tc - 1) * Tc : Tc;
    for (int64_t i = 0; i < n; ++i) {
      int64_t at = b * Tc + (Tc - n) + i;
      int64_t pos = row.fed + i;
      batch_.tokens[at] = prompt[pos];
      batch_.positions[at] = batch_.cachePositions[at] = static_cast<int32_t>(pos);
    }
    row.fed += n;
    stats_.promptTokens += n;
    batch_.requests[b] = row.request->id;
    fillBlockTable(b);
    if (row.fed == L)
      sampledRows_.push_back(b);
  }
}

void RequestScheduler::fillDecode() {
  for (int64_t b = 0; b < batch_.rows; ++b) {
    Row &row = rows_[b];
    if (!row.request)
      continue;
    // The last sampled token goes in at its own position: the prompt and
    // every earlier generated token are in the cache already.
    int64_t pos = static_cast<int64_t>(row.request->prompt.size() + row.output.size()) - 1;
    batch_.tokens[b] = row.output.back();
    batch_.positions[b] = batch_.cachePositions[b] = static_cast<int32_t>(pos);
    batch_.requests[b] = row.request->id;
    fillBlockTable(b);
    sampledRows_.push_back(b);
  }
}

void RequestScheduler::consume(const float *logits, const TokenCallback &onToken) {
  for (int64_t b : sampledRows_) {
    Row &row = rows_[b];
    int32_t token = row.sampler->next(logits + b * options_.vocab, options_.vocab);
    row.output.push_back(token);
    ++stats_.generatedTokens;
    bool stopped = token == options_.stopToken;
    bool finished = stopped || static_cast<int64_t>(row.output.size()) == row.request->maxNewTokens;
    if (onToken)
      onToken(GeneratedToken{row.request->id, token, finished});
    if (!finished)
      continue;
    results_.push_back(GenerationResult{row.request->id, std::move(row.output),
                                        stopped ? FinishReason::Stop : FinishReason::Length});
    allocator_.release(row.request->id);
    ++stats_.finishedRequests;
    row.request.reset();
    row.sampler.reset();
    row.output.clear();
    row.fed = 0;
  }
}

bool RequestScheduler::step(const Model &model, const TokenCallback &onToken) {
  admit();
  if (running() == 0) {
    // Every queued request fits an empty cache (submit checks), so a
    // request can only be left waiting while another one runs.
    if (!queue_.empty())
      fail("generate: request ", queue_.front().id, " was not admitted to an idle scheduler");
    return false;
  }
  bool prefill =
      std::any_of(rows_.begin(), rows_.end(), [](const Row &r) { return r.inPrefill(); });
  batch_.kind = prefill ? Batch::Kind::Prefill : Batch::Kind::Decode;
  batch_.columns = prefill ? options_.chunk : 1;
  size_t cells = static_cast<size_t>(batch_.rows * batch_.columns);
  batch_.tokens.assign(cells, 0);
  batch_.positions.assign(cells, 0);
  batch_.cachePositions.assign(cells, -1);
  batch_.blockTable.assign(static_cast<size_t>(batch_.rows * batch_.blocksPerRow), 0);
  batch_.requests.assign(static_cast<size_t>(batch_.rows), -1);
  sampledRows_.clear();
  if (prefill) {
    fillPrefill();
    ++stats_.prefillCalls;
  } else {
    fillDecode();
    ++stats_.decodeCalls;
  }
  const float *logits = model(batch_);
  if (!logits)
    fail("generate: the model returned no logits for a ", prefill ? "prefill" : "decode", " call");
  consume(logits, onToken);
  return true;
}

GenerationStats RequestScheduler::run(const Model &model, const TokenCallback &onToken) {
  while (step(model, onToken)) {
  }
  return stats_;
}

} // namespace llmc
