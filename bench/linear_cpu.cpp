//===- linear_cpu.cpp - the fused linear against matmul, add and gelu -----===//
//
// Times, on the CPU backend, one layer's product with its epilogue both
// ways: the unfused kernels (matmul, add of the bias, with --residual add
// of the residual stream and with --gelu gelu) one after the other, and the
// fused `linear` (with --keep-pre writing the pre-activation too, as in
// training; --no-bias for Llama's projections, which have none); the
// matmul alone is the floor. With --gelu-grad, the MLP backward instead:
// matmul, gelu_grad and reduce_sum (c_fc's bias gradient) against
// `matmul_gelu_grad` with its bias gradient. Each is run `reps` times
// after a warm-up; the best time is printed, in rounds that alternate the
// two.
//
// Usage: llmc-bench-linear <rows> <K> <N> [--gelu] [--keep-pre] [--residual] [--no-bias]
//                          [--gelu-grad] [--reps R] [--rounds N]
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
  return bench::bindKernel("llmc-bench-linear", name, inputs, outputs, attrs);
}

/// The MLP backward's dgrad product, GELU's backward and c_fc's bias
/// gradient: unfused (matmul, gelu_grad, reduce_sum) and as
/// matmul_gelu_grad with bias_grad.
int benchGeluGrad(int64_t rows, int64_t k, int64_t n, int reps, int rounds) {
  const DType f32 = DType::F32;
  Tensor dy(f32, {rows, k}), w(f32, {k, n}), pre(f32, {rows, n}), product(f32, {rows, n}),
      dpre(f32, {rows, n}), db(f32, {n}), fusedDpre(f32, {rows, n}), fusedDb(f32, {n});
  std::unique_ptr<Kernel> matmul = bind("matmul", {&dy, &w}, {&product});
  std::unique_ptr<Kernel> grad = bind("gelu_grad", {&pre, &product}, {&dpre});
  std::unique_ptr<Kernel> sum = bind("reduce_sum", {&dpre}, {&db});
  KernelAttrs attrs;
  attrs.setInt("bias_grad", 1);
  std::unique_ptr<Kernel> fused =
      bind("matmul_gelu_grad", {&dy, &w, &pre}, {&fusedDpre, &fusedDb}, attrs);
  std::unique_ptr<Kernel> fusedNoSum = bind("matmul_gelu_grad", {&dy, &w, &pre}, {&fusedDpre});
  std::printf("dy [%lld, %lld] · w [%lld, %lld], gelu_grad, bias gradient, best of %d\n",
              static_cast<long long>(rows), static_cast<long long>(k), static_cast<long long>(k),
              static_cast<long long>(n), reps);
  for (int r = 0; r < rounds; ++r)
    std::printf("  matmul %.3f ms   unfused %.3f ms   matmul_gelu_grad + reduce_sum %.3f ms   "
                "matmul_gelu_grad with bias_grad %.3f ms\n",
                bench::bestMs({matmul.get()}, reps),
                bench::bestMs({matmul.get(), grad.get(), sum.get()}, reps),
                bench::bestMs({fusedNoSum.get(), sum.get()}, reps),
                bench::bestMs({fused.get()}, reps));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: llmc-bench-linear <rows> <K> <N> [--gelu] [--keep-pre] "
                         "[--residual] [--no-bias] [--gelu-grad] [--reps R] [--rounds N]\n");
    return 2;
  }
  const int64_t rows = std::atoll(argv[1]), k = std::atoll(argv[2]), n = std::atoll(argv[3]);
  bool gelu = false, keepPre = false, withBias = true, withResidual = false, geluGrad = false;
  int reps = 20, rounds = 3;
  for (int i = 4; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--gelu")) gelu = true;
    else if (!std::strcmp(argv[i], "--keep-pre")) gelu = keepPre = true;
    else if (!std::strcmp(argv[i], "--residual")) withResidual = true;
    else if (!std::strcmp(argv[i], "--no-bias")) withBias = false;
    else if (!std::strcmp(argv[i], "--gelu-grad")) geluGrad = true;
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
  }
  if ((gelu && (withResidual || !withBias)) || (!withBias && !withResidual)) {
    std::fprintf(stderr, "llmc-bench-linear: gelu needs the bias and no residual; without a "
                         "bias, give --residual\n");
    return 2;
  }
  const DType f32 = DType::F32;
  if (geluGrad) return benchGeluGrad(rows, k, n, reps, rounds);
  Tensor x(f32, {rows, k}), w(f32, {k, n}), bias(f32, {n}), residual(f32, {rows, n}),
      product(f32, {rows, n}), biased(f32, {rows, n}), summed(f32, {rows, n}),
      activated(f32, {rows, n}), y(f32, {rows, n}), pre(f32, {rows, n});
  std::unique_ptr<Kernel> matmul = bind("matmul", {&x, &w}, {&product});
  std::vector<Kernel *> unfused = {matmul.get()};
  std::vector<std::unique_ptr<Kernel>> epilogue;
  std::vector<Tensor *> inputs = {&x, &w};
  Tensor *last = &product;
  if (withBias) {
    epilogue.push_back(bind("add", {last, &bias}, {&biased}));
    inputs.push_back(&bias);
    last = &biased;
  }
  if (withResidual) {
    epilogue.push_back(bind("add", {&residual, last}, {&summed}));
    inputs.push_back(&residual);
  }
  if (gelu) epilogue.push_back(bind("gelu", {&biased}, {&activated}));
  for (const std::unique_ptr<Kernel> &kernel : epilogue) unfused.push_back(kernel.get());
  KernelAttrs attrs;
  attrs.setInt("gelu", gelu);
  attrs.setInt("keep_pre", keepPre);
  std::vector<Tensor *> outputs = {&y};
  if (keepPre) outputs.push_back(&pre);
  std::unique_ptr<Kernel> linear = bind("linear", inputs, outputs, attrs);

  std::printf("x [%lld, %lld] · w [%lld, %lld]%s%s%s%s, best of %d\n",
              static_cast<long long>(rows), static_cast<long long>(k), static_cast<long long>(k),
              static_cast<long long>(n), withBias ? " + bias" : "",
              withResidual ? " + residual" : "", gelu ? ", gelu" : "",
              keepPre ? " (pre kept)" : "", reps);
  for (int r = 0; r < rounds; ++r)
    std::printf("  matmul %.3f ms   unfused %.3f ms   linear %.3f ms\n", bench::bestMs({matmul.get()}, reps),
                bench::bestMs(unfused, reps), bench::bestMs({linear.get()}, reps));
  return 0;
}
