//===- add_norm_cpu.cpp - the residual norms against add and the norm -----===//
//
// Times, on the CPU backend, a residual stream's add and norm both ways:
// forward, `add` then `layernorm` (or `rmsnorm`) against `add_layernorm`
// (`add_rmsnorm`); backward, the norm's backward then `add` against
// `layernorm_grad_add` (`rmsnorm_grad_add`). Each is run `reps` times
// after a warm-up; the best time is printed, in rounds that alternate them.
//
// Usage: llmc-bench-add-norm <rows> <C> [--rms] [--reps R] [--rounds N]
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

/// An fp32 tensor of random values.
struct Tensor {
  explicit Tensor(std::vector<int64_t> shape, unsigned seed = 17) {
    view.dtype = DType::F32;
    view.shape = std::move(shape);
    data.resize(static_cast<size_t>(view.numel()));
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float &v : data) v = normal(gen);
    view.data = data.data();
  }
  std::vector<float> data;
  TensorView view;
};

std::unique_ptr<Kernel> bind(const std::string &name, const std::vector<Tensor *> &inputs,
                             const std::vector<Tensor *> &outputs, const KernelAttrs &attrs = {}) {
  KernelArgs args;
  for (Tensor *t : inputs) args.inputs.push_back(t->view);
  for (Tensor *t : outputs) args.outputs.push_back(t->view);
  args.attrs = attrs;
  std::string error;
  KernelFactory factory = findKernel(Backend::CPU, name);
  std::unique_ptr<Kernel> kernel = factory ? factory(args, error) : nullptr;
  if (!kernel) {
    std::fprintf(stderr, "llmc-bench-add-norm: %s: %s\n", name.c_str(), error.c_str());
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
  if (argc < 3) {
    std::fprintf(stderr, "usage: llmc-bench-add-norm <rows> <C> [--rms] [--reps R] [--rounds N]\n");
    return 2;
  }
  const int64_t rows = std::atoll(argv[1]), c = std::atoll(argv[2]);
  bool rms = false;
  int reps = 20, rounds = 3;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rms")) rms = true;
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
  }
  const std::string norm = rms ? "rmsnorm" : "layernorm";
  Tensor a({rows, c}, 1), b({rows, c}, 2), gamma({c}, 3), beta({c}, 4), dy({rows, c}, 5),
      dres({rows, c}, 6), sum({rows, c}), y({rows, c}), dx({rows, c}), d({rows, c}), dgamma({c}),
      dbeta({c});
  KernelAttrs attrs;
  attrs.setFloat("epsilon", 1e-5);
  std::vector<Tensor *> params = {&gamma};
  if (!rms) params.push_back(&beta);
  std::vector<Tensor *> normIn = {&sum}, fusedIn = {&a, &b}, gradOut = {&dx, &dgamma},
                        fusedGradOut = {&d, &dgamma};
  normIn.insert(normIn.end(), params.begin(), params.end());
  fusedIn.insert(fusedIn.end(), params.begin(), params.end());
  if (!rms) gradOut.push_back(&dbeta), fusedGradOut.push_back(&dbeta);

  std::unique_ptr<Kernel> add = bind("add", {&a, &b}, {&sum});
  std::unique_ptr<Kernel> normK = bind(norm, normIn, {&y}, attrs);
  std::unique_ptr<Kernel> fused = bind("add_" + norm, fusedIn, {&sum, &y}, attrs);
  std::unique_ptr<Kernel> grad = bind(norm + "_grad", {&sum, &gamma, &dy}, gradOut, attrs);
  std::unique_ptr<Kernel> addGrad = bind("add", {&dx, &dres}, {&d});
  std::unique_ptr<Kernel> fusedGrad =
      bind(norm + "_grad_add", {&sum, &gamma, &dy, &dres}, fusedGradOut, attrs);

  std::printf("%s over [%lld, %lld] fp32, best of %d\n", norm.c_str(),
              static_cast<long long>(rows), static_cast<long long>(c), reps);
  for (int r = 0; r < rounds; ++r)
    std::printf("  add + %s %.3f ms   add_%s %.3f ms   %s_grad + add %.3f ms   %s_grad_add %.3f ms\n",
                norm.c_str(), best({add.get(), normK.get()}, reps), norm.c_str(),
                best({fused.get()}, reps), norm.c_str(), best({grad.get(), addGrad.get()}, reps),
                norm.c_str(), best({fusedGrad.get()}, reps));
  return 0;
}
