//===- MaskedAttentionCases.h - attention conformance cases by mask -*- C++ -*-===//
//
// The conformance cases of the attention kernels under a sliding window
// and a score soft-cap (sliding_window_test.cpp, softcap_test.cpp): one set
// of case builders — attention, attention_grad, attention_rope and
// paged_attention — for a shape, a window (0: none) and a cap (0: none),
// each against the double reference on the CPU and the CPU on CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_MASKEDATTENTIONCASES_H
#define LLMC_TEST_UNIT_KERNELS_MASKEDATTENTIONCASES_H

#include "Conformance.h"
#include "PagedCacheLayout.h"

#include <cmath>
#include <string>
#include <vector>

namespace llmc::test {

/// Causal attention of [b, t, h, d] queries over kv heads, with a window of
/// `window` keys and scores capped at `softcap` (0: none); `segments` packs
/// documents of ~15 tokens in each row; queries are drawn `querySpread`
/// times wider than keys (so capped scores reach several caps).
struct MaskedAttention {
  int64_t b, t, h, kv, d, window;
  bool segments = false;
  double softcap = 0.0, querySpread = 1.0;

  double scale() const { return 1.0 / std::sqrt(static_cast<double>(d)); }
};

inline std::string maskedLabel(const char *what, DType dtype, const MaskedAttention &c) {
  return std::string(what) + "_" + dtypeName(dtype) + "_" + shapeLabel({c.b, c.t, c.h, c.kv, c.d}) +
         "_w" + std::to_string(c.window) + (c.segments ? "_segments" : "");
}

/// Documents of ~15 tokens in each row.
inline RefTensor maskedDocuments(const MaskedAttention &c) {
  RefTensor ids = RefTensor::zeros({c.b, c.t});
  for (int64_t i = 0; i < c.b * c.t; ++i) {
    const int64_t document = i % c.t / 15; // the row's position, in documents of 15
    ids.data[i] = static_cast<double>(document);
  }
  return ids;
}

/// scale, causal, and the window and cap where there are.
inline KernelAttrs maskedAttrs(const MaskedAttention &c) {
  KernelAttrs a = attrs({{"scale", c.scale()}}, {{"causal", 1}});
  if (c.window > 0)
    a.setInt("window", c.window);
  if (c.softcap > 0)
    a.setFloat("softcap", c.softcap);
  return a;
}

/// Norm metric as attention_test.cpp explains; lse to 1e-5.
inline void maskedTolerances(KernelCall &k, DType dtype, size_t outputs) {
  k.metric = k.cudaMetric = Metric::Norm;
  k.tolerances = k.cudaTolerances = std::vector<double>(outputs, tolerance(dtype));
  if (outputs == 2)
    k.tolerances[1] = k.cudaTolerances[1] = 1e-5;
}

inline RefTensor maskedQueries(const MaskedAttention &c, uint64_t seed) {
  return randomTensor({c.b, c.t, c.h, c.d}, seed, c.querySpread);
}

inline ConformanceCase maskedForwardCase(DType dtype, const MaskedAttention &c, uint64_t seed) {
  return {"attention", maskedLabel("forward", dtype, c), [=] {
            KernelCall k;
            k.input(maskedQueries(c, seed), dtype);
            k.input(randomTensor({c.b, c.t, c.kv, c.d}, seed + 1), dtype);
            k.input(randomTensor({c.b, c.t, c.kv, c.d}, seed + 2), dtype);
            if (c.segments)
              k.input(Buffer::of(maskedDocuments(c), DType::I32));
            k.output(dtype, {c.b, c.t, c.h, c.d});
            k.output(DType::F32, {c.b, c.h, c.t});
            k.attrs = maskedAttrs(c);
            k.reference = [=](const std::vector<RefTensor> &in) {
              return ref::attention(in[0], in[1], in[2], c.segments ? &in[3] : nullptr, c.scale(),
                                    true, c.window, c.softcap);
            };
            maskedTolerances(k, dtype, 2);
            return k;
          }};
}

inline ConformanceCase maskedBackwardCase(DType dtype, const MaskedAttention &c, uint64_t seed) {
  return {"attention_grad", maskedLabel("backward", dtype, c), [=] {
            KernelCall k;
            RefTensor q = roundTo(maskedQueries(c, seed), dtype);
            RefTensor kk = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, seed + 1), dtype);
            RefTensor v = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, seed + 2), dtype);
            RefTensor seg = maskedDocuments(c);
            // The backward consumes the forward's out (in storage precision) and lse.
            std::vector<RefTensor> forward = ref::attention(q, kk, v, c.segments ? &seg : nullptr,
                                                            c.scale(), true, c.window, c.softcap);
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
            k.attrs = maskedAttrs(c);
            k.reference = [=](const std::vector<RefTensor> &in) {
              return ref::attentionGrad(in[0], in[1], in[2], in[3], in[4], in[5],
                                        c.segments ? &in[6] : nullptr, c.scale(), true, c.window,
                                        c.softcap);
            };
            maskedTolerances(k, dtype, 3);
            return k;
          }};
}

/// attention_rope (llmc-fuse's rope): the window and the cap apply to the
/// rotated scores as to attention's.
inline ConformanceCase maskedRopeCase(DType dtype, const MaskedAttention &c, uint64_t seed) {
  return {"attention_rope", maskedLabel("rope", dtype, c), [=] {
            KernelCall k;
            const double theta = 10000.0;
            k.input(maskedQueries(c, seed), dtype);
            k.input(randomTensor({c.b, c.t, c.kv, c.d}, seed + 1), dtype);
            k.input(randomTensor({c.b, c.t, c.kv, c.d}, seed + 2), dtype);
            k.output(dtype, {c.b, c.t, c.h, c.d});
            k.output(DType::F32, {c.b, c.h, c.t});
            k.attrs = maskedAttrs(c);
            k.attrs.setFloat("theta", theta);
            k.reference = [=](const std::vector<RefTensor> &in) {
              // Rotated as rope stores them: in the storage type.
              RefTensor q = roundTo(ref::rope(in[0], nullptr, theta, false), dtype);
              RefTensor kk = roundTo(ref::rope(in[1], nullptr, theta, false), dtype);
              return ref::attention(q, kk, in[2], nullptr, c.scale(), true, c.window, c.softcap);
            };
            maskedTolerances(k, dtype, 2);
            return k;
          }};
}

/// paged_attention over sequences of `lengths`, queried at each row's
/// last `c.t` positions (a prefill chunk part way in, or decode), the cache
/// in pages of `page` tokens; `c.b` and `c.segments` are unused.
inline ConformanceCase maskedPagedCase(DType dtype, const MaskedAttention &c,
                                       const std::vector<int64_t> &lengths, int64_t page,
                                       double scale, std::string name, uint64_t seed) {
  return {"paged_attention", std::move(name), [=] {
            KernelCall k;
            const int64_t b = static_cast<int64_t>(lengths.size());
            Pages pages = shuffledPages(lengths, page, seed);
            k.input(randomTensor({b, c.t, c.h, c.d}, seed + 1, c.querySpread), dtype);
            k.input(randomTensor({pages.blocks, page, c.kv, c.d}, seed + 2), dtype);
            k.input(randomTensor({pages.blocks, page, c.kv, c.d}, seed + 3), dtype);
            k.input(Buffer::of(pages.table, DType::I32));
            k.input(Buffer::of(lastPositions(lengths, c.t), DType::I32));
            k.output(dtype, {b, c.t, c.h, c.d});
            k.attrs = attrs({{"scale", scale}}, {{"window", c.window}});
            if (c.softcap > 0)
              k.attrs.setFloat("softcap", c.softcap);
            k.reference = [=](const std::vector<RefTensor> &in) {
              return std::vector<RefTensor>{ref::pagedAttention(in[0], in[1], in[2], in[3], in[4],
                                                                scale, c.window, c.softcap)};
            };
            maskedTolerances(k, dtype, 1);
            return k;
          }};
}

} // namespace llmc::test

#endif
