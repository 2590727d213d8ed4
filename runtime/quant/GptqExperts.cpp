//===- GptqExperts.cpp - GPTQ of a mixture of experts' stacked weights ----===//
//
// A stacked scheme's groups are each slice's groups, slice after slice
// (common/QuantScheme.h's groupOf: tensor and channel groups repeat per
// slice, blocks never cross one), so expert e's group g of the slice
// scheme is group e · (groups per slice) + g of the stack.
//
//===----------------------------------------------------------------------===//

#include "runtime/quant/GptqExperts.h"

#include <algorithm>

namespace llmc::quant {

std::string accumulateExpertHessians(const float *x, int64_t rows, int64_t K,
                                     const std::vector<int64_t> &offsets, ExpertHessians &h) {
  if (offsets.size() < 2)
    return "a grouped matmul needs offsets for at least one expert";
  const size_t experts = offsets.size() - 1;
  for (size_t e = 0; e < experts; ++e)
    if (offsets[e] < 0 || offsets[e + 1] < offsets[e] || offsets[e + 1] > rows)
      return "expert " + std::to_string(e) + "'s rows [" + std::to_string(offsets[e]) + ", " +
             std::to_string(offsets[e + 1]) + ") do not lie in the input's " +
             std::to_string(rows) + " rows";
  if (offsets[0] != 0)
    return "the first expert's rows start at " + std::to_string(offsets[0]) + ", not 0";
  if (h.H.empty()) {
    h.H.resize(experts);
    h.samples.assign(experts, 0);
  }
  if (h.H.size() != experts)
    return "offsets for " + std::to_string(experts) + " experts, but Hessians for " +
           std::to_string(h.H.size());
  for (size_t e = 0; e < experts; ++e)
    accumulateHessian(x + offsets[e] * K, offsets[e + 1] - offsets[e], K, h.H[e], h.samples[e]);
  return "";
}

Scheme sliceScheme(const Scheme &stacked) {
  Scheme s = stacked;
  s.stacked = false;
  if (s.granularity == Granularity::Channel)
    s.axis -= 1;
  return s;
}

std::string gptqQuantizeExperts(const float *w, const std::vector<int64_t> &shape,
                                int64_t inputAxis, const ExpertHessians &hessians, const Scheme &s,
                                const StorageFormat &storage, const GptqOptions &options,
                                QuantizedTensor &out, GptqExpertStats *stats) {
  if (shape.size() != 3 || !s.stacked)
    return "GPTQ of experts quantizes a stack [G, A, B] with a stacked scheme";
  const int64_t G = shape[0];
  const std::vector<int64_t> slice{shape[1], shape[2]};
  const Scheme one = sliceScheme(s);
  const int64_t perSlice = groupCount(one, slice);
  if (perSlice == 0 || groupCount(s, shape) != G * perSlice)
    return quantize(w, shape, s, storage, out); // says why the scheme does not fit
  if (static_cast<int64_t>(hessians.H.size()) != G ||
      static_cast<int64_t>(hessians.samples.size()) != G)
    return "Hessians for " + std::to_string(hessians.H.size()) + " experts, expected " +
           std::to_string(G);

  const int64_t sliceSize = shape[1] * shape[2];
  std::vector<float> values(G * sliceSize), negMin(G * perSlice), max(G * perSlice);
  GptqExpertStats local;
  local.experts.resize(G);
  for (int64_t e = 0; e < G; ++e) {
    const float *we = w + e * sliceSize;
    GptqSolution solved;
    std::string fallback;
    if (hessians.samples[e] == 0) {
      fallback = "received no calibration rows";
    } else {
      GptqStats &st = local.experts[e];
      std::string why = gptqSolve(we, slice, inputAxis, hessians.H[e], one, options, solved, &st);
      if (st.notPositiveDefinite)
        fallback = "had a Hessian not positive definite after dampening (" +
                   std::to_string(hessians.samples[e]) + " rows)";
      else if (!why.empty())
        return "expert " + std::to_string(e) + ": " + why;
    }
    if (!fallback.empty()) {
      local.experts[e] = GptqStats{};
      local.fallbacks.push_back({e, fallback});
      solved.values.assign(we, we + sliceSize);
      observeRanges(we, slice, one, solved.negMin, solved.max);
    }
    std::copy(solved.values.begin(), solved.values.end(), values.begin() + e * sliceSize);
    std::copy(solved.negMin.begin(), solved.negMin.end(), negMin.begin() + e * perSlice);
    std::copy(solved.max.begin(), solved.max.end(), max.begin() + e * perSlice);
  }
  if (stats)
    *stats = std::move(local);
  return quantizeWithRanges(values.data(), shape, s, storage, negMin, max, out);
}

} // namespace llmc::quant
