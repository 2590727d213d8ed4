//===- delayed_scaling.cpp - fp8 delayed scaling references ---------------===//
//
// qat_delayed_range, qat_amax_history and qat_commit_state, written from
// the recipe as Transformer Engine states it (common/DelayedScaling.h), not
// from the kernels: the history as a list rolled by one, the amax as the
// largest entry (std::max_element) or the newest one, TE's scale
// (fmax / amax) / 2^margin computed in double and turned back into the
// range fmax / scale. Both are exact here: 2^margin and the amaxes are
// floats, so the range is the float amax · 2^margin the kernels store.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

#include <algorithm>
#include <cmath>

namespace llmc::ref {

namespace {

/// The number of histories: state [N + 1] with observed [1, 2], or
/// [G, N + 1] with [G, 2].
int64_t requireHistories(const RefTensor &state, const RefTensor &observed, const char *fn) {
  require((state.shape.size() == 1 || state.shape.size() == 2) && state.shape.back() >= 2, fn,
          "state must be [N + 1] or [G, N + 1], N >= 1");
  int64_t groups = state.shape.size() == 2 ? state.shape[0] : 1;
  require(observed.shape == std::vector<int64_t>{groups, 2}, fn, "observed must be [G, 2]");
  return groups;
}

/// The amax of the [−min, max] range at `at`; NaN when either half is.
double amaxOf(const RefTensor &observed, int64_t at) {
  double negMin = observed.data[at], max = observed.data[at + 1];
  if (std::isnan(negMin) || std::isnan(max))
    return NAN;
  return std::max(negMin, max);
}

/// One history's update: `state` [range, amaxes newest first] → the new one.
std::vector<double> updatedHistory(std::vector<double> state, double observed, int64_t margin,
                                   bool mostRecent) {
  std::vector<double> history(state.begin() + 1, state.end());
  std::rotate(history.rbegin(), history.rbegin() + 1, history.rend()); // newest first
  history.front() = observed;
  double amax = history.front();
  if (!mostRecent)
    amax = std::any_of(history.begin(), history.end(), [](double h) { return std::isnan(h); })
               ? NAN
               : *std::max_element(history.begin(), history.end());
  // scale = (fmax / amax) / 2^margin, kept where amax is not a finite
  // positive number (or the scale would be 0); the range is fmax / scale.
  double widened = amax * std::pow(2.0, static_cast<double>(margin));
  bool keep = !(std::isfinite(amax) && amax > 0) ||
              !std::isfinite(static_cast<float>(widened));
  std::copy(history.begin(), history.end(), state.begin() + 1);
  if (!keep)
    state[0] = widened;
  return state;
}

} // namespace

RefTensor delayedRange(const RefTensor &state, const RefTensor &observed, double fmax) {
  int64_t groups = requireHistories(state, observed, "delayedRange");
  const int64_t width = state.shape.back();
  RefTensor out{{groups, 2}, std::vector<double>(2 * groups)};
  for (int64_t g = 0; g < groups; ++g) {
    double amax = amaxOf(observed, 2 * g), stored = state.data[g * width];
    // TE starts from scale 1, i.e. the range fmax; a non-finite amax is
    // passed on so the step becomes non-finite.
    out.data[2 * g] = out.data[2 * g + 1] = !std::isfinite(amax) ? amax
                                            : stored > 0         ? stored
                                                                 : fmax;
  }
  return out;
}

RefTensor amaxHistory(const RefTensor &state, const RefTensor &observed, int64_t margin,
                      bool mostRecent) {
  int64_t groups = requireHistories(state, observed, "amaxHistory");
  const int64_t width = state.shape.back();
  RefTensor out = like(state);
  for (int64_t g = 0; g < groups; ++g) {
    auto first = state.data.begin() + g * width;
    std::vector<double> updated =
        updatedHistory({first, first + width}, amaxOf(observed, 2 * g), margin, mostRecent);
    std::copy(updated.begin(), updated.end(), out.data.begin() + g * width);
  }
  return out;
}

RefTensor commitState(const RefTensor &state, const RefTensor &candidate, double norm) {
  require(candidate.shape == state.shape, "commitState", "candidate must have state's shape");
  return std::isfinite(norm) ? candidate : state;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//

LLMC_REGISTER_EVALUATOR("qat.delayed_range", [](const RefCall &c) -> Results {
  return {delayedRange(c.in(0), c.in(1), quant::fp8Max(c.scheme().format))};
});
LLMC_REGISTER_EVALUATOR("qat.amax_history", [](const RefCall &c) -> Results {
  return {amaxHistory(c.in(0), c.in(1), c.integer("margin", 0), c.flag("most_recent"))};
});
LLMC_REGISTER_EVALUATOR("qat.commit_state", [](const RefCall &c) -> Results {
  return {commitState(c.in(0), c.in(1), c.scalar(2))};
});

} // namespace llmc::ref
