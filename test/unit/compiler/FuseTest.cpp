//===- FuseTest.cpp - llmc-fuse keeps what a program computes -------------===//
//
// A small layer's @forward goes through autodiff; the reference interpreter
// evaluates @grad (the loss and every gradient) in float64 before and after
// llmc-fuse, which must leave every value as it was: the fused ops are
// interpreted by the references of the ops they replace, so this checks
// the rewrite itself — which values the fused op takes over, keep_pre
// feeding gelu_grad, the weight gradient's operands — apart from any
// kernel's rounding.
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"
#include "compiler/Interpreter.h"
#include "dialects/LLM/LLMDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using llmc::ref::RefTensor;

namespace {

/// Random values for every float argument of `func`; integer ones (targets,
/// positions, segment ids) count along their last dimension in pairs: 0, 0,
/// 1, 1, … (classes below every test's vocabulary).
std::vector<RefTensor> randomArgs(func::FuncOp func, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<RefTensor> args;
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    RefTensor t = RefTensor::zeros(std::vector<int64_t>(type.getShape().begin(),
                                                        type.getShape().end()));
    bool ids = isa<IntegerType>(type.getElementType());
    for (size_t i = 0; i < t.data.size(); ++i)
      t.data[i] = ids ? static_cast<double>(i % type.getShape().back() / 2) : normal(rng);
    args.push_back(std::move(t));
  }
  return args;
}

/// Counts the ops named `name` in `func`.
int count(func::FuncOp func, StringRef name) {
  int n = 0;
  func.walk([&](Operation *op) { n += op->getName().getStringRef() == name; });
  return n;
}

/// Differentiates `forward`, then checks that llmc-fuse (`fusions` for
/// `target`) leaves @grad's results unchanged (within `tolerance` relative
/// to each value; 0: exactly) and produces `counts` ops of each name there.
void checkFusedGradients(const std::string &forward, const std::string &fusions,
                         const std::string &target,
                         const std::vector<std::pair<std::string, int>> &counts,
                         double tolerance = 1e-12) {
  MLIRContext context;
  llmc::prepareContext(context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(forward, &context);
  ASSERT_TRUE(module) << "test IR does not parse";
  PassManager autodiff(&context);
  autodiff.addPass(llmc::createAutodiff());
  ASSERT_TRUE(succeeded(autodiff.run(*module)));
  auto grad = module->lookupSymbol<func::FuncOp>("grad");
  std::vector<RefTensor> args = randomArgs(grad, 11);
  FailureOr<std::vector<RefTensor>> unfused = llmc::interpret(grad, args);
  ASSERT_TRUE(succeeded(unfused));

  llmc::FuseOptions options;
  options.fusions = fusions;
  options.target = target;
  PassManager fuse(&context);
  fuse.addPass(llmc::createFuse(options));
  ASSERT_TRUE(succeeded(fuse.run(*module)));
  for (const auto &[name, expected] : counts)
    EXPECT_EQ(count(grad, name), expected) << name;
  FailureOr<std::vector<RefTensor>> fused = llmc::interpret(grad, args);
  ASSERT_TRUE(succeeded(fused));
  ASSERT_EQ(fused->size(), unfused->size());
  for (size_t i = 0; i < fused->size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    ASSERT_EQ((*fused)[i].shape, (*unfused)[i].shape);
    for (size_t j = 0; j < (*fused)[i].data.size(); ++j)
      EXPECT_NEAR((*fused)[i].data[j], (*unfused)[i].data[j],
                  tolerance * (1 + std::abs((*unfused)[i].data[j])));
  }
}

/// Checks `llm.linear` and `llm.linear_weight_grad` counts.
void checkFusedGradients(const std::string &forward, const std::string &fusions,
                         const std::string &target, int linears, int weightGrads) {
  checkFusedGradients(forward, fusions, target,
                      {{"llm.linear", linears}, {"llm.linear_weight_grad", weightGrads}});
}

/// An MLP with biases, GPT-2's: x·w1 + b1 → gelu → ·w2 + b2, loss Σ y ⊙ r.
const char *kMlp = R"mlir(
func.func @forward(%x: tensor<2x3x4xf32>,
                   %w1: tensor<4x8xf32> {llm.param = #llm.param<name = "w1", init = "normal", scale = 1.0>},
                   %b1: tensor<8xf32> {llm.param = #llm.param<name = "b1", init = "normal", scale = 1.0>},
                   %w2: tensor<4x8xf32> {llm.param = #llm.param<name = "w2", init = "normal", scale = 1.0>},
                   %b2: tensor<4xf32> {llm.param = #llm.param<name = "b2", init = "normal", scale = 1.0>},
                   %r: tensor<2x3x4xf32>) -> tensor<f32> {
  %m = llm.matmul %x, %w1 : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %a = llm.add %m, %b1 : tensor<2x3x8xf32>, tensor<8xf32>
  %h = llm.gelu %a : tensor<2x3x8xf32>
  %p = llm.matmul %h, %w2 {transpose_b} : tensor<2x3x8xf32>, tensor<4x8xf32> -> tensor<2x3x4xf32>
  %y = llm.add %p, %b2 : tensor<2x3x4xf32>, tensor<4xf32>
  %s = llm.mul %y, %r : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %l = llm.reduce_sum %s : tensor<2x3x4xf32> to tensor<f32>
  return %l : tensor<f32>
}
)mlir";

TEST(Fuse, LinearLayersKeepTheLossAndEveryGradient) {
  checkFusedGradients(kMlp, "all", "cpu", 2, 0);
}

TEST(Fuse, BiasAloneKeepsTheLossAndEveryGradient) {
  checkFusedGradients(kMlp, "bias", "cpu", 2, 0);
}

TEST(Fuse, BiasGeluAloneKeepsTheLossAndEveryGradient) {
  checkFusedGradients(kMlp, "bias-gelu", "cpu", 1, 0);
}

// GELU's backward fuses into the data-gradient product of the layer
// after it, with b1's gradient (the loss's sum and b2's gradient stay),
// alone and with every other fusion (keep_pre's pre-activation then
// feeds it).
TEST(Fuse, GeluGradKeepsTheLossAndEveryGradient) {
  checkFusedGradients(kMlp, "gelu-grad", "cpu",
                      {{"llm.matmul_gelu_grad", 1}, {"llm.gelu_grad", 0}, {"llm.reduce_sum", 2}});
  checkFusedGradients(kMlp, "all", "cpu",
                      {{"llm.matmul_gelu_grad", 1}, {"llm.gelu_grad", 0}, {"llm.linear", 2}});
}

// The [K, N] layer's weight and bias gradients fuse; the [N, K] one's
// weight gradient is dyᵀ·x, which keeps its ops. With every fusion the
// [K, N] layer's bias gradient goes to gelu-grad instead (DGELU_BGRAD).
TEST(Fuse, WeightGradientsForCudaKeepTheLossAndEveryGradient) {
  checkFusedGradients(kMlp, "bias-grad", "cpu", 0, 1);
  checkFusedGradients(kMlp, "bias-grad", "cuda", 0, 1);
  checkFusedGradients(kMlp, "all", "cuda",
                      {{"llm.linear", 2}, {"llm.linear_weight_grad", 0},
                       {"llm.matmul_gelu_grad", 1}, {"llm.reduce_sum", 2}}); // the loss, b2's
}

/// A Llama-style MLP with what leaves elementwise chains in training: the
/// SwiGLU scaled and dropped out, then the residual add, whose backward
/// chains dropout, scale and swiglu_grad.
const char *kSwigluMlp = R"mlir(
func.func @forward(%x: tensor<2x3x4xf32>,
                   %wg: tensor<4x8xf32> {llm.param = #llm.param<name = "wg", init = "normal", scale = 1.0>},
                   %wu: tensor<4x8xf32> {llm.param = #llm.param<name = "wu", init = "normal", scale = 1.0>},
                   %wd: tensor<8x4xf32> {llm.param = #llm.param<name = "wd", init = "normal", scale = 1.0>},
                   %r: tensor<2x3x4xf32>) -> tensor<f32> {
  %g = llm.matmul %x, %wg : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %u = llm.matmul %x, %wu : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %h = llm.swiglu %g, %u : tensor<2x3x8xf32>
  %s = llm.scale %h {factor = 0.7 : f64} : tensor<2x3x8xf32>
  %d = llm.dropout %s {rate = 0.25 : f64, seed = 5 : i64} : tensor<2x3x8xf32>
  %p = llm.matmul %d, %wd : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  %y = llm.add %x, %p : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %q = llm.gelu %y : tensor<2x3x4xf32>
  %m = llm.mul %q, %r : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %l = llm.reduce_sum %m : tensor<2x3x4xf32> to tensor<f32>
  return %l : tensor<f32>
}
)mlir";

/// Two pre-norm residual steps, GPT-2's layernorm then Llama's rmsnorm:
/// s = e + x, y = layernorm(s), s2 = s + gelu(y), z = rmsnorm(s2), loss
/// Σ z ⊙ r. In the backward, s's gradient is s2's plus layernorm's dx;
/// rmsnorm's dx also feeds gelu_grad, so only the first norm's backward
/// fuses with its add.
const char *kResidual = R"mlir(
func.func @forward(%e: tensor<2x3x8xf32> {llm.param = #llm.param<name = "e", init = "normal", scale = 1.0>},
                   %x: tensor<2x3x8xf32>,
                   %g1: tensor<8xf32> {llm.param = #llm.param<name = "g1", init = "normal", scale = 1.0>},
                   %b1: tensor<8xf32> {llm.param = #llm.param<name = "b1", init = "normal", scale = 1.0>},
                   %g2: tensor<8xf32> {llm.param = #llm.param<name = "g2", init = "normal", scale = 1.0>},
                   %r: tensor<2x3x8xf32>) -> tensor<f32> {
  %s = llm.add %e, %x : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  %y = llm.layernorm %s, %g1, %b1 {epsilon = 1.0e-5 : f64} : tensor<2x3x8xf32>, tensor<8xf32>
  %t = llm.gelu %y : tensor<2x3x8xf32>
  %s2 = llm.add %s, %t : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  %z = llm.rmsnorm %s2, %g2 {epsilon = 1.0e-5 : f64} : tensor<2x3x8xf32>, tensor<8xf32>
  %m = llm.mul %z, %r : tensor<2x3x8xf32>, tensor<2x3x8xf32>
  %l = llm.reduce_sum %m : tensor<2x3x8xf32> to tensor<f32>
  return %l : tensor<f32>
}
)mlir";

// Forward (swiglu, scale, dropout; add, gelu, mul) and backward (mul's
// and gelu's gradients; dropout, scale, swiglu_grad) chains: the
// interpreter evaluates each fused op with the references of the ops it
// replaces, so the loss and every gradient stay exactly.
/// The vocabulary-parallel loss as tensor parallelism builds it, on one
/// shard (the all-reduces between the pieces are identities there): the
/// max as the shift, the shard's Σ exp and target logit, the loss from
/// them.
const char *kShardedHead = R"mlir(
func.func @forward(%h: tensor<2x3x8xf32> {llm.param = #llm.param<name = "h", init = "normal", scale = 1.0>},
                   %w: tensor<12x8xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %t: tensor<2x3xi32>) -> tensor<f32> {
  %l = llm.matmul %h, %w {transpose_b} : tensor<2x3x8xf32>, tensor<12x8xf32> -> tensor<2x3x12xf32>
  %m = llm.reduce_max %l {num_classes = 12 : i64} : tensor<2x3x12xf32> -> tensor<2x3xf32>
  %shift = llm.stop_gradient %m : tensor<2x3xf32>
  %s, %tl = llm.cross_entropy_partial %l, %t, %shift {num_classes = 12 : i64} : tensor<2x3x12xf32>, tensor<2x3xi32>, tensor<2x3xf32>
  %loss = llm.cross_entropy_finish %s, %shift, %tl, %t : tensor<2x3xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}
)mlir";

// The forward's statistics become one op (its sum rescaled to the shift by
// a fused_elementwise), the backward's gradient and products another.
TEST(Fuse, ShardedHeadKeepsTheLossAndEveryGradient) {
  checkFusedGradients(kShardedHead, "linear-cross-entropy", "cpu",
                      {{"llm.linear_cross_entropy_partial", 1},
                       {"llm.linear_cross_entropy_partial_grad", 1},
                       {"llm.fused_elementwise", 1},
                       {"llm.matmul", 0}});
}

TEST(Fuse, ElementwiseChainsKeepTheLossAndEveryGradient) {
  checkFusedGradients(kSwigluMlp, "elementwise", "cpu", {{"llm.fused_elementwise", 4}});
  checkFusedGradients(kSwigluMlp, "all", "cpu",
                      {{"llm.fused_elementwise", 4}, {"llm.linear", 1}, {"llm.linear_weight_grad", 0}});
  checkFusedGradients(kSwigluMlp, "none", "cpu", {{"llm.fused_elementwise", 0}});
}

/// Llama's MLP as it is: x·wg and x·wu, swiglu, ·wd; loss Σ y ⊙ r.
const char *kPlainSwigluMlp = R"mlir(
func.func @forward(%x: tensor<2x3x4xf32>,
                   %wg: tensor<4x8xf32> {llm.param = #llm.param<name = "wg", init = "normal", scale = 1.0>},
                   %wu: tensor<4x8xf32> {llm.param = #llm.param<name = "wu", init = "normal", scale = 1.0>},
                   %wd: tensor<4x8xf32> {llm.param = #llm.param<name = "wd", init = "normal", scale = 1.0>},
                   %r: tensor<2x3x4xf32>) -> tensor<f32> {
  %g = llm.matmul %x, %wg : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %u = llm.matmul %x, %wu : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %h = llm.swiglu %g, %u : tensor<2x3x8xf32>
  %y = llm.matmul %h, %wd {transpose_b} : tensor<2x3x8xf32>, tensor<4x8xf32> -> tensor<2x3x4xf32>
  %m = llm.mul %y, %r : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %l = llm.reduce_sum %m : tensor<2x3x4xf32> to tensor<f32>
  return %l : tensor<f32>
}
)mlir";

// SwiGLU's backward fuses into the down projection's data-gradient
// product, alone and with every other fusion; with a scale and dropout
// between (kSwigluMlp) the product feeds those instead and stays.
TEST(Fuse, SwigluGradKeepsTheLossAndEveryGradient) {
  checkFusedGradients(kPlainSwigluMlp, "swiglu-grad", "cpu",
                      {{"llm.matmul_swiglu_grad", 1}, {"llm.swiglu_grad", 0}});
  checkFusedGradients(kPlainSwigluMlp, "all", "cpu",
                      {{"llm.matmul_swiglu_grad", 1}, {"llm.swiglu_grad", 0}});
  checkFusedGradients(kSwigluMlp, "swiglu-grad", "cpu", {{"llm.matmul_swiglu_grad", 0}});
}

/// The residual stream around two products: GPT-2's biased projection,
/// s = x + (x·w1 + b1), then Llama's, s2 = gelu(s)·w2ᵀ + s; loss Σ s2 ⊙ r.
const char *kResidualProducts = R"mlir(
func.func @forward(%x: tensor<2x3x4xf32>,
                   %w1: tensor<4x4xf32> {llm.param = #llm.param<name = "w1", init = "normal", scale = 1.0>},
                   %b1: tensor<4xf32> {llm.param = #llm.param<name = "b1", init = "normal", scale = 1.0>},
                   %w2: tensor<4x4xf32> {llm.param = #llm.param<name = "w2", init = "normal", scale = 1.0>},
                   %r: tensor<2x3x4xf32>) -> tensor<f32> {
  %m = llm.matmul %x, %w1 : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
  %a = llm.add %m, %b1 : tensor<2x3x4xf32>, tensor<4xf32>
  %s = llm.add %x, %a : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %h = llm.gelu %s : tensor<2x3x4xf32>
  %p = llm.matmul %h, %w2 {transpose_b} : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
  %s2 = llm.add %p, %s : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %q = llm.mul %s2, %r : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %l = llm.reduce_sum %q : tensor<2x3x4xf32> to tensor<f32>
  return %l : tensor<f32>
}
)mlir";

// Both forward adds fuse once the bias has (GPT-2's needs `bias` first);
// the backward's sums of gradient products stay adds.
TEST(Fuse, ResidualKeepsTheLossAndEveryGradient) {
  checkFusedGradients(kResidualProducts, "residual", "cpu", 1, 0);
  checkFusedGradients(kResidualProducts, "bias,residual", "cpu", 2, 0);
  checkFusedGradients(kResidualProducts, "all", "cpu", 2, 0);
  checkFusedGradients(kResidualProducts, "all", "cuda", 2, 1);
}

TEST(Fuse, AddNormKeepsTheLossAndEveryGradient) {
  std::vector<std::pair<std::string, int>> fused = {
      {"llm.add_layernorm", 1}, {"llm.add_rmsnorm", 1},  {"llm.layernorm_grad_add", 1},
      {"llm.rmsnorm_grad_add", 0}, {"llm.layernorm", 0}, {"llm.rmsnorm", 0}};
  checkFusedGradients(kResidual, "add-norm", "cpu", fused);
  checkFusedGradients(kResidual, "all", "cuda", fused);
  checkFusedGradients(kResidual, "bias", "cpu",
                      {{"llm.add_layernorm", 0}, {"llm.layernorm_grad", 1}});
}

/// GPT-2's attention: one projection cut into q, k and v of `heads` and
/// `kv_heads` heads of 4 (grouped-query when fewer kv heads), causal, over
/// packed segments when `segments`; loss Σ out ⊙ r.
std::string packedAttention(int heads, int kvHeads, bool segments) {
  const int d = 4, width = (heads + 2 * kvHeads) * d;
  auto type = [](int n, int h = 0) {
    return "tensor<2x5x" + (h ? std::to_string(h) + "x4" : std::to_string(n)) + "xf32>";
  };
  auto piece = [&](const std::string &name, int offset, int h) {
    return "  %" + name + "s = llm.slice %qkv {offsets = array<i64: 0, 0, " +
           std::to_string(offset) + ">} : " + type(width) + " to " + type(h * d) + "\n  %" +
           name + " = llm.reshape %" + name + "s : " + type(h * d) + " to " + type(0, h) + "\n";
  };
  return "func.func @forward(%x: tensor<2x5x8xf32>, %w: tensor<8x" + std::to_string(width) +
         "xf32> {llm.param = #llm.param<name = \"w\", init = \"normal\", scale = 1.0>}, " +
         "%r: " + type(0, heads) + (segments ? ", %seg: tensor<2x5xi32>" : "") +
         ") -> tensor<f32> {\n  %qkv = llm.matmul %x, %w : tensor<2x5x8xf32>, tensor<8x" +
         std::to_string(width) + "xf32> -> " + type(width) + "\n" + piece("q", 0, heads) +
         piece("k", heads * d, kvHeads) + piece("v", (heads + kvHeads) * d, kvHeads) +
         "  %o, %lse = llm.attention %q, %k, %v " +
         (segments ? "segments %seg : tensor<2x5xi32> " : "") +
         "{causal, scale = 0.5 : f64} : " + type(0, heads) + ", " + type(0, kvHeads) +
         "\n  %m = llm.mul %o, %r : " + type(0, heads) + ", " + type(0, heads) +
         "\n  %l = llm.reduce_sum %m : " + type(0, heads) +
         " to tensor<f32>\n  return %l : tensor<f32>\n}\n";
}

// The packed ops are interpreted on qkv's column blocks with attention's
// references: the loss and every gradient are the unfused ones exactly.
TEST(Fuse, QkvSplitKeepsTheLossAndEveryGradientExactly) {
  const std::vector<std::pair<std::string, int>> fused = {
      {"llm.attention_packed", 1}, {"llm.attention_packed_grad", 1}, {"llm.attention", 0},
      {"llm.attention_grad", 0},   {"llm.slice", 0},                 {"llm.pad", 0}};
  for (auto [heads, kvHeads, segments] :
       {std::tuple{2, 2, false}, std::tuple{4, 2, false}, std::tuple{4, 1, true}}) {
    SCOPED_TRACE(std::to_string(heads) + " heads, " + std::to_string(kvHeads) + " kv heads");
    std::string forward = packedAttention(heads, kvHeads, segments);
    checkFusedGradients(forward, "qkv-split", "cpu", fused, 0.0);
    checkFusedGradients(forward, "all", "cpu", fused, 0.0);
    checkFusedGradients(forward, "add-norm", "cpu",
                        {{"llm.attention_packed", 0}, {"llm.attention", 1}, {"llm.pad", 3}});
  }
}

/// Llama's attention: q (4 heads of 4) and k, v (2 kv heads) projected
/// apart, q and k rotated (at given positions and with Llama 3.1's scaling
/// when `positions`), causal; loss Σ out ⊙ r.
std::string rotatedAttention(bool positions) {
  const std::string rope =
      positions ? " positions %pos : tensor<2x5xi32> {theta = 500000.0 : f64, scaling_factor = "
                  "8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, "
                  "original_max_positions = 4 : i64}"
                : " {theta = 10000.0 : f64}";
  auto param = [](const std::string &name, const std::string &type) {
    return "%" + name + ": " + type + " {llm.param = #llm.param<name = \"" + name +
           "\", init = \"normal\", scale = 1.0>}";
  };
  return "func.func @forward(%x: tensor<2x5x8xf32>, " + param("wq", "tensor<8x16xf32>") + ", " +
         param("wk", "tensor<8x8xf32>") + ", " + param("wv", "tensor<8x8xf32>") +
         ", %r: tensor<2x5x4x4xf32>" + (positions ? ", %pos: tensor<2x5xi32>" : "") +
         R"mlir() -> tensor<f32> {
  %q0 = llm.matmul %x, %wq : tensor<2x5x8xf32>, tensor<8x16xf32> -> tensor<2x5x16xf32>
  %q1 = llm.reshape %q0 : tensor<2x5x16xf32> to tensor<2x5x4x4xf32>
  %q = llm.rope %q1)mlir" + rope + R"mlir( : tensor<2x5x4x4xf32>
  %k0 = llm.matmul %x, %wk : tensor<2x5x8xf32>, tensor<8x8xf32> -> tensor<2x5x8xf32>
  %k1 = llm.reshape %k0 : tensor<2x5x8xf32> to tensor<2x5x2x4xf32>
  %k = llm.rope %k1)mlir" + rope + R"mlir( : tensor<2x5x2x4xf32>
  %v0 = llm.matmul %x, %wv : tensor<2x5x8xf32>, tensor<8x8xf32> -> tensor<2x5x8xf32>
  %v = llm.reshape %v0 : tensor<2x5x8xf32> to tensor<2x5x2x4xf32>
  %o, %lse = llm.attention %q, %k, %v {causal, scale = 0.5 : f64} : tensor<2x5x4x4xf32>, tensor<2x5x2x4xf32>
  %m = llm.mul %o, %r : tensor<2x5x4x4xf32>, tensor<2x5x4x4xf32>
  %l = llm.reduce_sum %m : tensor<2x5x4x4xf32> to tensor<f32>
  return %l : tensor<f32>
}
)mlir";
}

// attention_rope(_grad) are interpreted as rope, attention(_grad) and the
// inverse rope: the loss and every gradient are the unfused ones exactly.
TEST(Fuse, RopeKeepsTheLossAndEveryGradientExactly) {
  const std::vector<std::pair<std::string, int>> fused = {
      {"llm.attention_rope", 1}, {"llm.attention_rope_grad", 1}, {"llm.attention", 0},
      {"llm.attention_grad", 0}, {"llm.rope", 0}};
  for (bool positions : {false, true}) {
    SCOPED_TRACE(positions ? "positions, scaled" : "plain");
    std::string forward = rotatedAttention(positions);
    checkFusedGradients(forward, "rope", "cpu", fused, 0.0);
    checkFusedGradients(forward, "all", "cpu", fused, 0.0);
    checkFusedGradients(forward, "qkv-split", "cpu",
                        {{"llm.attention_rope", 0}, {"llm.rope", 4}});
  }
}

/// The optimizer step of `forward` (optionally in `precision`: its masters
/// and casts), before and after llmc-fuse's multi-tensor-adamw: the
/// reference interpreter must give the same loss, parameters, masters and
/// moments exactly (the fused op is interpreted as adamw per tensor).
void checkFusedStep(const std::string &forward, const std::string &precision, int casts) {
  MLIRContext context;
  llmc::prepareContext(context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(forward, &context);
  ASSERT_TRUE(module) << "test IR does not parse";
  PassManager step(&context);
  if (!precision.empty()) {
    llmc::PrecisionOptions options;
    options.computeType = precision;
    step.addPass(llmc::createPrecision(options));
  }
  step.addPass(llmc::createAutodiff());
  step.addPass(llmc::createOptimizer());
  ASSERT_TRUE(succeeded(step.run(*module)));
  auto train = module->lookupSymbol<func::FuncOp>("train_step");
  std::vector<RefTensor> args = randomArgs(train, 12);
  for (unsigned i = 0; i < train.getNumArguments(); ++i) {
    auto role = train.getArgAttrOfType<StringAttr>(i, "llmc.role");
    auto name = train.getArgAttrOfType<StringAttr>(i, "llmc.name");
    if (role && role.getValue() == "adam_v")
      for (double &v : args[i].data) v = std::abs(v); // second moments are >= 0
    if (name && name.getValue() == "step") args[i].data = {3.0};
    if (name && name.getValue() == "lr") args[i].data = {1e-2};
  }
  FailureOr<std::vector<RefTensor>> unfused = llmc::interpret(train, args);
  ASSERT_TRUE(succeeded(unfused));
  int updates = count(train, "llm.adamw");
  EXPECT_EQ(count(train, "llm.cast") >= casts, true);

  llmc::FuseOptions options;
  options.fusions = "multi-tensor-adamw";
  PassManager fuse(&context);
  fuse.addPass(llmc::createFuse(options));
  ASSERT_TRUE(succeeded(fuse.run(*module)));
  EXPECT_EQ(count(train, "llm.adamw"), 0);
  EXPECT_EQ(count(train, "llm.multi_tensor_adamw"), 1);
  train.walk([&](llmc::llm::MultiTensorAdamWOp op) {
    EXPECT_EQ(static_cast<int>(op.getNumTensors()), updates);
    EXPECT_EQ(static_cast<int>(op.getCastOf().size()), casts);
  });
  FailureOr<std::vector<RefTensor>> fused = llmc::interpret(train, args);
  ASSERT_TRUE(succeeded(fused));
  ASSERT_EQ(fused->size(), unfused->size());
  for (size_t i = 0; i < fused->size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    EXPECT_EQ((*fused)[i].shape, (*unfused)[i].shape);
    EXPECT_EQ((*fused)[i].data, (*unfused)[i].data);
  }
}

/// Token ids through an embedding, a biased linear layer and the loss:
/// what the precision pass turns into bf16 weights with fp32 masters.
const char *kTokens = R"mlir(
func.func @forward(%ids: tensor<2x3xi32>, %t: tensor<2x3xi32>,
                   %wte: tensor<16x4xf32> {llm.param = #llm.param<name = "wte", init = "normal", scale = 1.0>},
                   %w: tensor<4x16xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %b: tensor<16xf32> {llm.param = #llm.param<name = "b", init = "normal", scale = 1.0>}) -> tensor<f32> {
  %e = llm.embedding %wte, %ids : tensor<16x4xf32>, tensor<2x3xi32>
  %m = llm.matmul %e, %w : tensor<2x3x4xf32>, tensor<4x16xf32> -> tensor<2x3x16xf32>
  %a = llm.add %m, %b : tensor<2x3x16xf32>, tensor<16xf32>
  %l = llm.cross_entropy %a, %t : tensor<2x3x16xf32>, tensor<2x3xi32>
  return %l : tensor<f32>
}
)mlir";

// The step's updates in one op: the MLP's four (weight decay on the
// weights only), the token model's three, and in bf16 its masters' three
// casts.
TEST(Fuse, MultiTensorAdamWKeepsTheWholeStepExactly) {
  checkFusedStep(kMlp, "", 0);
  checkFusedStep(kTokens, "", 0);
  checkFusedStep(kTokens, "bf16", 3);
}

} // namespace
