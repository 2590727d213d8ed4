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

#include "bench/KernelBench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace llmc;

namespace {

using bench::Tensor;

std::unique_ptr<Kernel> bind(const std::string &name, const std::vector<Tensor *> &inputs,
                             const std::vector<Tensor *> &outputs, const KernelAttrs &attrs = {}) {
  return bench::bindKernel("llmc-bench-add-norm", name, inputs, outputs, attrs);
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
  // Inputs of unit variance, each its own draw; outputs are overwritten.
  const DType f32 = DType::F32;
  const std::vector<int64_t> rowShape = {rows, c}, channel = {c};
  Tensor a(f32, rowShape, 1.0f, 1), b(f32, rowShape, 1.0f, 2), gamma(f32, channel, 1.0f, 3),
      beta(f32, channel, 1.0f, 4), dy(f32, rowShape, 1.0f, 5), dres(f32, rowShape, 1.0f, 6);
  Tensor sum(f32, rowShape), y(f32, rowShape), dx(f32, rowShape), d(f32, rowShape),
      dgamma(f32, channel), dbeta(f32, channel);
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
                norm.c_str(), bench::bestMs({add.get(), normK.get()}, reps), norm.c_str(),
                bench::bestMs({fused.get()}, reps), norm.c_str(), bench::bestMs({grad.get(), addGrad.get()}, reps),
                norm.c_str(), bench::bestMs({fusedGrad.get()}, reps));
  return 0;
}
