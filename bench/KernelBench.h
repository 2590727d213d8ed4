//===- KernelBench.h - what the CPU kernel benchmarks share -----*- C++ -*-===//
//
// The llmc-bench-* programs that time kernels against each other on the
// CPU backend: operand storage, binding through the registry (exiting
// with the factory's message when it refuses) and the best-of-N timing.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_BENCH_KERNELBENCH_H
#define LLMC_BENCH_KERNELBENCH_H

#include "kernels/Kernel.h"
#include "kernels/Tensor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace llmc::bench {

/// An operand: f32 and bf16 hold normal values of `stddev` (0: zeros),
/// other dtypes zeros (valid ids and indices).
struct Tensor {
  Tensor(DType dtype, std::vector<int64_t> shape, float stddev = 0.1f, unsigned seed = 17) {
    view.dtype = dtype;
    view.shape = std::move(shape);
    storage.assign(view.bytes() / sizeof(uint64_t) + 1, 0);
    view.data = storage.data();
    if (stddev == 0.0f || (dtype != DType::F32 && dtype != DType::BF16)) return;
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, stddev);
    for (int64_t i = 0; i < view.numel(); ++i) {
      float v = normal(gen);
      if (dtype == DType::F32)
        view.as<float>()[i] = v;
      else
        view.as<uint16_t>()[i] = floatToBf16(v);
    }
  }
  std::vector<uint64_t> storage; // 8-byte aligned
  TensorView view;
};

/// Kernel `name` bound on the CPU backend; `tool`'s error and exit(1)
/// when its factory refuses.
inline std::unique_ptr<Kernel> bindKernel(const char *tool, const std::string &name,
                                          const std::vector<Tensor *> &inputs,
                                          const std::vector<Tensor *> &outputs,
                                          const KernelAttrs &attrs) {
  KernelArgs args;
  for (Tensor *t : inputs) args.inputs.push_back(t->view);
  for (Tensor *t : outputs) args.outputs.push_back(t->view);
  args.attrs = attrs;
  std::string error;
  KernelFactory factory = findKernel(Backend::CPU, name);
  std::unique_ptr<Kernel> kernel = factory ? factory(args, error) : nullptr;
  if (!kernel) {
    std::fprintf(stderr, "%s: %s: %s\n", tool, name.c_str(),
                 factory ? error.c_str() : "no such CPU kernel");
    std::exit(1);
  }
  return kernel;
}

/// Best time (ms) of `reps` runs of `kernels` in order, after one warm-up.
inline double bestMs(const std::vector<Kernel *> &kernels, int reps) {
  StepContext ctx;
  for (Kernel *k : kernels) k->run(ctx);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (Kernel *k : kernels) k->run(ctx);
    std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    best = std::min(best, ms.count());
  }
  return best;
}

} // namespace llmc::bench

#endif
