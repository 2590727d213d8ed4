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
// (a row = the last dimension) is computed on the host at bind time, as on
// the CPU, and uploaded; a thread adds its column to its row's start.
//
//===----------------------------------------------------------------------===//

#include "kernels/DropoutHash.h"
#include "kernels/cuda/BindScratch.h"
#include "kernels/cuda/Common.cuh"

#include <algorithm>
#include <vector>

namespace llmc::cuda {
namespace {

/// The global index of the first element of each local row (the CPU's).
std::vector<uint64_t> rowStarts(const std::vector<int64_t> &local,
                                const std::vector<int64_t> &global,
                                const std::vector<int64_t> &offsets) {
  size_t rank = local.size();
  int64_t width = rank ? local.back() : 1, rows = product(local) / std::max<int64_t>(width, 1);
  std::vector<uint64_t> starts(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, flat = 0, stride = 1;
    for (size_t d = rank; d-- > 0;) {
      int64_t coord = (d + 1 == rank ? 0 : rest % local[d]) + offsets[d];
      if (d + 1 != rank) rest /= local[d];
      flat += coord * stride;
      stride *= global[d];
    }
    starts[static_cast<size_t>(r)] = static_cast<uint64_t>(flat);
  }
  return starts;
}

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
  Validator v("dropout", args, error);
  double rate;
  int64_t seed;
  if (!v.arity(1, 1) || !v.floatAttr("rate", &rate)) return nullptr;
  if (!args.attrs.hasInt("seed")) return v.reject("missing int attribute 'seed'");
  if (!v.intAttr("seed", &seed, 0)) return nullptr;
  if (!(rate >= 0.0 && rate < 1.0))
    return v.reject("attribute 'rate' must be in [0, 1), got " + std::to_string(rate));
  if (!v.isFloat(v.in(0), "x") || !v.hasType(v.out(0), "out", v.in(0).dtype, v.in(0).shape))
    return nullptr;
  std::vector<uint64_t> starts;
  if (args.attrs.hasInts("global_shape") || args.attrs.hasInts("offsets")) {
    std::vector<int64_t> global, offsets;
    if (!v.intsAttr("global_shape", &global) || !v.intsAttr("offsets", &offsets)) return nullptr;
    const std::vector<int64_t> &local = v.in(0).shape;
    if (global.size() != local.size() || offsets.size() != local.size())
      return v.reject("global_shape and offsets need one entry per dimension of x " +
                      v.in(0).describe());
    for (size_t d = 0; d < local.size(); ++d)
      if (offsets[d] < 0 || offsets[d] + local[d] > global[d])
        return v.reject("dimension " + std::to_string(d) + ": a piece of " +
                        std::to_string(local[d]) + " at offset " + std::to_string(offsets[d]) +
                        " does not fit in " + std::to_string(global[d]));
    starts = rowStarts(local, global, offsets);
  }
  return makeFloatKernel<DropoutKernel>(v.in(0).dtype, args, rate, seed, std::move(starts));
}

} // namespace

LLMC_REGISTER_KERNEL(CUDA, "dropout", makeCudaDropout);

} // namespace llmc::cuda
