//===- paged_attention_cpu.cpp - decode attention by KV cache type --------===//
//
// Times, on the CPU backend, one decode step's paged_attention (B sequences
// of L cached tokens, one query each, pages of 16 shuffled through a pool)
// with the cache in f32, bf16, int8 and fp8 E4M3 (codes and scales): how
// much reading a quarter of the bytes gains against widening each code on
// the way in.
// Each type is run `reps` times after a warm-up; the best time is printed,
// in rounds that alternate the types (other work on the machine moves the
// mean, rarely the best).
//
// Usage: llmc-bench-paged-attention <B> <L> <H> <KV> <D> [--reps R] [--rounds N]
//                                   [--kinds f32,bf16,int8,fp8]
//
//===----------------------------------------------------------------------===//

#include "bench/KernelBench.h"
#include "common/QuantScheme.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

using namespace llmc;

namespace {

using bench::Tensor;

std::unique_ptr<Kernel> bind(const std::string &name, const std::vector<Tensor *> &inputs,
                             const std::vector<Tensor *> &outputs, const KernelAttrs &attrs = {}) {
  return bench::bindKernel("llmc-bench-paged-attention", name, inputs, outputs, attrs);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: llmc-bench-paged-attention <B> <L> <H> <KV> <D> [--reps R] "
                         "[--rounds N] [--kinds f32,bf16,int8,fp8]\n");
    return 2;
  }
  const int64_t b = std::atoll(argv[1]), l = std::atoll(argv[2]), h = std::atoll(argv[3]),
                kv = std::atoll(argv[4]), d = std::atoll(argv[5]), page = 16;
  int reps = 50, rounds = 3;
  std::string kinds = "f32,bf16,int8,fp8";
  for (int i = 6; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--kinds") && i + 1 < argc) kinds = argv[++i];
  }
  const int64_t maxBlocks = (l + page - 1) / page, blocks = b * maxBlocks;
  Tensor q(DType::F32, {b, 1, h, d}), out(DType::F32, {b, 1, h, d});
  Tensor table(DType::I32, {b, maxBlocks}), positions(DType::I32, {b, 1});
  std::vector<int32_t> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  std::memcpy(table.view.data, order.data(), order.size() * sizeof(int32_t));
  for (int64_t row = 0; row < b; ++row) positions.view.as<int32_t>()[row] = static_cast<int32_t>(l - 1);
  KernelAttrs attrs;
  attrs.setFloat("scale", 1.0 / std::sqrt(static_cast<double>(d)));

  struct Kind {
    std::string name;
    std::unique_ptr<Tensor> k, v, ks, vs;
    std::unique_ptr<Kernel> kernel;
    double bytes = 0;
  };
  std::vector<Kind> runs;
  for (const char *name : {"f32", "bf16", "int8", "fp8"}) {
    if (kinds.find(name) == std::string::npos) continue;
    Kind kind;
    kind.name = name;
    DType dtype = kind.name == "f32" ? DType::F32 : kind.name == "bf16" ? DType::BF16 : DType::U8;
    kind.k = std::make_unique<Tensor>(dtype, std::vector<int64_t>{blocks, page, kv, d});
    kind.v = std::make_unique<Tensor>(dtype, std::vector<int64_t>{blocks, page, kv, d});
    std::vector<Tensor *> inputs = {&q, kind.k.get(), kind.v.get(), &table, &positions};
    if (dtype == DType::U8) {
      kind.ks = std::make_unique<Tensor>(DType::F32, std::vector<int64_t>{blocks, page, kv});
      kind.vs = std::make_unique<Tensor>(DType::F32, std::vector<int64_t>{blocks, page, kv});
      inputs.push_back(kind.ks.get());
      inputs.push_back(kind.vs.get());
    }
    KernelAttrs kindAttrs = attrs;
    if (kind.name == "fp8") // the codes' format (common/QuantScheme.h); int8's is 0
      kindAttrs.setInt("format", static_cast<int64_t>(quant::Format::Fp8E4M3));
    kind.kernel = bind("paged_attention", inputs, {&out}, kindAttrs);
    kind.bytes = 2.0 * b * l * kv * (d * dtypeSize(dtype) + (dtype == DType::U8 ? 4 : 0));
    runs.push_back(std::move(kind));
  }
  std::printf("decode paged_attention: B=%lld L=%lld H=%lld KV=%lld D=%lld, pages of 16, best of "
              "%d\n", static_cast<long long>(b), static_cast<long long>(l),
              static_cast<long long>(h), static_cast<long long>(kv), static_cast<long long>(d),
              reps);
  for (int r = 0; r < rounds; ++r) {
    std::printf(" ");
    for (Kind &kind : runs) {
      double ms = bench::bestMs({kind.kernel.get()}, reps);
      std::printf("  %s %.3f ms (%.1f GB/s of cache)", kind.name.c_str(), ms,
                  kind.bytes / ms * 1e-6);
    }
    std::printf("\n");
  }
  return 0;
}
