//===- dropout.cu - seeded inverted dropout on the GPU --------------------===//
//
// out = keep ? x / (1 − rate) : 0 with keep from kernels/DropoutHash.h, the
// header the CPU kernel and the reference use, so the mask is bit for bit
// the CPU's. One grid-stride loop over the elements: the hash is pure
// integer arithmetic, so there is no state, no shared memory and no
// reduction. x may alias out (each thread reads its element first).
//
// The step is read from StepContext::deviceStep when the runtime sets it
// (CUDA graphs), else taken from StepContext::step.
//
// With `global_shape` / `offsets` the hashed index is the element's index
// in the global tensor: the global index of each local row's first element
// (a row = the last dimension) is computed on the host at bind time by the
// contract both backends share (kernels/contracts/Dropout.h) and uploaded; a
// thread adds its column to its row's start.
//
//===----------------------------------------------------------------------===//

#include "kernels/DropoutHash.h"
#include "kernels/contracts/Dropout.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"

#include <algorithm>
#include <vector>

namespace llmc::cuda {
namespace {

/// `starts` null: the local index is the hashed index. `deviceStep`, when
/// set, overrides `step` (a kernel replayed from a CUDA graph keeps its
/// captured arguments; the runtime rewrites the device word every step).
template <typename T>
__global__ void dropoutKernel(const T *x, T *out, int64_t n, int64_t width, const uint64_t *starts,
                              uint64_t seed, uint64_t step, const int64_t *deviceStep,
                              uint64_t threshold, float keepScale) {
  if (deviceStep) step = static_cast<uint64_t>(*deviceStep);
  LLMC_GRID_STRIDE(i, n) {
    uint64_t index = starts ? starts[i / width] + static_cast<uint64_t>(i % width)
                            : static_cast<uint64_t>(i);
    bool keep = dropoutHash(seed, step, index) >= threshold;
    store(out, i, keep ? load(x, i) * keepScale : 0.0f);
  }
}

template <typename T> class DropoutKernel final : public Kernel {
public:
  DropoutKernel(const KernelArgs &args, double rate, int64_t seed, std::vector<uint64_t> starts)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()), n_(args.inputs[0].numel()),
        width_(args.inputs[0].rank() ? args.inputs[0].dim(-1) : 1),
        seed_(static_cast<uint64_t>(seed)), threshold_(dropoutThreshold(rate)),
        keepScale_(static_cast<float>(1.0 / (1.0 - rate))), global_(!starts.empty()) {
    if (global_) {
      starts_ = BindScratch(starts.size() * sizeof(uint64_t));
      copyToDevice(starts_.as<void>(), starts.data(), starts.size() * sizeof(uint64_t));
    }
  }

  void run(const StepContext &ctx) override {
    if (n_ == 0) return; // also: width 0 never divides
    dropoutKernel<T><<<gridFor(n_), kBlock, 0, streamOf(ctx)>>>(
        x_, out_, n_, width_, global_ ? starts_.as<uint64_t>() : nullptr, seed_,
        static_cast<uint64_t>(ctx.step), ctx.deviceStep, threshold_, keepScale_);
    LLMC_CUDA_CHECK_LAUNCH();
  }

private:
  const T *x_;
  T *out_;
  int64_t n_, width_;
  uint64_t seed_, threshold_;
  float keepScale_;
  bool global_;
  BindScratch starts_;
};

std::unique_ptr<Kernel> makeCudaDropout(const KernelArgs &args, std::string &error) {
  contracts::DropoutBinding b;
  if (!contracts::bindDropout(args, error, &b)) return nullptr;
  return makeFloatKernel<DropoutKernel>(b.dtype, args, b.rate, b.seed, std::move(b.rowStarts));
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "dropout", makeCudaDropout);

} // namespace llmc::cuda
