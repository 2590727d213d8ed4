//===- delayed_scaling.cu - fp8 delayed scaling's amax history on the GPU -===//
//
// qat_delayed_range, qat_amax_history and qat_commit_state with the
// semantics of kernels/cpu/delayed_scaling.cpp: the same
// common/DelayedScaling.h functions, run by one thread (a history is a
// handful of floats, read once a step; the max over it is exact, so the
// result is the CPU's bit for bit), and an elementwise commit.
//
//===----------------------------------------------------------------------===//

#include "common/DelayedScaling.h"
#include "kernels/contracts/DelayedScaling.h"
#include "kernels/cuda/Common.cuh"

namespace llmc::cuda {
namespace {

__global__ void delayedRangeKernel(const float *state, const float *observed, float *range,
                                   float fmax) {
  float r = quant::delayedRange(state[0], quant::rangeAmax(observed[0], observed[1]), fmax);
  range[0] = range[1] = r;
}

/// One thread: in place (out = state) is allowed, as on the CPU.
__global__ void amaxHistoryKernel(const float *state, const float *observed, float *out,
                                  int64_t history, int64_t margin, bool mostRecent) {
  quant::updateAmaxHistory(state, quant::rangeAmax(observed[0], observed[1]), history, margin,
                           mostRecent, out);
}

__global__ void commitStateKernel(const float *state, const float *candidate, const float *norm,
                                  float *out, int64_t n) {
  float v = *norm;
  LLMC_GRID_STRIDE(i, n) { out[i] = quant::commitState(state[i], candidate[i], v); }
}

class DelayedRangeKernel final : public Kernel {
public:
  DelayedRangeKernel(const KernelArgs &args, float fmax)
      : state_(args.inputs[0].as<float>()), observed_(args.inputs[1].as<float>()),
        range_(args.outputs[0].as<float>()), fmax_(fmax) {}

  void run(const StepContext &ctx) override {
    delayedRangeKernel<<<1, 1, 0, streamOf(ctx)>>>(state_, observed_, range_, fmax_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const float *state_, *observed_;
  float *range_;
  float fmax_;
};

class AmaxHistoryKernel final : public Kernel {
public:
  AmaxHistoryKernel(const KernelArgs &args, const contracts::QatAmaxHistoryBinding &b)
      : state_(args.inputs[0].as<float>()), observed_(args.inputs[1].as<float>()),
        out_(args.outputs[0].as<float>()), b_(b) {}

  void run(const StepContext &ctx) override {
    amaxHistoryKernel<<<1, 1, 0, streamOf(ctx)>>>(state_, observed_, out_, b_.history, b_.margin,
                                                  b_.mostRecent);
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
  return std::make_unique<DelayedRangeKernel>(args, b.fmax);
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
