//===- sliding_window_test.cpp - attention with a sliding window ----------===//
//
// The `window` attribute of attention, attention_grad, attention_rope and
// paged_attention: query i sees the keys in (i − window, i] (Mistral's
// convention). Windows cover 1 (each query sees only itself), one below
// and at the CPU kernels' 64-key tile (whole tiles behind every query of a
// tile are skipped), and windows that reach across tiles, with GQA and MQA,
// segment ids, and paged caches queried part way into long sequences and
// at decode. CPU against the reference; CUDA against the CPU.

#include "Conformance.h"
#include "PagedCacheLayout.h"

#include <cmath>

namespace llmc::test {
namespace {

struct WindowCase {
  int64_t b, t, h, kv, d, window;
  bool segments = false;
};

const std::vector<WindowCase> kWindows = {
    {2, 33, 4, 4, 8, 1},           // each query sees only itself
    {2, 70, 4, 2, 16, 5},          // GQA, short window over two query tiles
    {1, 150, 2, 1, 32, 64},        // MQA, the window one tile wide
    {1, 200, 2, 2, 16, 70},        // the window spans a tile boundary
    {1, 131, 2, 1, 16, 63},        // one below a tile
    {2, 90, 2, 2, 8, 20, true},    // with packed documents
};

std::string label(const char *what, DType dtype, const WindowCase &c) {
  return std::string(what) + "_" + dtypeName(dtype) + "_" + shapeLabel({c.b, c.t, c.h, c.kv, c.d}) +
         "_w" + std::to_string(c.window) + (c.segments ? "_segments" : "");
}

/// Documents of ~15 tokens in each row.
RefTensor documents(const WindowCase &c) {
  RefTensor ids = RefTensor::zeros({c.b, c.t});
  for (int64_t i = 0; i < c.b * c.t; ++i) ids.data[i] = static_cast<double>(i % c.t / 15);
  return ids;
}

KernelAttrs windowAttrs(double scale, int64_t window) {
  return attrs({{"scale", scale}}, {{"causal", 1}, {"window", window}});
}

/// Norm metric as attention_test.cpp explains; lse to 1e-5.
void attentionTolerances(KernelCall &k, DType dtype, size_t outputs) {
  k.metric = k.cudaMetric = Metric::Norm;
  k.tolerances = k.cudaTolerances = std::vector<double>(outputs, tolerance(dtype));
  if (outputs == 2)
    k.tolerances[1] = k.cudaTolerances[1] = 1e-5;
}

ConformanceCase forwardCase(DType dtype, const WindowCase &c, uint64_t seed) {
  return {"attention", label("forward", dtype, c), [=] {
            KernelCall k;
            const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
            k.input(randomTensor({c.b, c.t, c.h, c.d}, seed), dtype);
            k.input(randomTensor({c.b, c.t, c.kv, c.d}, seed + 1), dtype);
            k.input(randomTensor({c.b, c.t, c.kv, c.d}, seed + 2), dtype);
            if (c.segments)
              k.input(Buffer::of(documents(c), DType::I32));
            k.output(dtype, {c.b, c.t, c.h, c.d});
            k.output(DType::F32, {c.b, c.h, c.t});
            k.attrs = windowAttrs(scale, c.window);
            k.reference = [=](const std::vector<RefTensor> &in) {
              return ref::attention(in[0], in[1], in[2], c.segments ? &in[3] : nullptr, scale, true,
                                    c.window);
            };
            attentionTolerances(k, dtype, 2);
            return k;
          }};
}

ConformanceCase backwardCase(DType dtype, const WindowCase &c, uint64_t seed) {
  return {"attention_grad", label("backward", dtype, c), [=] {
            KernelCall k;
            const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
            RefTensor q = roundTo(randomTensor({c.b, c.t, c.h, c.d}, seed), dtype);
            RefTensor kk = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, seed + 1), dtype);
            RefTensor v = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, seed + 2), dtype);
            RefTensor seg = documents(c);
            // The backward consumes the forward's out (in storage precision) and lse.
            std::vector<RefTensor> forward =
                ref::attention(q, kk, v, c.segments ? &seg : nullptr, scale, true, c.window);
            k.input(q, dtype);
            k.input(kk, dtype);
            k.input(v, dtype);
            k.input(roundTo(forward[0], dtype), dtype);
            k.input(forward[1], DType::F32);
            k.input(randomTensor({c.b, c.t, c.h, c.d}, seed + 3), dtype);
            if (c.segments)
              k.input(Buffer::of(seg, DType::I32));
            k.output(dtype, q.shape);
            k.output(dtype, kk.shape);
            k.output(dtype, v.shape);
            k.attrs = windowAttrs(scale, c.window);
            k.reference = [=](const std::vector<RefTensor> &in) {
              return ref::attentionGrad(in[0], in[1], in[2], in[3], in[4], in[5],
                                        c.segments ? &in[6] : nullptr, scale, true, c.window);
            };
            attentionTolerances(k, dtype, 3);
            return k;
          }};
}

/// attention_rope (llmc-fuse's rope): the window applies to the rotated
/// scores as to attention's.
ConformanceCase ropeCase(DType dtype, const WindowCase &c, uint64_t seed) {
  return {"attention_rope", label("rope", dtype, c), [=] {
            KernelCall k;
            const double scale = 1.0 / std::sqrt(static_cast<double>(c.d)), theta = 10000.0;
            k.input(randomTensor({c.b, c.t, c.h, c.d}, seed), dtype);
            k.input(randomTensor({c.b, c.t, c.kv, c.d}, seed + 1), dtype);
            k.input(randomTensor({c.b, c.t, c.kv, c.d}, seed + 2), dtype);
            k.output(dtype, {c.b, c.t, c.h, c.d});
            k.output(DType::F32, {c.b, c.h, c.t});
            k.attrs = windowAttrs(scale, c.window);
            k.attrs.setFloat("theta", theta);
            k.reference = [=](const std::vector<RefTensor> &in) {
              // Rotated as rope stores them: in the storage type.
              RefTensor q = roundTo(ref::rope(in[0], nullptr, theta, false), dtype);
              RefTensor kk = roundTo(ref::rope(in[1], nullptr, theta, false), dtype);
              return ref::attention(q, kk, in[2], nullptr, scale, true, c.window);
            };
            attentionTolerances(k, dtype, 2);
            return k;
          }};
}

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
  return {"paged_attention", name, [=] {
            KernelCall k;
            const int64_t b = static_cast<int64_t>(c.lengths.size());
            const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
            Pages pages = shuffledPages(c.lengths, c.page, seed);
            k.input(randomTensor({b, c.t, c.h, c.d}, seed + 1), dtype);
            k.input(randomTensor({pages.blocks, c.page, c.kv, c.d}, seed + 2), dtype);
            k.input(randomTensor({pages.blocks, c.page, c.kv, c.d}, seed + 3), dtype);
            k.input(Buffer::of(pages.table, DType::I32));
            k.input(Buffer::of(lastPositions(c.lengths, c.t), DType::I32));
            k.output(dtype, {b, c.t, c.h, c.d});
            k.attrs = attrs({{"scale", scale}}, {{"window", c.window}});
            k.reference = [=](const std::vector<RefTensor> &in) {
              return std::vector<RefTensor>{
                  ref::pagedAttention(in[0], in[1], in[2], in[3], in[4], scale, c.window)};
            };
            attentionTolerances(k, dtype, 1);
            return k;
          }};
}

std::vector<ConformanceCase> slidingWindowCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 7100;
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const WindowCase &c : kWindows) {
      cases.push_back(forwardCase(dtype, c, seed += 10));
      cases.push_back(backwardCase(dtype, c, seed += 10));
      if (!c.segments)
        cases.push_back(ropeCase(dtype, c, seed += 10));
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
