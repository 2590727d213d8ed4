//===- delayed_scaling_test.cpp - qat_delayed_range, qat_amax_history, qat_commit_state ===//
//
// fp8 delayed scaling's kernels: conformance cases (the CPU against the
// double reference of kernels/reference/delayed_scaling.cpp, CUDA against
// the CPU), a run of steps checked against Transformer Engine's formula
// worked by hand, the non-finite paths and the binding errors.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include "common/QuantScheme.h"

#include <cmath>
#include <limits>

namespace llmc::test {
namespace {

constexpr int64_t kE4M3 = 2, kE5M2 = 3;

/// A state of history length `n`: positive amaxes from `seed`, the newest
/// `fresh` of them (from the oldest end) left 0 as in an early step, and a
/// stored range (0 when `noRange`).
RefTensor historyState(int64_t n, uint64_t seed, int64_t fresh, bool noRange) {
  RefTensor s = roundTo(randomTensor({n + 1}, seed, 3.0), DType::F32);
  for (double &v : s.data) v = std::abs(v) + 0.01;
  for (int64_t i = 0; i < fresh && i < n; ++i) s.data[n - i] = 0.0;
  if (noRange) s.data[0] = 0.0;
  return s;
}

/// A [1, 2] range [−min, max] of amax `a` (the larger half; the other half
/// below it or negative, as an all-positive tensor's −min is).
RefTensor observedRange(double a, bool maxHalf) {
  return maxHalf ? RefTensor{{1, 2}, {-0.25 * a, a}} : RefTensor{{1, 2}, {a, 0.5 * a}};
}

std::vector<ConformanceCase> delayedRangeCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 900;
  for (int64_t format : {kE4M3, kE5M2})
    for (bool noRange : {false, true}) {
      std::string label = std::string(format == kE4M3 ? "e4m3" : "e5m2") +
                          (noRange ? "_first_step" : "_stored_range");
      cases.push_back({"qat_delayed_range", label, [=, caseSeed = seed += 2] {
                         KernelCall k;
                         k.input(historyState(16, caseSeed, 0, noRange), DType::F32);
                         k.input(observedRange(7.5, true), DType::F32);
                         k.output(DType::F32, {1, 2});
                         k.attrs = attrs({}, {{"format", format}});
                         double fmax = quant::fp8Max(static_cast<quant::Format>(format));
                         k.reference = [fmax](const std::vector<RefTensor> &in) {
                           return std::vector<RefTensor>{ref::delayedRange(in[0], in[1], fmax)};
                         };
                         k.tolerances = k.cudaTolerances = {0.0};
                         return k;
                       }});
    }
  return cases;
}

/// Every history length from 1 to TE's default, both algorithms, margins
/// 0 to 3, fresh and full histories, the new amax the largest or not, a
/// zero amax (the range stays), in place and not. Exact: the kernels store
/// amax · 2^margin, a float.
std::vector<ConformanceCase> amaxHistoryCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 1000;
  for (int64_t n : {1, 2, 16, 1024})
    for (bool mostRecent : {false, true})
      for (int64_t margin : {0, 3})
        for (double amax : {0.0, 0.4, 40.0})
          for (bool inPlace : {false, true}) {
            int64_t fresh = n > 2 ? n / 2 : 0;
            std::string label = "history" + std::to_string(n) +
                                (mostRecent ? "_most_recent" : "_max") + "_margin" +
                                std::to_string(margin) + "_amax" +
                                std::to_string(static_cast<int>(amax * 10)) +
                                (inPlace ? "_in_place" : "");
            cases.push_back({"qat_amax_history", label, [=, caseSeed = seed += 2] {
                               KernelCall k;
                               size_t state =
                                   k.input(historyState(n, caseSeed, fresh, false), DType::F32);
                               k.input(observedRange(amax, caseSeed % 4 == 0), DType::F32);
                               k.outputMaybeInPlace(inPlace, state, DType::F32, {n + 1});
                               k.attrs = attrs({}, {{"margin", margin},
                                                    {"most_recent", mostRecent ? 1 : 0}});
                               k.reference = [=](const std::vector<RefTensor> &in) {
                                 return std::vector<RefTensor>{
                                     ref::amaxHistory(in[0], in[1], margin, mostRecent)};
                               };
                               k.tolerances = k.cudaTolerances = {0.0};
                               return k;
                             }});
          }
  return cases;
}

std::vector<ConformanceCase> commitStateCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 1200;
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t n : {2, 17, 1025})
    for (double norm : {0.0, 1.5, inf, -inf, std::nan("")})
      for (bool inPlace : {false, true}) {
        std::string label = "numel" + std::to_string(n) + "_norm_" +
                            (std::isnan(norm)   ? std::string("nan")
                             : std::isinf(norm) ? std::string(norm > 0 ? "inf" : "minus_inf")
                                                : std::to_string(static_cast<int>(norm * 10))) +
                            (inPlace ? "_in_place" : "");
        cases.push_back({"qat_commit_state", label, [=, caseSeed = seed += 3] {
                           KernelCall k;
                           size_t state =
                               k.input(roundTo(randomTensor({n}, caseSeed), DType::F32), DType::F32);
                           k.input(roundTo(randomTensor({n}, caseSeed + 1), DType::F32),
                                   DType::F32);
                           k.input(RefTensor{{}, {norm}}, DType::F32);
                           k.outputMaybeInPlace(inPlace, state, DType::F32, {n});
                           k.reference = [](const std::vector<RefTensor> &in) {
                             return std::vector<RefTensor>{
                                 ref::commitState(in[0], in[1], in[2].data[0])};
                           };
                           k.tolerances = k.cudaTolerances = {0.0};
                           return k;
                         }});
      }
  return cases;
}

/// G histories [G, N + 1] (one per expert): each row its own stored range
/// (some never set) and its own observed amax (one of them 0), in place
/// and not.
RefTensor historyStates(int64_t groups, int64_t n, uint64_t seed) {
  RefTensor s{{groups, n + 1}, {}};
  for (int64_t g = 0; g < groups; ++g) {
    RefTensor one = historyState(n, seed + 7 * g, g % 3 == 1 ? n / 2 : 0, g % 4 == 2);
    s.data.insert(s.data.end(), one.data.begin(), one.data.end());
  }
  return s;
}

RefTensor observedRanges(int64_t groups) {
  RefTensor r{{groups, 2}, {}};
  for (int64_t g = 0; g < groups; ++g) {
    double a = g % 5 == 3 ? 0.0 : 0.3 + 4.0 * g;
    RefTensor one = observedRange(a, g % 2 == 0);
    r.data.insert(r.data.end(), one.data.begin(), one.data.end());
  }
  return r;
}

std::vector<ConformanceCase> groupedHistoryCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 1400;
  for (int64_t groups : {1, 3, 8, 300})
    for (int64_t n : {1, 16}) {
      std::string shape = "groups" + std::to_string(groups) + "_history" + std::to_string(n);
      cases.push_back({"qat_delayed_range", shape, [=, caseSeed = seed += 2] {
                         KernelCall k;
                         k.input(historyStates(groups, n, caseSeed), DType::F32);
                         k.input(observedRanges(groups), DType::F32);
                         k.output(DType::F32, {groups, 2});
                         k.attrs = attrs({}, {{"format", kE4M3}});
                         double fmax = quant::fp8Max(quant::Format::Fp8E4M3);
                         k.reference = [fmax](const std::vector<RefTensor> &in) {
                           return std::vector<RefTensor>{ref::delayedRange(in[0], in[1], fmax)};
                         };
                         k.tolerances = k.cudaTolerances = {0.0};
                         return k;
                       }});
      for (bool inPlace : {false, true})
        cases.push_back(
            {"qat_amax_history", shape + (inPlace ? "_in_place" : ""), [=, caseSeed = seed += 2] {
               KernelCall k;
               size_t state = k.input(historyStates(groups, n, caseSeed), DType::F32);
               k.input(observedRanges(groups), DType::F32);
               k.outputMaybeInPlace(inPlace, state, DType::F32, {groups, n + 1});
               k.attrs = attrs({}, {{"margin", 1}});
               k.reference = [](const std::vector<RefTensor> &in) {
                 return std::vector<RefTensor>{ref::amaxHistory(in[0], in[1], 1, false)};
               };
               k.tolerances = k.cudaTolerances = {0.0};
               return k;
             }});
    }
  return cases;
}

LLMC_CONFORMANCE_CASES(QatDelayedRange, delayedRangeCases);
LLMC_CONFORMANCE_CASES(QatDelayedHistories, groupedHistoryCases);
LLMC_CONFORMANCE_CASES(QatAmaxHistory, amaxHistoryCases);
LLMC_CONFORMANCE_CASES(QatCommitState, commitStateCases);

/// One step of the kernels: the range step t quantizes with, then the
/// state after recording `amax` (in place, as the runtime runs it).
double step(Buffer &state, double amax, int64_t margin, bool mostRecent, int64_t format = kE4M3) {
  Buffer observed = Buffer::of(observedRange(amax, true), DType::F32);
  Buffer range(DType::F32, {1, 2});
  EXPECT_TRUE(runKernel("qat_delayed_range", {&state, &observed}, {&range},
                        attrs({}, {{"format", format}})));
  EXPECT_TRUE(runKernel("qat_amax_history", {&state, &observed}, {&state},
                        attrs({}, {{"margin", margin}, {"most_recent", mostRecent ? 1 : 0}})));
  return range.toRef().data[1];
}

/// TE's DelayedScaling worked by hand: scale_t = (fmax / amax_t) / 2^margin
/// with amax_t the max of the amaxes of steps t−N .. t−1 (or step t−1's
/// alone), scale 1 before any, kept where amax is 0. The range is fmax / scale.
TEST(DelayedScaling, FollowsTransformerEnginesFormula) {
  const double fmax = 448.0;
  const std::vector<double> amaxes = {3.0, 5.0, 1.0, 0.0, 0.5, 0.25, 2.0};
  for (int64_t n : {1, 2, 3})
    for (int64_t margin : {0, 2})
      for (bool mostRecent : {false, true}) {
        SCOPED_TRACE("history " + std::to_string(n) + " margin " + std::to_string(margin) +
                     (mostRecent ? " most_recent" : " max"));
        Buffer state = Buffer::of(RefTensor::zeros({n + 1}), DType::F32);
        double scale = 1.0; // TE's initial scale
        std::vector<double> seen;
        for (double a : amaxes) {
          double range = step(state, a, margin, mostRecent);
          EXPECT_EQ(range, fmax / scale);
          seen.insert(seen.begin(), a);
          if (static_cast<int64_t>(seen.size()) > n) seen.pop_back();
          double amax = mostRecent ? seen.front() : *std::max_element(seen.begin(), seen.end());
          if (amax > 0) scale = (fmax / amax) / std::pow(2.0, static_cast<double>(margin));
        }
      }
}

TEST(DelayedScaling, NonFiniteAmaxMakesTheRangeNonFinite) {
  const double inf = std::numeric_limits<double>::infinity();
  Buffer state = Buffer::of(RefTensor{{3}, {8.0, 8.0, 2.0}}, DType::F32);
  for (double bad : {inf, std::nan("")}) {
    Buffer observed = Buffer::of(RefTensor{{1, 2}, {1.0, bad}}, DType::F32);
    Buffer range(DType::F32, {1, 2});
    ASSERT_TRUE(runKernel("qat_delayed_range", {&state, &observed}, {&range},
                          attrs({}, {{"format", kE5M2}})));
    RefTensor r = range.toRef();
    EXPECT_TRUE(std::isnan(bad) ? std::isnan(r.data[0]) : r.data[0] == inf);
    // Recorded, it leaves the stored range as it was (TE keeps its scale).
    Buffer updated(DType::F32, {3});
    ASSERT_TRUE(runKernel("qat_amax_history", {&state, &observed}, {&updated}, attrs()));
    EXPECT_EQ(updated.toRef().data[0], 8.0);
  }
  // −inf in the min half is an inf amax too.
  Buffer observed = Buffer::of(RefTensor{{1, 2}, {inf, 1.0}}, DType::F32);
  Buffer range(DType::F32, {1, 2});
  ASSERT_TRUE(runKernel("qat_delayed_range", {&state, &observed}, {&range},
                        attrs({}, {{"format", kE4M3}})));
  EXPECT_EQ(range.toRef().data[1], inf);
}

TEST(DelayedScaling, CommitKeepsTheOldStateOnANonFiniteNorm) {
  RefTensor old{{3}, {1.0, 2.0, 3.0}}, candidate{{3}, {4.0, 5.0, 6.0}};
  for (double norm : {0.5, std::numeric_limits<double>::infinity(), std::nan("")}) {
    Buffer state = Buffer::of(old, DType::F32), cand = Buffer::of(candidate, DType::F32),
           n = Buffer::of(RefTensor{{}, {norm}}, DType::F32);
    ASSERT_TRUE(runKernel("qat_commit_state", {&state, &cand, &n}, {&state}));
    EXPECT_EQ(state.toRef().data, (std::isfinite(norm) ? candidate : old).data);
  }
}

TensorView f32(std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); }

TEST(DelayedScaling, BindingErrors) {
  auto ints = [](std::initializer_list<std::pair<const char *, int64_t>> list) {
    return attrs({}, list);
  };
  struct ErrorCase {
    const char *kernel;
    std::vector<TensorView> inputs, outputs;
    KernelAttrs attrs;
    std::string expected;
  };
  const std::vector<ErrorCase> cases = {
      {"qat_delayed_range",
       {f32({17}), f32({1, 2})},
       {f32({1, 2})},
       ints({{"format", 0}}),
       "qat_delayed_range: attribute 'format' must be an fp8 format (2 fp8_e4m3, 3 fp8_e5m2), "
       "got 0"},
      {"qat_delayed_range",
       {f32({17}), f32({1, 2})},
       {f32({1, 2})},
       {},
       "qat_delayed_range: attribute 'format' must be an fp8 format (2 fp8_e4m3, 3 fp8_e5m2), "
       "got -1"},
      {"qat_delayed_range",
       {f32({1}), f32({1, 2})},
       {f32({1, 2})},
       ints({{"format", 2}}),
       "qat_delayed_range: state must be f32[N+1] or f32[G, N+1] with N >= 1 (per history: the "
       "range, then N amaxes), got f32[1]"},
      {"qat_delayed_range",
       {f32({2, 3, 17}), f32({1, 2})},
       {f32({1, 2})},
       ints({{"format", 2}}),
       "qat_delayed_range: state must be f32[N+1] or f32[G, N+1] with N >= 1 (per history: the "
       "range, then N amaxes), got f32[2x3x17]"},
      {"qat_delayed_range",
       {f32({4, 17}), f32({4, 2})},
       {f32({1, 2})},
       ints({{"format", 2}}),
       "qat_delayed_range: range must be f32[4x2], got f32[1x2]"},
      {"qat_amax_history",
       {f32({17}), f32({2, 2})},
       {f32({17})},
       {},
       "qat_amax_history: observed must be f32[1x2], got f32[2x2]"},
      {"qat_amax_history",
       {f32({3, 17}), f32({1, 2})},
       {f32({3, 17})},
       {},
       "qat_amax_history: observed must be f32[3x2], got f32[1x2]"},
      {"qat_amax_history",
       {f32({3, 17}), f32({3, 2})},
       {f32({17})},
       {},
       "qat_amax_history: new_state must be f32[3x17], got f32[17]"},
      {"qat_amax_history",
       {f32({17}), f32({1, 2})},
       {f32({17})},
       ints({{"margin", -1}}),
       "qat_amax_history: attribute 'margin' must be >= 0, got -1"},
      {"qat_amax_history",
       {f32({17}), f32({1, 2})},
       {f32({16})},
       {},
       "qat_amax_history: new_state must be f32[17], got f32[16]"},
      {"qat_commit_state",
       {f32({17}), f32({16}), f32({})},
       {f32({17})},
       {},
       "qat_commit_state: candidate must be f32[17], got f32[16]"},
      {"qat_commit_state",
       {f32({17}), f32({17}), f32({2})},
       {f32({17})},
       {},
       "qat_commit_state: norm must be an f32 scalar, got f32[2]"},
  };
  for (const ErrorCase &c : cases)
    EXPECT_EQ(bindError(c.kernel, c.inputs, c.outputs, c.attrs), c.expected);
}

} // namespace
} // namespace llmc::test
