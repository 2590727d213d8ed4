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

void requireHistory(const RefTensor &state, const RefTensor &observed, const char *fn) {
  require(state.shape.size() == 1 && state.shape[0] >= 2, fn, "state must be [N + 1], N >= 1");
  require(observed.shape == std::vector<int64_t>{1, 2}, fn, "observed must be [1, 2]");
}

/// The amax of a [−min, max] range; NaN when either half is.
double amaxOf(const RefTensor &observed) {
  double negMin = observed.data[0], max = observed.data[1];
  if (std::isnan(negMin) || std::isnan(max))
    return NAN;
  return std::max(negMin, max);
}

} // namespace

RefTensor delayedRange(const RefTensor &state, const RefTensor &observed, double fmax) {
  requireHistory(state, observed, "delayedRange");
  double amax = amaxOf(observed);
  // TE starts from scale 1, i.e. the range fmax; a non-finite amax is passed
  // on so the step becomes non-finite.
  double range = !std::isfinite(amax) ? amax : state.data[0] > 0 ? state.data[0] : fmax;
  return RefTensor{{1, 2}, {range, range}};
}

RefTensor amaxHistory(const RefTensor &state, const RefTensor &observed, int64_t margin,
                      bool mostRecent) {
  requireHistory(state, observed, "amaxHistory");
  std::vector<double> history(state.data.begin() + 1, state.data.end());
  std::rotate(history.rbegin(), history.rbegin() + 1, history.rend()); // newest first
  history.front() = amaxOf(observed);
  double amax = history.front();
  if (!mostRecent)
    amax = std::any_of(history.begin(), history.end(), [](double h) { return std::isnan(h); })
               ? NAN
               : *std::max_element(history.begin(), history.end());
  RefTensor out = like(state);
  std::copy(history.begin(), history.end(), out.data.begin() + 1);
  // scale = (fmax / amax) / 2^margin, kept where amax is not a finite
  // positive number (or the scale would be 0); the range is fmax / scale.
  double widened = amax * std::pow(2.0, static_cast<double>(margin));
  bool keep = !(std::isfinite(amax) && amax > 0) ||
              !std::isfinite(static_cast<float>(widened));
  out.data[0] = keep ? state.data[0] : widened;
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
