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

/// Random values for every argument of `func`; integers (targets) are
/// classes below every test's vocabulary.
std::vector<RefTensor> randomArgs(func::FuncOp func, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<RefTensor> args;
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    RefTensor t = RefTensor::zeros(std::vector<int64_t>(type.getShape().begin(),
                                                        type.getShape().end()));
    for (double &v : t.data)
      v = type.getElementType().isInteger() ? static_cast<double>(rng() % 4) : normal(rng);
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
/// `target`) leaves @grad's results unchanged and produces `counts` ops of
/// each name there.
void checkFusedGradients(const std::string &forward, const std::string &fusions,
                         const std::string &target,
                         const std::vector<std::pair<std::string, int>> &counts) {
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
                  1e-12 * (1 + std::abs((*unfused)[i].data[j])));
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

// The [K, N] layer's weight and bias gradients fuse; the [N, K] one's
// weight gradient is dyᵀ·x, which keeps its ops.
TEST(Fuse, WeightGradientsForCudaKeepTheLossAndEveryGradient) {
  checkFusedGradients(kMlp, "all", "cuda", 2, 1);
  checkFusedGradients(kMlp, "bias-grad", "cpu", 0, 1);
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
                      {{"llm.fused_elementwise", 4}, {"llm.linear", 0}, {"llm.linear_weight_grad", 0}});
  checkFusedGradients(kSwigluMlp, "none", "cpu", {{"llm.fused_elementwise", 0}});
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

} // namespace
