//===- linear_cpu.cpp - the fused linear against matmul, add and gelu -----===//
//
// Times, on the CPU backend, one layer's product with its epilogue both
// ways: the unfused kernels (matmul, add of the bias and, with --gelu,
// gelu) one after the other, and the fused `linear` (with --keep-pre
// writing the pre-activation too, as in training); the matmul alone is
// the floor. Each is run `reps` times after a warm-up; the best time is
// printed, in rounds that alternate the two.
//
// Usage: llmc-bench-linear <rows> <K> <N> [--gelu] [--keep-pre] [--reps R] [--rounds N]
//
//===----------------------------------------------------------------------===//

#include "kernels/Kernel.h"
#include "kernels/Tensor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace llmc;

namespace {

/// An fp32 tensor of small random values.
struct Tensor {
  explicit Tensor(std::vector<int64_t> shape) {
    view.dtype = DType::F32;
    view.shape = std::move(shape);
    data.resize(static_cast<size_t>(view.numel()));
    std::mt19937 gen(17);
    std::normal_distribution<float> normal(0.0f, 0.1f);
    for (float &v : data) v = normal(gen);
    view.data = data.data();
  }
  std::vector<float> data;
  TensorView view;
};

std::unique_ptr<Kernel> bind(const char *name, const std::vector<Tensor *> &inputs,
                             const std::vector<Tensor *> &outputs, const KernelAttrs &attrs = {}) {
  KernelArgs args;
  for (Tensor *t : inputs) args.inputs.push_back(t->view);
  for (Tensor *t : outputs) args.outputs.push_back(t->view);
  args.attrs = attrs;
  std::string error;
  KernelFactory factory = findKernel(Backend::CPU, name);
  std::unique_ptr<Kernel> kernel = factory ? factory(args, error) : nullptr;
  if (!kernel) {
    std::fprintf(stderr, "llmc-bench-linear: %s: %s\n", name, error.c_str());
    std::exit(1);
  }
  return kernel;
}

/// Best time (ms) of `reps` runs of `kernels` in order, after one warm-up.
double best(const std::vector<Kernel *> &kernels, int reps) {
  StepContext ctx;
  for (Kernel *k : kernels) k->run(ctx);
  double bestMs = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (Kernel *k : kernels) k->run(ctx);
    std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    bestMs = std::min(bestMs, ms.count());
  }
  return bestMs;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: llmc-bench-linear <rows> <K> <N> [--gelu] [--keep-pre] "
                         "[--reps R] [--rounds N]\n");
    return 2;
  }
  const int64_t rows = std::atoll(argv[1]), k = std::atoll(argv[2]), n = std::atoll(argv[3]);
  bool gelu = false, keepPre = false;
  int reps = 20, rounds = 3;
  for (int i = 4; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--gelu")) gelu = true;
    else if (!std::strcmp(argv[i], "--keep-pre")) gelu = keepPre = true;
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
  }
  Tensor x({rows, k}), w({k, n}), bias({n}), product({rows, n}), biased({rows, n}),
      activated({rows, n}), y({rows, n}), pre({rows, n});
  std::unique_ptr<Kernel> matmul = bind("matmul", {&x, &w}, {&product});
  std::unique_ptr<Kernel> add = bind("add", {&product, &bias}, {&biased});
  std::unique_ptr<Kernel> act = bind("gelu", {&biased}, {&activated});
  KernelAttrs attrs;
  attrs.setInt("gelu", gelu);
  attrs.setInt("keep_pre", keepPre);
  std::vector<Tensor *> outputs = {&y};
  if (keepPre) outputs.push_back(&pre);
  std::unique_ptr<Kernel> linear = bind("linear", {&x, &w, &bias}, outputs, attrs);
  std::vector<Kernel *> unfused = {matmul.get(), add.get()};
  if (gelu) unfused.push_back(act.get());

  std::printf("x [%lld, %lld] · w [%lld, %lld] + bias%s%s, best of %d\n",
              static_cast<long long>(rows), static_cast<long long>(k), static_cast<long long>(k),
              static_cast<long long>(n), gelu ? ", gelu" : "", keepPre ? " (pre kept)" : "", reps);
  for (int r = 0; r < rounds; ++r)
    std::printf("  matmul %.3f ms   unfused %.3f ms   linear %.3f ms\n", best({matmul.get()}, reps),
                best(unfused, reps), best({linear.get()}, reps));
  return 0;
}
