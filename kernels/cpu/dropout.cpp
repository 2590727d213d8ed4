//===- dropout.cpp - seeded inverted dropout ------------------------------===//
//
// out = keep ? x / (1 − rate) : 0, where keep is a pure function of (seed,
// training step, flat element index) from kernels/DropoutHash.h. No mask is
// stored: the backward is this same kernel applied to the upstream
// gradient, and the CUDA kernel draws the identical mask. The threshold is
// an integer computed once, so the hot loop is integer hashing only.
//
// With `global_shape` and `offsets` (x is one rank's piece of a larger
// tensor), the index is the element's index in the global tensor. Pieces
// are boxes, so each row of the last dimension is a contiguous run of
// global indices: the kernel computes a row's first global index and counts
// up from it.
//
//===----------------------------------------------------------------------===//

#include "kernels/DropoutHash.h"
#include "kernels/contracts/Dropout.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

template <typename T> class DropoutKernel final : public Kernel {
public:
  DropoutKernel(const KernelArgs &args, double rate, int64_t seed, std::vector<uint64_t> starts)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()), n_(args.inputs[0].numel()),
        width_(args.inputs[0].rank() ? args.inputs[0].dim(-1) : 1),
        seed_(static_cast<uint64_t>(seed)), threshold_(dropoutThreshold(rate)),
        keepScale_(static_cast<float>(1.0 / (1.0 - rate))), starts_(std::move(starts)) {}

  void run(const StepContext &ctx) override {
    const T *x = x_;
    T *out = out_;
    uint64_t seed = seed_, step = static_cast<uint64_t>(ctx.step), threshold = threshold_;
    float keepScale = keepScale_;
    if (starts_.empty()) {
#pragma omp parallel for simd schedule(static) if (n_ > kParallelGrain)
      for (int64_t i = 0; i < n_; ++i) {
        bool keep = dropoutHash(seed, step, static_cast<uint64_t>(i)) >= threshold;
        store(out, i, keep ? load(x, i) * keepScale : 0.0f);
      }
      return;
    }
    const int64_t rows = static_cast<int64_t>(starts_.size()), width = width_;
#pragma omp parallel for schedule(static) if (n_ > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const uint64_t start = starts_[static_cast<size_t>(r)];
      const T *xr = x + r * width;
      T *outr = out + r * width;
#pragma omp simd
      for (int64_t i = 0; i < width; ++i) {
        bool keep = dropoutHash(seed, step, start + static_cast<uint64_t>(i)) >= threshold;
        store(outr, i, keep ? load(xr, i) * keepScale : 0.0f);
      }
    }
  }

private:
  const T *x_;
  T *out_;
  int64_t n_, width_;
  uint64_t seed_, threshold_;
  float keepScale_;
  std::vector<uint64_t> starts_; ///< empty: the local index is the index
};

std::unique_ptr<Kernel> makeDropout(const KernelArgs &args, std::string &error) {
  contracts::DropoutBinding b;
  if (!contracts::bindDropout(args, error, &b)) return nullptr;
  return makeFloatKernel<DropoutKernel>(b.dtype, args, b.rate, b.seed, std::move(b.rowStarts));
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "dropout", makeDropout);

} // namespace llmc::cpu
