//===- binary.cpp - add, mul, scale ---------------------------------------===//
//
// Elementwise arithmetic with trailing broadcast: rhs has the shape of a
// suffix of lhs (a bias [C] against [B, T, C]), so lhs is walked as rows of
// rhs.numel() elements and rhs is reused for every row: both inner loops are
// contiguous and vectorise. `add` and `scale` may write in place (out ==
// lhs / x); each element is read before it is written, and `omp simd`
// vectorises without the overlap check that would otherwise fall back to
// scalar code for exactly-aliased pointers.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Binary.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

enum class BinaryOp { Add, Mul };

template <typename T> class BroadcastKernel final : public Kernel {
public:
  BroadcastKernel(const KernelArgs &args, BinaryOp op)
      : op_(op), lhs_(args.inputs[0].as<T>()), rhs_(args.inputs[1].as<T>()),
        out_(args.outputs[0].as<T>()), inner_(args.inputs[1].numel()),
        rows_(inner_ ? args.inputs[0].numel() / inner_ : 0) {}

  void run(const StepContext &) override {
    if (op_ == BinaryOp::Add)
      apply([](float a, float b) { return a + b; });
    else
      apply([](float a, float b) { return a * b; });
  }

private:
  template <typename Fn> void apply(Fn fn) {
    const T *lhs = lhs_, *rhs = rhs_;
    T *out = out_;
    int64_t inner = inner_, rows = rows_;
    if (inner == 1) { // a scalar rhs: one flat loop
      float r = load(rhs, 0);
#pragma omp parallel for simd schedule(static) if (rows > kParallelGrain)
      for (int64_t i = 0; i < rows; ++i) store(out, i, fn(load(lhs, i), r));
      return;
    }
    if (rows < 64) { // few long rows: split each row instead
      for (int64_t row = 0; row < rows; ++row) {
        const T *l = lhs + row * inner;
        T *o = out + row * inner;
#pragma omp parallel for simd schedule(static) if (inner > kParallelGrain)
        for (int64_t i = 0; i < inner; ++i) store(o, i, fn(load(l, i), load(rhs, i)));
      }
      return;
    }
#pragma omp parallel for schedule(static) if (rows * inner > kParallelGrain)
    for (int64_t row = 0; row < rows; ++row) {
      const T *l = lhs + row * inner;
      T *o = out + row * inner;
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i) store(o, i, fn(load(l, i), load(rhs, i)));
    }
  }

  BinaryOp op_;
  const T *lhs_, *rhs_;
  T *out_;
  int64_t inner_, rows_;
};

std::unique_ptr<Kernel> makeAdd(const KernelArgs &args, std::string &error) {
  contracts::BroadcastBinding b;
  if (!contracts::bindAdd(args, error, &b)) return nullptr;
  return makeFloatKernel<BroadcastKernel>(b.dtype, args, BinaryOp::Add);
}

std::unique_ptr<Kernel> makeMul(const KernelArgs &args, std::string &error) {
  contracts::BroadcastBinding b;
  if (!contracts::bindMul(args, error, &b)) return nullptr;
  return makeFloatKernel<BroadcastKernel>(b.dtype, args, BinaryOp::Mul);
}

template <typename T> class ScaleKernel final : public Kernel {
public:
  ScaleKernel(const KernelArgs &args, float factor)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()), n_(args.inputs[0].numel()),
        factor_(factor) {}

  void run(const StepContext &) override {
    const T *x = x_;
    T *out = out_;
    float factor = factor_;
#pragma omp parallel for simd schedule(static) if (n_ > kParallelGrain)
    for (int64_t i = 0; i < n_; ++i) store(out, i, factor * load(x, i));
  }

private:
  const T *x_;
  T *out_;
  int64_t n_;
  float factor_;
};

std::unique_ptr<Kernel> makeScale(const KernelArgs &args, std::string &error) {
  contracts::ScaleBinding b;
  if (!contracts::bindScale(args, error, &b)) return nullptr;
  return makeFloatKernel<ScaleKernel>(b.dtype, args, static_cast<float>(b.factor));
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "add", makeAdd);
LLMC_REGISTER_KERNEL(CPU, "mul", makeMul);
LLMC_REGISTER_KERNEL(CPU, "scale", makeScale);

} // namespace llmc::cpu
