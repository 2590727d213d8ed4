//===- delayed_scaling.cpp - fp8 delayed scaling's amax history -----------===//
//
// qat_delayed_range, qat_amax_history and qat_commit_state: a handful of
// floats per tensor per step, so each is one plain loop over
// common/DelayedScaling.h, the math the CUDA kernels and the reference
// share.
//
//===----------------------------------------------------------------------===//

#include "common/DelayedScaling.h"
#include "kernels/contracts/DelayedScaling.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

/// Each history's range (a handful of histories: one per expert at most).
class DelayedRangeKernel final : public Kernel {
public:
  DelayedRangeKernel(const KernelArgs &args, const contracts::QatAmaxHistoryBinding &b)
      : state_(args.inputs[0].as<float>()), observed_(args.inputs[1].as<float>()),
        range_(args.outputs[0].as<float>()), b_(b) {}

  void run(const StepContext &) override {
    for (int64_t g = 0; g < b_.groups; ++g) {
      const float *observed = observed_ + 2 * g;
      float r = quant::delayedRange(state_[g * (b_.history + 1)],
                                    quant::rangeAmax(observed[0], observed[1]), b_.fmax);
      range_[2 * g] = range_[2 * g + 1] = r;
    }
  }

private:
  const float *state_, *observed_;
  float *range_;
  contracts::QatAmaxHistoryBinding b_;
};

/// In place (new_state = state) is allowed: updateAmaxHistory shifts from
/// the oldest entry down and reads the stored range first.
class AmaxHistoryKernel final : public Kernel {
public:
  AmaxHistoryKernel(const KernelArgs &args, const contracts::QatAmaxHistoryBinding &b)
      : state_(args.inputs[0].as<float>()), observed_(args.inputs[1].as<float>()),
        out_(args.outputs[0].as<float>()), b_(b) {}

  void run(const StepContext &) override {
    const int64_t width = b_.history + 1;
    for (int64_t g = 0; g < b_.groups; ++g) {
      const float *observed = observed_ + 2 * g;
      quant::updateAmaxHistory(state_ + g * width, quant::rangeAmax(observed[0], observed[1]),
                               b_.history, b_.margin, b_.mostRecent, out_ + g * width);
    }
  }

private:
  const float *state_, *observed_;
  float *out_;
  contracts::QatAmaxHistoryBinding b_;
};

/// In place (new_state = state) is allowed: elementwise.
class CommitStateKernel final : public Kernel {
public:
  CommitStateKernel(const KernelArgs &args, int64_t numel)
      : state_(args.inputs[0].as<float>()), candidate_(args.inputs[1].as<float>()),
        norm_(args.inputs[2].as<float>()), out_(args.outputs[0].as<float>()), numel_(numel) {}

  void run(const StepContext &) override {
    float norm = norm_[0];
    for (int64_t i = 0; i < numel_; ++i)
      out_[i] = quant::commitState(state_[i], candidate_[i], norm);
  }

private:
  const float *state_, *candidate_, *norm_;
  float *out_;
  int64_t numel_;
};

std::unique_ptr<Kernel> makeDelayedRange(const KernelArgs &args, std::string &error) {
  contracts::QatAmaxHistoryBinding b;
  if (!contracts::bindQatDelayedRange(args, error, &b)) return nullptr;
  return std::make_unique<DelayedRangeKernel>(args, b);
}
std::unique_ptr<Kernel> makeAmaxHistory(const KernelArgs &args, std::string &error) {
  contracts::QatAmaxHistoryBinding b;
  if (!contracts::bindQatAmaxHistory(args, error, &b)) return nullptr;
  return std::make_unique<AmaxHistoryKernel>(args, b);
}
std::unique_ptr<Kernel> makeCommitState(const KernelArgs &args, std::string &error) {
  contracts::QatCommitStateBinding b;
  if (!contracts::bindQatCommitState(args, error, &b)) return nullptr;
  return std::make_unique<CommitStateKernel>(args, b.numel);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "qat_delayed_range", makeDelayedRange);
LLMC_REGISTER_KERNEL(CPU, "qat_amax_history", makeAmaxHistory);
LLMC_REGISTER_KERNEL(CPU, "qat_commit_state", makeCommitState);

} // namespace llmc::cpu
