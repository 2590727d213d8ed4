//===- reduce_max.cpp - maximum over the last dimension -------------------===//
//
// reduce_max: out[r] = max_j x[r, j], f32 out for f32 or bf16 x. It is the
// first piece of vocabulary-parallel cross-entropy (cross_entropy_sharded.cpp):
// the row maxima, combined over ranks, are the shift that keeps every
// shard's exponentials finite. Row-parallel, a vectorised max per row; a
// maximum is exact, so the result does not depend on the order.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/CrossEntropySharded.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

template <typename T> class ReduceMaxKernel final : public Kernel {
public:
  ReduceMaxKernel(const KernelArgs &args, const contracts::ReduceMaxBinding &b)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<float>()), width_(b.width),
        valid_(b.valid), rows_(b.rows) {}

  void run(const StepContext &) override {
    const int64_t width = width_, valid = valid_;
#pragma omp parallel for schedule(static) if (rows_ * width > kParallelGrain)
    for (int64_t r = 0; r < rows_; ++r) {
      const T *row = x_ + r * width;
      float m = kNegInf;
#pragma omp simd reduction(max : m)
      for (int64_t j = 0; j < valid; ++j) m = std::max(m, load(row, j));
      out_[r] = m;
    }
  }

private:
  const T *x_;
  float *out_;
  int64_t width_, valid_, rows_;
};

std::unique_ptr<Kernel> makeReduceMax(const KernelArgs &args, std::string &error) {
  contracts::ReduceMaxBinding b;
  if (!contracts::bindReduceMax(args, error, &b)) return nullptr;
  return makeFloatKernel<ReduceMaxKernel>(b.dtype, args, b);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "reduce_max", makeReduceMax);

} // namespace llmc::cpu
