//===- elementwise_cpu.cpp - fused elementwise chains against their ops ---===//
//
// Times, on the CPU backend, the chains llmc-fuse's `elementwise` forms in
// GPT-2's training step, both ways: the unfused kernels one after the
// other, and one fused_elementwise evaluating the same program:
//  - dQKV's sum of three [rows, N] pieces (add, add);
//  - the residual add after dropout (dropout, add), in f32 and bf16;
//  - the last microbatch's gradient sum and mean (add, scale).
// Each is run `reps` times after a warm-up; the best time is printed, in
// rounds that alternate the two.
//
// Usage: llmc-bench-elementwise <rows> <N> [--reps R] [--rounds N]
//
//===----------------------------------------------------------------------===//

#include "bench/KernelBench.h"
#include "common/ElementwiseProgram.h"

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
  return bench::bindKernel("llmc-bench-elementwise", name, inputs, outputs, attrs);
}

/// A program's attributes from its instructions {opcode, dtype, a, b, c}.
KernelAttrs program(const std::vector<std::vector<int64_t>> &instructions, int64_t yield) {
  std::vector<int64_t> words;
  for (const auto &in : instructions) words.insert(words.end(), in.begin(), in.end());
  KernelAttrs attrs;
  attrs.setInts("program", words);
  attrs.setInts("yields", {yield});
  return attrs;
}

void report(const char *what, const std::vector<Kernel *> &unfused, Kernel *fused, int reps,
            int rounds) {
  std::printf("  %s\n", what);
  for (int r = 0; r < rounds; ++r)
    std::printf("    unfused %.3f ms   fused %.3f ms\n", bench::bestMs(unfused, reps), bench::bestMs({fused}, reps));
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: llmc-bench-elementwise <rows> <N> [--reps R] [--rounds N]\n");
    return 2;
  }
  const int64_t rows = std::atoll(argv[1]), n = std::atoll(argv[2]);
  int reps = 20, rounds = 3;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
  }
  const int64_t load = static_cast<int64_t>(ew::Opcode::Load),
                add = static_cast<int64_t>(ew::Opcode::Add),
                mul = static_cast<int64_t>(ew::Opcode::Mul),
                cnst = static_cast<int64_t>(ew::Opcode::Const),
                dropout = static_cast<int64_t>(ew::Opcode::Dropout);
  std::printf("[%lld, %lld], best of %d\n", static_cast<long long>(rows),
              static_cast<long long>(n), reps);
  const std::vector<int64_t> shape = {rows, n};

  Tensor a(DType::F32, shape), b(DType::F32, shape), c(DType::F32, shape), ab(DType::F32, shape),
      out(DType::F32, shape), fused(DType::F32, shape);
  {
    auto k1 = bind("add", {&a, &b}, {&ab}), k2 = bind("add", {&ab, &c}, {&out});
    auto f = bind("fused_elementwise", {&a, &b, &c}, {&fused},
                  program({{load, 0, 0, 0, 0}, {load, 0, 1, 0, 0}, {add, 0, 0, 1, 0},
                           {load, 0, 2, 0, 0}, {add, 0, 2, 3, 0}},
                          4));
    report("add, add (dQKV's sum), f32", {k1.get(), k2.get()}, f.get(), reps, rounds);
  }
  for (DType dtype : {DType::F32, DType::BF16}) {
    Tensor x(dtype, shape), res(dtype, shape), dropped(dtype, shape), y(dtype, shape),
        fy(dtype, shape);
    KernelAttrs dropoutAttrs;
    dropoutAttrs.setFloat("rate", 0.1);
    dropoutAttrs.setInt("seed", 7);
    auto k1 = bind("dropout", {&x}, {&dropped}, dropoutAttrs),
         k2 = bind("add", {&res, &dropped}, {&y});
    int64_t t = static_cast<int64_t>(dtype);
    auto f = bind("fused_elementwise", {&x, &res}, {&fy},
                  program({{load, t, 0, 0, 0}, {dropout, t, 0, 7, ew::bitsOf(0.1)},
                           {load, t, 1, 0, 0}, {add, t, 2, 1, 0}},
                          3));
    report(dtype == DType::F32 ? "dropout, add (residual), f32" : "dropout, add (residual), bf16",
           {k1.get(), k2.get()}, f.get(), reps, rounds);
  }
  {
    KernelAttrs scaleAttrs;
    scaleAttrs.setFloat("factor", 0.5);
    auto k1 = bind("add", {&a, &b}, {&ab}), k2 = bind("scale", {&ab}, {&out}, scaleAttrs);
    auto f = bind("fused_elementwise", {&a, &b}, {&fused},
                  program({{load, 0, 0, 0, 0}, {load, 0, 1, 0, 0}, {add, 0, 0, 1, 0},
                           {cnst, 0, ew::bitsOf(0.5), 0, 0}, {mul, 0, 2, 3, 0}},
                          4));
    report("add, scale (gradient sum and mean), f32", {k1.get(), k2.get()}, f.get(), reps, rounds);
  }
  return 0;
}
