//===- global_norm.cpp - L2 norm over every element of many tensors -------===//
//
// √(Σ x²) over all inputs (gradient clipping), or Σ x² with `squared` (so
// shards on different ranks can be combined before the root). Every input is cut into
// fixed chunks at bind time; chunks are squared-and-summed in parallel in
// double into their own scratch slot, then the slots are added in order, so
// the norm is identical whatever the thread count. Inputs may mix f32, bf16
// and f16; the result is an f32 scalar (inf when an fp16 gradient
// overflowed, which is how loss scaling detects it).
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/GlobalNorm.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

class GlobalNormKernel final : public Kernel {
public:
  static constexpr int64_t kChunk = 1 << 16;

  explicit GlobalNormKernel(const KernelArgs &args)
      : out_(args.outputs[0].as<float>()), squared_(args.attrs.getInt("squared") != 0) {
    for (const TensorView &x : args.inputs)
      for (int64_t begin = 0; begin < x.numel(); begin += kChunk)
        chunks_.push_back(
            {x.data, x.dtype, begin, std::min(kChunk, x.numel() - begin)});
    partial_.resize(chunks_.size());
  }

  void run(const StepContext &) override {
    int64_t count = static_cast<int64_t>(chunks_.size());
#pragma omp parallel for schedule(dynamic, 4) if (count > 1)
    for (int64_t c = 0; c < count; ++c) {
      const Chunk &chunk = chunks_[c];
      if (chunk.dtype == DType::BF16)
        partial_[c] = sumOfSquares(static_cast<const bf16 *>(chunk.data) + chunk.begin, chunk.size);
      else if (chunk.dtype == DType::F16)
        partial_[c] = sumOfSquares(static_cast<const f16 *>(chunk.data) + chunk.begin, chunk.size);
      else
        partial_[c] =
            sumOfSquares(static_cast<const float *>(chunk.data) + chunk.begin, chunk.size);
    }
    double total = 0.0;
    for (double p : partial_) total += p;
    *out_ = static_cast<float>(squared_ ? total : std::sqrt(total));
  }

private:
  template <typename T> static double sumOfSquares(const T *x, int64_t n) {
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) {
      double v = load(x, i);
      sum += v * v;
    }
    return sum;
  }

  struct Chunk {
    const void *data;
    DType dtype;
    int64_t begin, size;
  };
  float *out_;
  bool squared_;
  std::vector<Chunk> chunks_;
  std::vector<double> partial_;
};

std::unique_ptr<Kernel> makeGlobalNorm(const KernelArgs &args, std::string &error) {
  contracts::GlobalNormBinding b;
  if (!contracts::bindGlobalNorm(args, error, &b)) return nullptr;
  return std::make_unique<GlobalNormKernel>(args);
}

/// Elementwise square root of an f32 tensor (in place allowed).
class SqrtKernel final : public Kernel {
public:
  SqrtKernel(const TensorView &x, const TensorView &y)
      : x_(x.as<float>()), y_(y.as<float>()), n_(x.numel()) {}
  void run(const StepContext &) override {
    for (int64_t i = 0; i < n_; ++i) y_[i] = std::sqrt(x_[i]);
  }

private:
  const float *x_;
  float *y_;
  int64_t n_;
};

std::unique_ptr<Kernel> makeSqrt(const KernelArgs &args, std::string &error) {
  contracts::SqrtBinding b;
  if (!contracts::bindSqrt(args, error, &b)) return nullptr;
  return std::make_unique<SqrtKernel>(args.inputs[0], args.outputs[0]);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "global_norm", makeGlobalNorm);
LLMC_REGISTER_KERNEL(CPU, "sqrt", makeSqrt);

} // namespace llmc::cpu
