//===- DelayedScaling.h - binding contract of the amax-history kernels -*- C++ -*-===//
//
// The checks of qat_delayed_range, qat_amax_history and qat_commit_state
// (fp8 delayed scaling, common/DelayedScaling.h), shared by the CPU
// factories (kernels/cpu/delayed_scaling.cpp) and the CUDA ones
// (kernels/cuda/delayed_scaling.cu), so both backends accept the same
// inputs with the same messages.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_DELAYEDSCALING_H
#define LLMC_KERNELS_CONTRACTS_DELAYEDSCALING_H

#include "common/QuantScheme.h"
#include "kernels/Kernel.h"
#include "kernels/Validator.h"

#include <string>

namespace llmc::contracts {

/// qat_delayed_range(state, observed) -> range and
/// qat_amax_history(state, observed) -> new_state: one history f32[N + 1]
/// with observed and range f32[1, 2], or G histories f32[G, N + 1] with
/// f32[G, 2] (one per expert or group of rows), row by row.
struct QatAmaxHistoryBinding {
  int64_t groups = 1;  ///< G histories
  int64_t history = 0; ///< N: each history is f32[N + 1]
  float fmax = 0.0f;   ///< delayed_range: the fp8 format's largest finite value
  int64_t margin = 0;  ///< amax_history
  bool mostRecent = false;
};
inline bool bindQatDelayedRange(const KernelArgs &args, std::string &error,
                                QatAmaxHistoryBinding *out);
inline bool bindQatAmaxHistory(const KernelArgs &args, std::string &error,
                               QatAmaxHistoryBinding *out);

/// qat_commit_state(state, candidate, norm) -> new_state.
struct QatCommitStateBinding {
  int64_t numel = 0;
};
inline bool bindQatCommitState(const KernelArgs &args, std::string &error,
                               QatCommitStateBinding *out);

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace delayed_scaling_impl {

/// state: f32[N + 1] or f32[G, N + 1], N >= 1; observed: f32[G, 2] (G = 1
/// for the first).
inline bool checkHistoryInputs(Validator &v, QatAmaxHistoryBinding *out) {
  const TensorView &state = v.in(0);
  bool shaped = state.rank() == 1 || (state.rank() == 2 && state.dim(0) >= 1);
  if (state.dtype != DType::F32 || !shaped || state.dim(state.rank() - 1) < 2)
    return v.fail("state must be f32[N+1] or f32[G, N+1] with N >= 1 (per history: the range, "
                  "then N amaxes), got " +
                  state.describe());
  out->groups = state.rank() == 2 ? state.dim(0) : 1;
  out->history = state.dim(state.rank() - 1) - 1;
  return v.hasType(v.in(1), "observed", DType::F32, {out->groups, 2});
}

} // namespace delayed_scaling_impl

inline bool bindQatDelayedRange(const KernelArgs &args, std::string &error,
                                QatAmaxHistoryBinding *out) {
  Validator v("qat_delayed_range", args, error);
  int64_t format = -1;
  if (!v.arity(2, 1) || !delayed_scaling_impl::checkHistoryInputs(v, out) ||
      !v.intAttr("format", &format, -1))
    return false;
  if (format != static_cast<int64_t>(quant::Format::Fp8E4M3) &&
      format != static_cast<int64_t>(quant::Format::Fp8E5M2))
    return v.fail("attribute 'format' must be an fp8 format (2 fp8_e4m3, 3 fp8_e5m2), got " +
                  std::to_string(format));
  if (!v.hasType(v.out(0), "range", DType::F32, {out->groups, 2}))
    return false;
  out->fmax = static_cast<float>(quant::fp8Max(static_cast<quant::Format>(format)));
  return true;
}

inline bool bindQatAmaxHistory(const KernelArgs &args, std::string &error,
                               QatAmaxHistoryBinding *out) {
  Validator v("qat_amax_history", args, error);
  if (!v.arity(2, 1) || !delayed_scaling_impl::checkHistoryInputs(v, out) ||
      !v.intAttr("margin", &out->margin, 0) || !v.flagAttr("most_recent", &out->mostRecent))
    return false;
  if (out->margin < 0)
    return v.fail("attribute 'margin' must be >= 0, got " + std::to_string(out->margin));
  return v.hasType(v.out(0), "new_state", DType::F32, v.in(0).shape);
}

inline bool bindQatCommitState(const KernelArgs &args, std::string &error,
                               QatCommitStateBinding *out) {
  Validator v("qat_commit_state", args, error);
  if (!v.arity(3, 1))
    return false;
  const TensorView &state = v.in(0);
  if (!v.hasDType(state, "state", DType::F32) ||
      !v.hasType(v.in(1), "candidate", DType::F32, state.shape) ||
      !v.isF32Scalar(v.in(2), "norm") ||
      !v.hasType(v.out(0), "new_state", DType::F32, state.shape))
    return false;
  out->numel = state.numel();
  return true;
}

} // namespace llmc::contracts

#endif
