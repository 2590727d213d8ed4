//===- DelayedScaling.h - fp8 delayed scaling's amax history ----*- C++ -*-===//
//
// What `qat.delayed_range`, `qat.amax_history` and `qat.commit_state`
// compute, shared by the CPU kernels, the CUDA kernels (host and device)
// and the double reference. Standard library only.
//
// Transformer Engine's DelayedScaling recipe, written functionally. The
// state of one tensor is float[N + 1]:
//   state[0]     the range r the tensor is quantized with (0: none yet);
//                its scale, fmax / r, is TE's `scale`
//   state[1..N]  the amaxes of the last N steps, the most recent first
//                (0 where fewer steps have been recorded)
// A step quantizes with r (fmax while r is 0: a scale of 1, TE's initial
// value) and records its own amax a:
//   history' = [a, state[1], ..., state[N-1]]
//   amax     = max(history') (algo max) or a (algo most_recent)
//   r'       = amax · 2^margin  if that is finite and > 0, else r
// so fmax / r' = (fmax / amax) / 2^margin, TE's
//   scale = (fp8_max / amax) / (2 ** margin)
// which keeps the previous scale where amax is 0 or not finite. Hence the
// scale of step t comes from the amaxes of steps t−N .. t−1.
//
// A non-finite amax of the current step is not left to saturation, which
// would clamp an inf into range: the quantization range becomes that amax,
// so the quantized tensor is NaN and the step non-finite (skipped). The
// updated state is committed only by an applied step (`commit_state`: the
// candidate where the step's gradient norm is finite, else the old state).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_DELAYEDSCALING_H
#define LLMC_COMMON_DELAYEDSCALING_H

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define LLMC_DELAYED_HD __host__ __device__
#else
#define LLMC_DELAYED_HD
#endif

namespace llmc::quant {

/// Whether `v` is neither inf nor NaN (written out: device code too).
LLMC_DELAYED_HD inline bool finiteValue(float v) {
  return v <= 3.40282347e38f && v >= -3.40282347e38f;
}

/// The amax of a [−min, max] range; a NaN in either half is returned.
LLMC_DELAYED_HD inline float rangeAmax(float negMin, float max) {
  if (negMin != negMin)
    return negMin;
  if (max != max)
    return max;
  return negMin > max ? negMin : max;
}

/// The range a tensor whose current amax is `amax` is quantized with, from
/// the stored range `stored` (state[0]) of a format whose largest finite
/// value is `fmax`.
LLMC_DELAYED_HD inline float delayedRange(float stored, float amax, float fmax) {
  if (!finiteValue(amax))
    return amax;
  return stored > 0.0f ? stored : fmax;
}

/// The updated state (history length `n`, float[n + 1]) after recording
/// `amax`; `out` may be `state` (in place).
LLMC_DELAYED_HD inline void updateAmaxHistory(const float *state, float amax, int64_t n,
                                              int64_t margin, bool mostRecent, float *out) {
  float previous = state[0];
  for (int64_t i = n; i >= 2; --i)
    out[i] = state[i - 1];
  out[1] = amax;
  float chosen = amax;
  if (!mostRecent && chosen == chosen)
    for (int64_t i = 2; i <= n; ++i) {
      float h = out[i];
      if (h != h || h > chosen)
        chosen = h;
      if (chosen != chosen)
        break;
    }
  // Beyond 2^300 every float overflows: a margin that large keeps r.
  float widened = ldexpf(chosen, static_cast<int>(margin < 300 ? margin : 300));
  out[0] = finiteValue(widened) && widened > 0.0f ? widened : previous;
}

/// An element of a committed state: the candidate where the step's norm is
/// finite (the step is applied), else the old value.
LLMC_DELAYED_HD inline float commitState(float state, float candidate, float norm) {
  return finiteValue(norm) ? candidate : state;
}

} // namespace llmc::quant

#undef LLMC_DELAYED_HD

#endif
