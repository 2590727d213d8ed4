//===- sliding_window_test.cpp - attention with a sliding window ----------===//
//
// The `window` attribute of attention, attention_grad, attention_rope and
// paged_attention: query i sees the keys in (i − window, i] (Mistral's
// convention). Windows cover 1 (each query sees only itself), one below
// and at the CPU kernels' 64-key tile (whole tiles behind every query of a
// tile are skipped), and windows that reach across tiles, with GQA and MQA,
// segment ids, and paged caches queried part way into long sequences and
// at decode. CPU against the reference; CUDA against the CPU.

#include "MaskedAttentionCases.h"

namespace llmc::test {
namespace {

const std::vector<MaskedAttention> kWindows = {
    {2, 33, 4, 4, 8, 1},           // each query sees only itself
    {2, 70, 4, 2, 16, 5},          // GQA, short window over two query tiles
    {1, 150, 2, 1, 32, 64},        // MQA, the window one tile wide
    {1, 200, 2, 2, 16, 70},        // the window spans a tile boundary
    {1, 131, 2, 1, 16, 63},        // one below a tile
    {2, 90, 2, 2, 8, 20, true},    // with packed documents
};

/// paged_attention over sequences of `lengths`, queried at each row's
/// last `t` positions (a prefill chunk part way in, or decode).
struct PagedWindowCase {
  std::vector<int64_t> lengths;
  int64_t t, h, kv, d, page, window;
};

const std::vector<PagedWindowCase> kPagedWindows = {
    {{100, 37}, 8, 4, 2, 16, 16, 20}, // a chunk part way in; the short row's window reaches 0
    {{300}, 1, 4, 1, 32, 16, 64},     // decode: whole key tiles behind the window skipped
    {{300, 129}, 1, 8, 2, 16, 8, 100},
    {{70}, 70, 2, 2, 8, 4, 1},        // the whole prompt, each query only itself
};

ConformanceCase pagedCase(DType dtype, const PagedWindowCase &c, uint64_t seed) {
  std::string name = std::string("paged_") + dtypeName(dtype) + "_t" + std::to_string(c.t) +
                     "_rows" + std::to_string(c.lengths.size()) + "_w" + std::to_string(c.window) +
                     "_s" + std::to_string(c.lengths[0]);
  MaskedAttention shape{0, c.t, c.h, c.kv, c.d, c.window};
  return maskedPagedCase(dtype, shape, c.lengths, c.page, shape.scale(), name, seed);
}

std::vector<ConformanceCase> slidingWindowCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 7100;
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const MaskedAttention &c : kWindows) {
      cases.push_back(maskedForwardCase(dtype, c, seed += 10));
      cases.push_back(maskedBackwardCase(dtype, c, seed += 10));
      if (!c.segments)
        cases.push_back(maskedRopeCase(dtype, c, seed += 10));
    }
    for (const PagedWindowCase &c : kPagedWindows) cases.push_back(pagedCase(dtype, c, seed += 10));
  }
  return cases;
}

LLMC_CONFORMANCE_CASES(SlidingWindow, slidingWindowCases);

/// The window is checked where the kernel binds: >= 0, and causal only.
TEST(SlidingWindowAttention, BindingErrors) {
  TensorView q = typeOnly(DType::F32, {1, 8, 2, 4}), k = typeOnly(DType::F32, {1, 8, 2, 4});
  TensorView out = typeOnly(DType::F32, {1, 8, 2, 4}), lse = typeOnly(DType::F32, {1, 2, 8});
  expectBindErrorsMention("attention", {{{q, k, k},
                                         {out, lse},
                                         attrs({{"scale", 0.5}}, {{"causal", 1}, {"window", -1}}),
                                         "attribute 'window' must be >= 0, got -1"},
                                        {{q, k, k},
                                         {out, lse},
                                         attrs({{"scale", 0.5}}, {{"window", 4}}),
                                         "attribute 'window' needs causal attention"}});
}

} // namespace
} // namespace llmc::test
