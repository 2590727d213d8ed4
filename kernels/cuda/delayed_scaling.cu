//===- delayed_scaling.cu - fp8 delayed scaling's amax history on the GPU -===//
//
// qat_delayed_range, qat_amax_history and qat_commit_state with the
// semantics of kernels/cpu/delayed_scaling.cpp: the same
// common/DelayedScaling.h functions, one thread per history (a history is a
// handful of floats, read once a step; the max over it is exact, so the
// result is the CPU's bit for bit), and an elementwise commit.
//
//===----------------------------------------------------------------------===//

#include "common/DelayedScaling.h"
#include "kernels/contracts/DelayedScaling.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {
namespace {

/// One thread per history.
__global__ void delayedRangeKernel(const float *state, const float *observed, float *range,
                                   int64_t groups, int64_t history, float fmax) {
  LLMC_GRID_STRIDE(g, groups) {
    float r = quant::delayedRange(state[g * (history + 1)],
                                  quant::rangeAmax(observed[2 * g], observed[2 * g + 1]), fmax);
    range[2 * g] = range[2 * g + 1] = r;
  }
}

/// One thread per history: in place (out = state) is allowed, as on the CPU.
__global__ void amaxHistoryKernel(const float *state, const float *observed, float *out,
                                  int64_t groups, int64_t history, int64_t margin,
                                  bool mostRecent) {
  LLMC_GRID_STRIDE(g, groups) {
    quant::updateAmaxHistory(state + g * (history + 1),
                             quant::rangeAmax(observed[2 * g], observed[2 * g + 1]), history,
                             margin, mostRecent, out + g * (history + 1));
  }
}

__global__ void commitStateKernel(const float *state, const float *candidate, const float *norm,
                                  float *out, int64_t n) {
  float v = *norm;
  LLMC_GRID_STRIDE(i, n) { out[i] = quant::commitState(state[i], candidate[i], v); }
}

class DelayedRangeKernel final : public Kernel {
public:
  DelayedRangeKernel(const KernelArgs &args, const contracts::QatAmaxHistoryBinding &b)
      : state_(args.inputs[0].as<float>()), observed_(args.inputs[1].as<float>()),
        range_(args.outputs[0].as<float>()), b_(b) {}

  void run(const StepContext &ctx) override {
    delayedRangeKernel<<<gridFor(b_.groups), kBlock, 0, streamOf(ctx)>>>(
        state_, observed_, range_, b_.groups, b_.history, b_.fmax);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const float *state_, *observed_;
  float *range_;
  contracts::QatAmaxHistoryBinding b_;
};

class AmaxHistoryKernel final : public Kernel {
public:
  AmaxHistoryKernel(const KernelArgs &args, const contracts::QatAmaxHistoryBinding &b)
      : state_(args.inputs[0].as<float>()), observed_(args.inputs[1].as<float>()),
        out_(args.outputs[0].as<float>()), b_(b) {}

  void run(const StepContext &ctx) override {
    amaxHistoryKernel<<<gridFor(b_.groups), kBlock, 0, streamOf(ctx)>>>(
        state_, observed_, out_, b_.groups, b_.history, b_.margin, b_.mostRecent);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const float *state_, *observed_;
  float *out_;
  contracts::QatAmaxHistoryBinding b_;
};

class CommitStateKernel final : public Kernel {
public:
  CommitStateKernel(const KernelArgs &args, int64_t numel)
      : state_(args.inputs[0].as<float>()), candidate_(args.inputs[1].as<float>()),
        norm_(args.inputs[2].as<float>()), out_(args.outputs[0].as<float>()), numel_(numel) {}

  void run(const StepContext &ctx) override {
    commitStateKernel<<<gridFor(numel_), kBlock, 0, streamOf(ctx)>>>(state_, candidate_, norm_,
                                                                     out_, numel_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const float *state_, *candidate_, *norm_;
  float *out_;
  int64_t numel_;
};

std::unique_ptr<Kernel> makeCudaDelayedRange(const KernelArgs &args, std::string &error) {
  contracts::QatAmaxHistoryBinding b;
  if (!contracts::bindQatDelayedRange(args, error, &b)) return nullptr;
  return std::make_unique<DelayedRangeKernel>(args, b);
}
std::unique_ptr<Kernel> makeCudaAmaxHistory(const KernelArgs &args, std::string &error) {
  contracts::QatAmaxHistoryBinding b;
  if (!contracts::bindQatAmaxHistory(args, error, &b)) return nullptr;
  return std::make_unique<AmaxHistoryKernel>(args, b);
}
std::unique_ptr<Kernel> makeCudaCommitState(const KernelArgs &args, std::string &error) {
  contracts::QatCommitStateBinding b;
  if (!contracts::bindQatCommitState(args, error, &b)) return nullptr;
  return std::make_unique<CommitStateKernel>(args, b.numel);
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "qat_delayed_range", makeCudaDelayedRange);
LLMC_REGISTER_KERNEL(CUDA, "qat_amax_history", makeCudaAmaxHistory);
LLMC_REGISTER_KERNEL(CUDA, "qat_commit_state", makeCudaCommitState);

} // namespace llmc::cuda
