//===- registry_test.cpp - the CPU backend honours docs/kernels.md --------===//
//
// Every name in the contract table is registered (and nothing else), every
// registered kernel has conformance cases, and factories reject bad
// bindings with a one-line message naming the operand or attribute.

#include "Conformance.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>

namespace llmc::test {
namespace {

/// The kernel names of the contract table: the backticked words of each
/// table row's first cell ("`gelu` / `gelu_grad`" names two).
std::set<std::string> contractNames() {
  std::ifstream doc(LLMC_SOURCE_DIR "/docs/kernels.md");
  EXPECT_TRUE(doc.good()) << "cannot read docs/kernels.md";
  std::set<std::string> names;
  std::string line;
  std::regex name("`([a-z_0-9]+)`");
  while (std::getline(doc, line)) {
    if (line.rfind("| `", 0) != 0)
      continue;
    std::string cell = line.substr(1, line.find('|', 1) - 1);
    for (std::sregex_iterator it(cell.begin(), cell.end(), name), end; it != end; ++it)
      names.insert((*it)[1]);
  }
  return names;
}

TEST(KernelRegistry, EveryContractNameIsRegisteredOnCpu) {
  std::set<std::string> contract = contractNames();
  EXPECT_GE(contract.size(), 32u);
  std::vector<std::string> registered = kernelNames(Backend::CPU);
  std::set<std::string> cpu(registered.begin(), registered.end());
  for (const std::string &name : contract) EXPECT_TRUE(cpu.count(name)) << "missing: " << name;
  for (const std::string &name : cpu)
    EXPECT_TRUE(contract.count(name)) << "registered but not in docs/kernels.md: " << name;
}

TEST(KernelRegistry, EveryKernelHasAConformanceCase) {
  const std::set<std::string> &covered = coveredKernels();
  std::vector<std::string> cpu = kernelNames(Backend::CPU);
  for (const std::string &name : cpu)
    EXPECT_TRUE(covered.count(name))
        << name << " has no conformance case: add its cases (test/unit/kernels/Conformance.h)";
  // The CUDA half of a case compares with the CPU kernel of the same name.
  for (const std::string &name : kernelNames(Backend::CUDA))
    EXPECT_TRUE(std::count(cpu.begin(), cpu.end(), name)) << "CUDA " << name << " has no CPU twin";
}

struct ErrorCase {
  std::string kernel;
  std::vector<TensorView> inputs, outputs;
  KernelAttrs attrs;
  std::string expected; // the whole message
};

TensorView f32(std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); }
TensorView bf16(std::vector<int64_t> shape) { return typeOnly(DType::BF16, std::move(shape)); }
TensorView i32(std::vector<int64_t> shape) { return typeOnly(DType::I32, std::move(shape)); }

KernelAttrs withInts(const char *name, std::vector<int64_t> values, KernelAttrs a = {}) {
  a.setInts(name, std::move(values));
  return a;
}

TEST(KernelRegistry, FactoriesNameTheBadOperandOrAttribute) {
  KernelAttrs eps = attrs({{"epsilon", 1e-5}});
  KernelAttrs attention = attrs({{"scale", 0.25}}, {{"causal", 1}});
  KernelAttrs adam = attrs({{"beta1", 0.9},
                            {"beta2", 0.95},
                            {"epsilon", 1e-8},
                            {"weight_decay", 0.1},
                            {"max_grad_norm", 1.0}});
  const std::vector<ErrorCase> cases = {
      {"layernorm",
       {f32({4, 128}), f32({64}), f32({128})},
       {f32({4, 128})},
       eps,
       "layernorm: gamma must be f32[128], got f32[64]"},
      {"layernorm",
       {f32({4, 128}), f32({128}), f32({128})},
       {f32({4, 128})},
       {},
       "layernorm: missing float attribute 'epsilon'"},
      {"layernorm_grad",
       {f32({4, 128}), f32({128}), f32({4, 128})},
       {f32({4, 128}), f32({128}), bf16({128})},
       eps,
       "layernorm_grad: dbeta must be f32[128], got bf16[128]"},
      {"rmsnorm_grad",
       {f32({4, 8}), f32({8}), f32({4, 9})},
       {f32({4, 8}), f32({8})},
       eps,
       "rmsnorm_grad: dy must be f32[4x8], got f32[4x9]"},
      {"gelu", {f32({4}), f32({4})}, {f32({4})}, {}, "gelu: expected 1 input, got 2"},
      {"gelu", {i32({4})}, {i32({4})}, {}, "gelu: x must be f32, bf16 or f16, got i32[4]"},
      {"attention",
       {f32({1, 8, 4, 16}), f32({1, 8, 2, 16})},
       {f32({1, 8, 4, 16}), f32({1, 4, 8})},
       attrs({{"scale", 0.25}}),
       "attention: expected 3 to 4 inputs, got 2"},
      {"swiglu_grad",
       {f32({4}), f32({4}), f32({4})},
       {f32({4})},
       {},
       "swiglu_grad: expected 2 outputs, got 1"},
      {"matmul",
       {f32({2, 7, 13}), f32({12, 5})},
       {f32({2, 7, 5})},
       {},
       "matmul: contraction dims differ: a f32[2x7x13] has K = 13, b f32[12x5] has K = 12"},
      {"matmul",
       {f32({2, 7, 13}), bf16({13, 5})},
       {f32({2, 7, 5})},
       {},
       "matmul: b must be f32, got bf16[13x5]"},
      {"matmul",
       {f32({2, 7, 13}), f32({3, 13, 5})},
       {f32({2, 7, 5})},
       {},
       "matmul: batched b must have a's leading dims: a is f32[2x7x13], b is f32[3x13x5]"},
      {"matmul",
       {f32({7, 13}), f32({13, 5})},
       {f32({7, 6})},
       {},
       "matmul: c must be f32[7x5], got f32[7x6]"},
      {"matmul",
       {f32({7, 13}), f32({13, 5})},
       {f32({7, 5})},
       attrs({}, {{"transpose_a", 2}}),
       "matmul: attribute 'transpose_a' must be 0 or 1, got 2"},
      {"grouped_matmul",
       {f32({7, 13}), i32({4}), f32({2, 13, 5})},
       {f32({7, 5})},
       {},
       "grouped_matmul: weights f32[2x13x5] do not match x f32[7x13] and 3 groups (stacked "
       "weights are [G, K, F])"},
      {"add",
       {f32({3, 7}), f32({3})},
       {f32({3, 7})},
       {},
       "add: rhs shape must be a suffix of lhs shape: lhs f32[3x7], rhs f32[3]"},
      {"scale", {f32({3})}, {f32({3})}, {}, "scale: missing float attribute 'factor'"},
      {"dropout",
       {f32({3})},
       {f32({3})},
       attrs({{"rate", 1.0}}, {{"seed", 1}}),
       "dropout: attribute 'rate' must be in [0, 1), got 1.000000"},
      {"dropout",
       {f32({3})},
       {f32({3})},
       attrs({{"rate", 0.1}}),
       "dropout: missing int attribute 'seed'"},
      {"cast", {i32({3})}, {f32({3})}, {}, "cast: x must be f32, bf16 or f16, got i32[3]"},
      {"embedding",
       {f32({10}), i32({4})},
       {f32({4, 10})},
       {},
       "embedding: table must have rank 2, got f32[10]"},
      {"embedding",
       {f32({10, 8}), f32({4})},
       {f32({4, 8})},
       {},
       "embedding: ids must be i32 or i64, got f32[4]"},
      {"embedding_grad",
       {i32({4}), f32({4, 8})},
       {f32({10, 9})},
       {},
       "embedding_grad: dy must be f32[4x9], got f32[4x8]"},
      {"rope",
       {f32({2, 4, 2, 7})},
       {f32({2, 4, 2, 7})},
       attrs({{"theta", 1e4}}),
       "rope: x head dim D must be even, got f32[2x4x2x7]"},
      {"attention",
       {f32({1, 8, 4, 16}), f32({1, 8, 3, 16}), f32({1, 8, 3, 16})},
       {f32({1, 8, 4, 16}), f32({1, 4, 8})},
       attention,
       "attention: query heads H = 4 must be a multiple of kv heads KV = 3"},
      {"attention",
       {f32({1, 8, 4, 16}), f32({1, 9, 2, 16}), f32({1, 9, 2, 16})},
       {f32({1, 8, 4, 16}), f32({1, 4, 8})},
       attention,
       "attention: causal attention needs S == T: q is f32[1x8x4x16], k is f32[1x9x2x16]"},
      {"attention",
       {f32({1, 8, 4, 16}), f32({1, 8, 2, 16}), f32({1, 8, 2, 16})},
       {f32({1, 8, 4, 16}), bf16({1, 4, 8})},
       attention,
       "attention: lse must be f32[1x4x8], got bf16[1x4x8]"},
      {"attention",
       {f32({1, 8, 4, 16}), f32({1, 8, 2, 16}), f32({1, 8, 2, 16}), i32({1, 7})},
       {f32({1, 8, 4, 16}), f32({1, 4, 8})},
       attention,
       "attention: segment_ids must be i32[1x8], got i32[1x7]"},
      {"attention",
       {f32({1, 8, 4, 16}), f32({1, 8, 2, 16}), f32({1, 8, 2, 16})},
       {f32({1, 8, 4, 16}), f32({1, 4, 8})},
       attrs({}, {{"causal", 1}}),
       "attention: missing float attribute 'scale'"},
      {"attention_grad",
       {f32({1, 8, 4, 16}), f32({1, 8, 2, 16}), f32({1, 8, 2, 16}), f32({1, 8, 4, 16}),
        f32({1, 4, 8}), f32({1, 8, 4, 16})},
       {f32({1, 8, 4, 16}), f32({1, 8, 4, 16}), f32({1, 8, 2, 16})},
       attention,
       "attention_grad: dk must be f32[1x8x2x16], got f32[1x8x4x16]"},
      {"kv_cache_write",
       {f32({6, 4, 2, 16}), f32({1, 8, 2, 8}), i32({1, 5}), i32({1, 8})},
       {f32({6, 4, 2, 16})},
       {},
       "kv_cache_write: new must be [B, T, KV, D] with cache's KV and D: cache is "
       "f32[6x4x2x16], new is f32[1x8x2x8]"},
      {"paged_attention",
       {f32({1, 8, 4, 16}), f32({6, 4, 2, 16}), f32({6, 4, 2, 16}), i32({1, 5}), i32({1, 7})},
       {f32({1, 8, 4, 16})},
       attrs({{"scale", 0.25}}),
       "paged_attention: positions must be i32[1x8], got i32[1x7]"},
      {"cross_entropy",
       {f32({4, 10}), f32({4})},
       {f32({})},
       {},
       "cross_entropy: targets must be i32 or i64, got f32[4]"},
      {"cross_entropy",
       {f32({4, 10}), i32({5})},
       {f32({})},
       {},
       "cross_entropy: targets must be i32[4], got i32[5]"},
      {"cross_entropy_grad",
       {f32({4, 10}), i32({4}), f32({2})},
       {f32({4, 10})},
       {},
       "cross_entropy_grad: dloss must be an f32 scalar, got f32[2]"},
      {"transpose",
       {f32({2, 3})},
       {f32({3, 2})},
       withInts("permutation", {0, 0}),
       "transpose: attribute 'permutation' [0, 0] is not a permutation of rank 2"},
      {"transpose",
       {f32({2, 3})},
       {f32({2, 3})},
       withInts("permutation", {1, 0}),
       "transpose: out must be f32[3x2], got f32[2x3]"},
      {"slice",
       {f32({4, 7})},
       {f32({2, 7})},
       withInts("offsets", {3, 0}),
       "slice: out f32[2x7] at offset 3 in dim 0 lies outside x f32[4x7]"},
      {"pad",
       {f32({4, 7})},
       {f32({4, 8})},
       withInts("offsets", {0, 2}),
       "pad: x f32[4x7] at offset 2 in dim 1 does not fit in out f32[4x8]"},
      {"concat",
       {f32({2, 3}), f32({3, 4})},
       {f32({5, 7})},
       attrs({}, {{"dim", 1}}),
       "concat: input 1 f32[3x4] does not match input 0 f32[2x3] outside dim 1"},
      {"concat",
       {f32({2, 3})},
       {f32({2, 3})},
       attrs({}, {{"dim", 2}}),
       "concat: attribute 'dim' = 2 is out of range for rank 2"},
      {"reduce_sum",
       {f32({3, 7})},
       {f32({3})},
       {},
       "reduce_sum: out shape must be a suffix of x's shape: x f32[3x7], out f32[3]"},
      {"fill",
       {},
       {i32({3})},
       attrs({{"value", 1.0}}),
       "fill: out must be f32, bf16 or f16, got i32[3]"},
      {"copy",
       {f32({6})},
       {f32({7})},
       {},
       "copy: out f32[7] must have as many elements as x f32[6]"},
      {"copy_to_host",
       {f32({2, 3})},
       {f32({6})},
       {},
       "copy_to_host: out f32[6] must have x's shape f32[2x3]"},
      {"copy_to_device",
       {f32({6})},
       {bf16({6})},
       {},
       "copy_to_device: out must have x's dtype f32, got bf16[6]"},
      {"global_norm",
       {f32({3}), i32({3})},
       {f32({})},
       {},
       "global_norm: input 1 must be f32, bf16 or f16, got i32[3]"},
      {"adamw",
       {f32({8}), f32({8}), f32({7}), f32({8}), f32({}), f32({})},
       {f32({8}), f32({8}), f32({8})},
       adam,
       "adamw: m must be f32[8], got f32[7]"},
      {"adamw",
       {f32({8}), f32({8}), f32({8}), f32({8}), f32({2}), f32({})},
       {f32({8}), f32({8}), f32({8})},
       adam,
       "adamw: lr must be an f32 scalar, got f32[2]"},
      {"adamw",
       {f32({8}), f32({8}), f32({8}), f32({8}), f32({}), f32({})},
       {f32({8}), f32({8}), f32({8})},
       attrs({{"beta1", 0.9}}),
       "adamw: missing float attribute 'beta2'"},
  };
  for (const ErrorCase &c : cases) {
    std::string error = bindError(c.kernel, c.inputs, c.outputs, c.attrs);
    EXPECT_EQ(error, c.expected);
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
}

} // namespace
} // namespace llmc::test
