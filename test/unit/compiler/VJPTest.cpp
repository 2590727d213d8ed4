//===- VJPTest.cpp - every VJP rule against central finite differences ----===//
//
// For each op: a tiny @forward computes loss = Σ op(params)·R (R a fixed
// random tensor, so every output element matters), the autodiff pass derives
// @grad, and the reference interpreter evaluates both in float64. Each
// parameter gradient must match central differences of the loss.
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

struct ArgSpec {
  bool isParam;
  int64_t intRange; ///< > 0: integer input with values in [0, intRange)
};

/// Checks d(loss)/d(param) of `forward` (MLIR text) against finite differences.
void checkGradients(const std::string &body, double tolerance = 1e-6, uint64_t seed = 7) {
  MLIRContext context;
  llmc::prepareContext(context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(body, &context);
  ASSERT_TRUE(module) << "test IR does not parse";
  PassManager pm(&context);
  pm.addPass(llmc::createAutodiff());
  ASSERT_TRUE(succeeded(pm.run(*module))) << "autodiff failed";
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  auto grad = module->lookupSymbol<func::FuncOp>("grad");

  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<RefTensor> args;
  std::vector<unsigned> params;
  for (BlockArgument arg : forward.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    RefTensor t = RefTensor::zeros(std::vector<int64_t>(type.getShape().begin(),
                                                        type.getShape().end()));
    if (auto range = forward.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), "test.range")) {
      std::uniform_int_distribution<int64_t> pick(0, range.getInt() - 1);
      for (double &v : t.data) v = static_cast<double>(pick(rng));
    } else {
      for (double &v : t.data) v = normal(rng);
    }
    if (llmc::llm::getParamAttr(forward, arg.getArgNumber()))
      params.push_back(arg.getArgNumber());
    args.push_back(std::move(t));
  }
  auto lossAt = [&](const std::vector<RefTensor> &a) {
    FailureOr<std::vector<RefTensor>> r = llmc::interpret(forward, a);
    EXPECT_TRUE(succeeded(r));
    return succeeded(r) ? (*r)[0].data.at(0) : NAN;
  };
  FailureOr<std::vector<RefTensor>> grads = llmc::interpret(grad, args);
  ASSERT_TRUE(succeeded(grads));
  EXPECT_NEAR((*grads)[0].data.at(0), lossAt(args), 1e-12) << "@grad's loss differs";

  const double h = 1e-5;
  for (size_t p = 0; p < params.size(); ++p) {
    const RefTensor &analytic = (*grads)[p + 1];
    RefTensor numeric = analytic;
    std::vector<RefTensor> shifted = args;
    for (size_t i = 0; i < numeric.data.size(); ++i) {
      double saved = shifted[params[p]].data[i];
      shifted[params[p]].data[i] = saved + h;
      double up = lossAt(shifted);
      shifted[params[p]].data[i] = saved - h;
      double down = lossAt(shifted);
      shifted[params[p]].data[i] = saved;
      numeric.data[i] = (up - down) / (2 * h);
    }
    double diff = 0, ref = 0;
    for (size_t i = 0; i < numeric.data.size(); ++i) {
      diff += std::pow(analytic.data[i] - numeric.data[i], 2);
      ref += std::pow(numeric.data[i], 2);
    }
    double rel = std::sqrt(diff) / std::max(std::sqrt(ref), 1e-12);
    EXPECT_LT(rel, tolerance) << "gradient of parameter " << p << " (argument "
                              << params[p] << "): relative error " << rel;
  }
}

/// `loss = Σ y ⊙ r` for a result `%y` of type `yType`, appended to `ops`.
std::string projected(const std::string &args, const std::string &ops,
                      const std::string &yType) {
  return "func.func @forward(" + args + ", %r: " + yType + ") -> tensor<f32> {\n" + ops +
         "\n  %p = llm.mul %y, %r : " + yType + ", " + yType +
         "\n  %l = llm.reduce_sum %p : " + yType + " to tensor<f32>\n  return %l : tensor<f32>\n}";
}

std::string param(const std::string &name, const std::string &type) {
  return "%" + name + ": " + type + " {llm.param = #llm.param<name = \"" + name +
         "\", init = \"normal\", scale = 1.0>}";
}

std::string intArg(const std::string &name, const std::string &type, int range) {
  return "%" + name + ": " + type + " {test.range = " + std::to_string(range) + " : i64}";
}

TEST(VJP, Matmul) {
  checkGradients(projected(param("a", "tensor<3x4xf32>") + ", " + param("b", "tensor<4x5xf32>"),
                           "  %y = llm.matmul %a, %b : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>",
                           "tensor<3x5xf32>"));
}

TEST(VJP, MatmulTransposes) {
  for (const char *attrs : {"{transpose_a}", "{transpose_b}", "{transpose_a, transpose_b}"}) {
    std::string a = std::string(attrs).find("transpose_a") != std::string::npos ? "tensor<4x3xf32>" : "tensor<3x4xf32>";
    std::string b = std::string(attrs).find("transpose_b") != std::string::npos ? "tensor<5x4xf32>" : "tensor<4x5xf32>";
    SCOPED_TRACE(attrs);
    checkGradients(projected(param("a", a) + ", " + param("b", b),
                             "  %y = llm.matmul %a, %b " + std::string(attrs) + " : " + a + ", " + b + " -> tensor<3x5xf32>",
                             "tensor<3x5xf32>"));
  }
}

TEST(VJP, MatmulBatched) {
  checkGradients(projected(param("a", "tensor<2x3x4xf32>") + ", " + param("b", "tensor<2x5x4xf32>"),
                           "  %y = llm.matmul %a, %b {transpose_b} : tensor<2x3x4xf32>, tensor<2x5x4xf32> -> tensor<2x3x5xf32>",
                           "tensor<2x3x5xf32>"));
  checkGradients(projected(param("a", "tensor<2x4x3xf32>") + ", " + param("b", "tensor<2x4x5xf32>"),
                           "  %y = llm.matmul %a, %b {transpose_a} : tensor<2x4x3xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xf32>",
                           "tensor<2x3x5xf32>"));
}

TEST(VJP, MatmulSharedWeight) {
  checkGradients(projected(param("x", "tensor<2x3x4xf32>") + ", " + param("w", "tensor<4x5xf32>"),
                           "  %y = llm.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>",
                           "tensor<2x3x5xf32>"));
  checkGradients(projected(param("x", "tensor<2x3x4xf32>") + ", " + param("w", "tensor<5x4xf32>"),
                           "  %y = llm.matmul %x, %w {transpose_b} : tensor<2x3x4xf32>, tensor<5x4xf32> -> tensor<2x3x5xf32>",
                           "tensor<2x3x5xf32>"));
}

TEST(VJP, AddMulScaleWithBroadcast) {
  checkGradients(projected(param("x", "tensor<2x3x4xf32>") + ", " + param("b", "tensor<4xf32>"),
                           "  %s = llm.add %x, %b : tensor<2x3x4xf32>, tensor<4xf32>\n"
                           "  %m = llm.mul %s, %b : tensor<2x3x4xf32>, tensor<4xf32>\n"
                           "  %y = llm.scale %m {factor = -1.5 : f64} : tensor<2x3x4xf32>",
                           "tensor<2x3x4xf32>"));
}

TEST(VJP, Activations) {
  for (const char *op : {"gelu", "silu", "sigmoid"}) {
    SCOPED_TRACE(op);
    checkGradients(projected(param("x", "tensor<3x7xf32>"),
                             std::string("  %y = llm.") + op + " %x : tensor<3x7xf32>",
                             "tensor<3x7xf32>"));
  }
  checkGradients(projected(param("g", "tensor<3x7xf32>") + ", " + param("u", "tensor<3x7xf32>"),
                           "  %y = llm.swiglu %g, %u : tensor<3x7xf32>", "tensor<3x7xf32>"));
  // Gemma 2's MLP and final logits.
  checkGradients(projected(param("g", "tensor<3x7xf32>") + ", " + param("u", "tensor<3x7xf32>"),
                           "  %y = llm.geglu %g, %u : tensor<3x7xf32>", "tensor<3x7xf32>"));
  checkGradients(projected(param("x", "tensor<3x7xf32>"),
                           "  %y = llm.softcap %x {cap = 0.75 : f64} : tensor<3x7xf32>",
                           "tensor<3x7xf32>"));
}

TEST(VJP, DropoutAndCast) {
  checkGradients(projected(param("x", "tensor<4x16xf32>"),
                           "  %d = llm.dropout %x {rate = 0.25 : f64, seed = 3 : i64} : tensor<4x16xf32>\n"
                           "  %c = llm.cast %d : tensor<4x16xf32> to tensor<4x16xbf16>\n"
                           "  %y = llm.cast %c : tensor<4x16xbf16> to tensor<4x16xf32>",
                           "tensor<4x16xf32>"));
}

TEST(VJP, DropoutOfAPieceUsesGlobalIndices) {
  checkGradients(projected(param("x", "tensor<2x3x8xf32>"),
                           "  %y = llm.dropout %x {rate = 0.4 : f64, seed = 5 : i64, "
                           "global_shape = array<i64: 4, 6, 8>, offsets = array<i64: 2, 3, 0>} "
                           ": tensor<2x3x8xf32>",
                           "tensor<2x3x8xf32>"));
}

TEST(VJP, Norms) {
  checkGradients(projected(param("x", "tensor<2x3x8xf32>") + ", " + param("g", "tensor<8xf32>") +
                               ", " + param("b", "tensor<8xf32>"),
                           "  %y = llm.layernorm %x, %g, %b {epsilon = 1.0e-5 : f64} : tensor<2x3x8xf32>, tensor<8xf32>",
                           "tensor<2x3x8xf32>"));
  checkGradients(projected(param("x", "tensor<2x3x8xf32>") + ", " + param("g", "tensor<8xf32>"),
                           "  %y = llm.rmsnorm %x, %g {epsilon = 1.0e-5 : f64} : tensor<2x3x8xf32>, tensor<8xf32>",
                           "tensor<2x3x8xf32>"));
  checkGradients(projected(param("x", "tensor<2x3x8xf32>") + ", " + param("g", "tensor<8xf32>"),
                           "  %y = llm.rmsnorm %x, %g {epsilon = 1.0e-5 : f64, unit_offset} : "
                           "tensor<2x3x8xf32>, tensor<8xf32>",
                           "tensor<2x3x8xf32>"));
}

TEST(VJP, Embedding) {
  checkGradients(projected(param("t", "tensor<11x6xf32>") + ", " + intArg("ids", "tensor<2x5xi32>", 11),
                           "  %y = llm.embedding %t, %ids : tensor<11x6xf32>, tensor<2x5xi32>",
                           "tensor<2x5x6xf32>"));
}

TEST(VJP, EmbeddingVocabularyShard) {
  // Rows [4, 9) of an 11-row vocabulary: ids of other rows contribute nothing.
  checkGradients(projected(param("t", "tensor<5x6xf32>") + ", " + intArg("ids", "tensor<3x7xi32>", 11),
                           "  %y = llm.embedding %t, %ids {row_offset = 4 : i64, vocab_size = 11 : i64} "
                           ": tensor<5x6xf32>, tensor<3x7xi32>",
                           "tensor<3x7x6xf32>"));
}

TEST(VJP, Rope) {
  checkGradients(projected(param("x", "tensor<2x5x3x8xf32>"),
                           "  %y = llm.rope %x {theta = 100.0 : f64} : tensor<2x5x3x8xf32>",
                           "tensor<2x5x3x8xf32>"));
}

TEST(VJP, RopeLlama3Scaling) {
  // D = 8, θ = 100: one pair kept, one blended, two stretched.
  checkGradients(projected(param("x", "tensor<2x5x3x8xf32>"),
                           "  %y = llm.rope %x {theta = 100.0 : f64, scaling_factor = 4.0 : f64, "
                           "low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, "
                           "original_max_positions = 40 : i64} : tensor<2x5x3x8xf32>",
                           "tensor<2x5x3x8xf32>"));
}

TEST(VJP, RopeGivenPositions) {
  checkGradients(projected(param("x", "tensor<2x5x3x8xf32>") + ", " +
                               intArg("pos", "tensor<2x5xi32>", 5),
                           "  %y = llm.rope %x positions %pos : tensor<2x5xi32> {theta = 100.0 : f64} "
                           ": tensor<2x5x3x8xf32>",
                           "tensor<2x5x3x8xf32>"));
}

TEST(VJP, AttentionCausalMultiHead) {
  std::string q = "tensor<2x5x2x4xf32>";
  checkGradients(projected(param("q", q) + ", " + param("k", q) + ", " + param("v", q),
                           "  %y, %lse = llm.attention %q, %k, %v {causal, scale = 0.5 : f64} : " + q + ", " + q,
                           q));
}

// Gemma 2: scores soft-capped (a small cap, so tanh bends), windowed.
TEST(VJP, AttentionSoftcapWindow) {
  std::string q = "tensor<1x6x4x4xf32>", k = "tensor<1x6x2x4xf32>";
  checkGradients(projected(param("q", q) + ", " + param("k", k) + ", " + param("v", k),
                           "  %y, %lse = llm.attention %q, %k, %v {causal, scale = 0.5 : f64, "
                           "softcap = 0.4 : f64, window = 3 : i64} : " +
                               q + ", " + k,
                           q));
}

TEST(VJP, AttentionGroupedQueryNonCausal) {
  std::string q = "tensor<1x6x4x4xf32>", k = "tensor<1x6x2x4xf32>";
  checkGradients(projected(param("q", q) + ", " + param("k", k) + ", " + param("v", k),
                           "  %y, %lse = llm.attention %q, %k, %v {scale = 0.5 : f64} : " + q + ", " + k,
                           q));
}

TEST(VJP, AttentionMultiQuerySegments) {
  std::string q = "tensor<2x6x3x4xf32>", k = "tensor<2x6x1x4xf32>";
  checkGradients(projected(param("q", q) + ", " + param("k", k) + ", " + param("v", k) + ", " +
                               intArg("seg", "tensor<2x6xi32>", 2),
                           "  %y, %lse = llm.attention %q, %k, %v segments %seg : tensor<2x6xi32> {causal, scale = 0.5 : f64} : " + q + ", " + k,
                           q));
}

TEST(VJP, CrossEntropy) {
  checkGradients("func.func @forward(" + param("x", "tensor<2x3x7xf32>") + ", " +
                 intArg("t", "tensor<2x3xi32>", 7) + ") -> tensor<f32> {\n"
                 "  %l = llm.cross_entropy %x, %t : tensor<2x3x7xf32>, tensor<2x3xi32>\n"
                 "  return %l : tensor<f32>\n}");
}

TEST(VJP, CrossEntropyIgnoreIndex) {
  // Targets in [0, 3): ignore_index = 2 drops about a third of the positions.
  checkGradients("func.func @forward(" + param("x", "tensor<4x5x3xf32>") + ", " +
                 intArg("t", "tensor<4x5xi32>", 3) + ") -> tensor<f32> {\n"
                 "  %l = llm.cross_entropy %x, %t {ignore_index = 2 : i64} : tensor<4x5x3xf32>, tensor<4x5xi32>\n"
                 "  return %l : tensor<f32>\n}");
}

// The pieces of the vocabulary-parallel loss, each with every operand free.
TEST(VJP, CrossEntropyPartial) {
  std::string rows = "tensor<2x3xf32>";
  checkGradients("func.func @forward(" + param("x", "tensor<2x3x5xf32>") + ", " + param("m", rows) +
                 ", " + intArg("t", "tensor<2x3xi32>", 12) + ", %r1: " + rows + ", %r2: " + rows +
                 ") -> tensor<f32> {\n"
                 "  %s, %tl = llm.cross_entropy_partial %x, %t, %m {class_offset = 3 : i64, "
                 "num_classes = 12 : i64} : tensor<2x3x5xf32>, tensor<2x3xi32>, " + rows + "\n"
                 "  %a = llm.mul %s, %r1 : " + rows + ", " + rows + "\n"
                 "  %b = llm.mul %tl, %r2 : " + rows + ", " + rows + "\n"
                 "  %c = llm.add %a, %b : " + rows + ", " + rows + "\n"
                 "  %l = llm.reduce_sum %c : " + rows + " to tensor<f32>\n"
                 "  return %l : tensor<f32>\n}");
}

TEST(VJP, CrossEntropyFinish) {
  // sumexp must be positive: it comes from a partial of free logits.
  std::string rows = "tensor<2x3xf32>";
  checkGradients("func.func @forward(" + param("x", "tensor<2x3x4xf32>") + ", " +
                 param("m0", rows) + ", " + param("m1", rows) + ", " + param("tl", rows) + ", " +
                 intArg("t", "tensor<2x3xi32>", 3) + ") -> tensor<f32> {\n"
                 "  %s, %unused = llm.cross_entropy_partial %x, %t, %m0 {num_classes = 4 : i64, "
                 "ignore_index = 2 : i64} : tensor<2x3x4xf32>, tensor<2x3xi32>, " + rows + "\n"
                 "  %l = llm.cross_entropy_finish %s, %m1, %tl, %t {ignore_index = 2 : i64} : " +
                 rows + ", tensor<2x3xi32>\n"
                 "  return %l : tensor<f32>\n}");
}

// Composed as the tensor-parallel pass composes them (one shard), the pieces
// give cross_entropy's value, and gradient through the stop_gradient shift.
TEST(VJP, VocabularyParallelLossIsCrossEntropy) {
  std::string body = "func.func @forward(" + param("x", "tensor<2x3x7xf32>") + ", " +
                     intArg("t", "tensor<2x3xi32>", 7) + ") -> tensor<f32> {\n"
                     "  %m = llm.reduce_max %x : tensor<2x3x7xf32> -> tensor<2x3xf32>\n"
                     "  %c = llm.stop_gradient %m : tensor<2x3xf32>\n"
                     "  %s, %tl = llm.cross_entropy_partial %x, %t, %c {num_classes = 7 : i64} : "
                     "tensor<2x3x7xf32>, tensor<2x3xi32>, tensor<2x3xf32>\n"
                     "  %l = llm.cross_entropy_finish %s, %c, %tl, %t : tensor<2x3xf32>, tensor<2x3xi32>\n"
                     "  return %l : tensor<f32>\n}";
  checkGradients(body);
  MLIRContext context;
  llmc::prepareContext(context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(body, &context);
  ASSERT_TRUE(module);
  RefTensor x = RefTensor::zeros({2, 3, 7});
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = std::sin(1.7 * i) * 3.0;
  RefTensor t{{2, 3}, {0, 6, 3, 2, 5, 1}};
  FailureOr<std::vector<RefTensor>> loss =
      llmc::interpret(module->lookupSymbol<func::FuncOp>("forward"), {x, t});
  ASSERT_TRUE(succeeded(loss));
  EXPECT_NEAR((*loss)[0].data[0], llmc::ref::crossEntropy(x, t, -1).data[0], 1e-12);
}

TEST(VJP, ShapeOps) {
  checkGradients(projected(param("x", "tensor<2x3x4xf32>"),
                           "  %rs = llm.reshape %x : tensor<2x3x4xf32> to tensor<6x4xf32>\n"
                           "  %t = llm.transpose %rs {permutation = array<i64: 1, 0>} : tensor<6x4xf32> to tensor<4x6xf32>\n"
                           "  %s = llm.slice %t {offsets = array<i64: 1, 2>} : tensor<4x6xf32> to tensor<2x3xf32>\n"
                           "  %pd = llm.pad %s {offsets = array<i64: 0, 1>} : tensor<2x3xf32> to tensor<2x5xf32>\n"
                           "  %y = llm.concat %pd, %s {dim = 1 : i64} : tensor<2x5xf32>, tensor<2x3xf32> -> tensor<2x8xf32>",
                           "tensor<2x8xf32>"));
}

TEST(VJP, ReduceSum) {
  checkGradients(projected(param("x", "tensor<3x4xf32>"),
                           "  %s = llm.reduce_sum %x : tensor<3x4xf32> to tensor<4xf32>\n"
                           "  %y = llm.mul %s, %s : tensor<4xf32>, tensor<4xf32>",
                           "tensor<4xf32>"));
}

TEST(VJP, BlockWithResidualAndReuse) {
  // A parameter used twice and a value with two uses: gradients accumulate.
  checkGradients(projected(param("x", "tensor<2x3x4xf32>") + ", " + param("w", "tensor<4x4xf32>"),
                           "  %y = llm.block \"h.0\" -> tensor<2x3x4xf32> {\n"
                           "    %a = llm.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>\n"
                           "    %b = llm.matmul %a, %w {transpose_b} : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>\n"
                           "    %c = llm.add %a, %b : tensor<2x3x4xf32>, tensor<2x3x4xf32>\n"
                           "    llm.yield %c : tensor<2x3x4xf32>\n  }",
                           "tensor<2x3x4xf32>"));
}

/// Fake quantization of a parameter x with fixed ranges: the gradient of
/// loss = Σ fake_quant(x)·r through autodiff and the interpreter.
struct FakeQuantCase {
  std::vector<double> grad;    ///< from @grad
  std::vector<double> numeric; ///< central differences of @forward
};

FakeQuantCase fakeQuantGradient(const std::string &scheme, std::vector<double> x,
                                std::vector<double> range, std::vector<double> r) {
  MLIRContext context;
  llmc::prepareContext(context);
  int64_t n = static_cast<int64_t>(x.size()), g = static_cast<int64_t>(range.size()) / 2;
  std::string xt = "tensor<" + std::to_string(n) + "xf32>";
  std::string rt = "tensor<" + std::to_string(g) + "x2xf32>";
  std::string text = "func.func @forward(" + param("x", xt) + ", %range: " + rt + ", %r: " + xt +
                     ") -> tensor<f32> {\n  %y = qat.fake_quant %x range %range {scheme = " +
                     scheme + "} : " + xt + ", " + rt + "\n  %p = llm.mul %y, %r : " + xt + ", " +
                     xt + "\n  %l = llm.reduce_sum %p : " + xt +
                     " to tensor<f32>\n  return %l : tensor<f32>\n}";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  EXPECT_TRUE(module) << text;
  PassManager pm(&context);
  pm.addPass(llmc::createAutodiff());
  EXPECT_TRUE(succeeded(pm.run(*module)));
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  auto grad = module->lookupSymbol<func::FuncOp>("grad");
  auto tensor = [](std::vector<int64_t> shape, std::vector<double> data) {
    RefTensor t = RefTensor::zeros(std::move(shape));
    t.data = std::move(data);
    return t;
  };
  std::vector<RefTensor> args = {tensor({n}, x), tensor({g, 2}, range), tensor({n}, r)};
  FakeQuantCase result;
  result.numeric.resize(x.size());
  FailureOr<std::vector<RefTensor>> grads = llmc::interpret(grad, args);
  EXPECT_TRUE(succeeded(grads));
  if (succeeded(grads))
    result.grad = (*grads)[1].data;
  // Central differences of the forward loss itself.
  const double h = 1e-4;
  for (int64_t i = 0; i < n; ++i) {
    auto loss = [&](double xi) {
      std::vector<RefTensor> a = args;
      a[0].data[i] = xi;
      return (*llmc::interpret(forward, a))[0].data.at(0);
    };
    result.numeric[i] = (loss(x[i] + h) - loss(x[i] - h)) / (2 * h);
  }
  return result;
}

// The straight-through estimator: the gradient passes unchanged where x is
// representable and is zero where it was clipped. Where fake_quant is
// differentiable — outside the clipping range, where it is constant, and
// away from rounding steps — finite differences agree with it exactly.
TEST(VJP, FakeQuantIsStraightThroughAndZeroWhereClipped) {
  // int8 symmetric, range [-1, 1] (scale 1/127): 1.5 and -2 clip.
  std::vector<double> x = {0.31, -0.52, 1.5, -2.0, 0.004, 0.9};
  std::vector<double> r = {0.7, -1.3, 2.1, 0.4, -0.9, 1.1};
  FakeQuantCase c = fakeQuantGradient("#qat.scheme<format = \"int8\">", x, {1.0, 1.0}, r);
  ASSERT_EQ(c.grad.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bool clipped = std::fabs(x[i]) > 1.0;
    EXPECT_EQ(c.grad[i], clipped ? 0.0 : r[i]) << "element " << i;
    if (clipped) {
      EXPECT_NEAR(c.numeric[i], 0.0, 1e-9) << "finite difference of a clipped element " << i;
    }
  }
}

// At the boundaries: the range's ends are representable (gradient passes),
// the next representable steps beyond are clipped. Asymmetric int4 with
// range [-0.5, 1.0]: scale 1.5/15 = 0.1, zero point −3 → levels −0.5 ... 1.0.
TEST(VJP, FakeQuantBoundaries) {
  std::vector<double> x = {-0.5, 1.0, -0.56, 1.06, -0.54, 1.04};
  std::vector<double> r(x.size(), 1.0);
  FakeQuantCase c =
      fakeQuantGradient("#qat.scheme<format = \"int4\", symmetric = false>", x, {0.5, 1.0}, r);
  // −0.54 and 1.04 round back onto the grid's ends (q within [qmin, qmax]);
  // −0.56 and 1.06 round one step beyond: clipped.
  std::vector<double> expected = {1, 1, 0, 0, 1, 1};
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(c.grad[i], expected[i]) << "x = " << x[i];
  // Per-channel fp8: each group its own range; nf4 clips beyond ±absmax.
  FakeQuantCase f = fakeQuantGradient(
      "#qat.scheme<format = \"nf4\", granularity = \"block\", block = 2>", {0.9, -1.2, 3.0, 2.9},
      {1.0, 1.0, 0.0, 3.0}, {1, 1, 1, 1});
  EXPECT_EQ(f.grad, (std::vector<double>{1, 0, 1, 1}));
}

// Outlier columns: fake_quant of a 2x3 parameter with a fixed int8 range
// [-1, 1] and per-column ranges whose last column reaches 7 > 6. That column
// is the identity — its gradient passes whole, even for −2, which the range
// would clip — while the other columns keep the straight-through rule (1.5
// in column 1 is clipped: zero).
TEST(VJP, FakeQuantOutlierColumnsPassTheGradientWhole) {
  MLIRContext context;
  llmc::prepareContext(context);
  std::string scheme = "#qat.scheme<format = \"int8\", outlier = 6.0>";
  std::string text =
      "func.func @forward(" + param("x", "tensor<2x3xf32>") +
      ", %range: tensor<1x2xf32>, %columns: tensor<3x2xf32>, %r: tensor<2x3xf32>) -> "
      "tensor<f32> {\n  %y = qat.fake_quant %x range %range columns %columns {scheme = " +
      scheme +
      "} : tensor<2x3xf32>, tensor<1x2xf32>, tensor<3x2xf32>\n"
      "  %p = llm.mul %y, %r : tensor<2x3xf32>, tensor<2x3xf32>\n"
      "  %l = llm.reduce_sum %p : tensor<2x3xf32> to tensor<f32>\n  return %l : tensor<f32>\n}";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module) << text;
  PassManager pm(&context);
  pm.addPass(llmc::createAutodiff());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  auto tensor = [](std::vector<int64_t> shape, std::vector<double> data) {
    RefTensor t = RefTensor::zeros(std::move(shape));
    t.data = std::move(data);
    return t;
  };
  std::vector<double> x = {0.3, 1.5, -2.0, -0.5, 0.2, 7.0};
  std::vector<double> r = {0.7, -1.3, 2.1, 0.4, -0.9, 1.1};
  // x's own per-column ranges [−min, max].
  std::vector<RefTensor> args = {tensor({2, 3}, x), tensor({1, 2}, {1.0, 1.0}),
                                 tensor({3, 2}, {0.5, 0.3, -0.2, 1.5, 2.0, 7.0}),
                                 tensor({2, 3}, r)};
  FailureOr<std::vector<RefTensor>> grads =
      llmc::interpret(module->lookupSymbol<func::FuncOp>("grad"), args);
  ASSERT_TRUE(succeeded(grads));
  std::vector<double> expected = {r[0], 0.0, r[2], r[3], r[4], r[5]};
  EXPECT_EQ((*grads)[1].data, expected);
  // In the outlier column fake_quant is the identity: finite differences
  // give r exactly where the gradient passed.
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  for (int64_t i : {2, 5}) {
    auto loss = [&](double xi) {
      std::vector<RefTensor> a = args;
      a[0].data[i] = xi;
      return (*llmc::interpret(forward, a))[0].data.at(0);
    };
    const double h = 1e-4;
    EXPECT_NEAR((loss(x[i] + h) - loss(x[i] - h)) / (2 * h), r[i], 1e-9) << "element " << i;
  }
}

/// A mixture-of-experts MLP of 6 tokens over 4 experts (top 2):
/// route, dispatch, the experts' up projection (stacked weights), SiLU,
/// their down projection, combine by the routing weights.
/// `router` is the moe_route's extra attributes and bias (e.g. a sigmoid
/// router's); the bias, when it names one, is an argument (not a param).
std::string moeLayer(bool normalize, bool transposeB, const std::string &router = "") {
  auto stacked = [&](int64_t out, int64_t in) {
    return transposeB ? "tensor<4x" + std::to_string(out) + "x" + std::to_string(in) + "xf32>"
                      : "tensor<4x" + std::to_string(in) + "x" + std::to_string(out) + "xf32>";
  };
  const bool biased = router.find("bias") != std::string::npos;
  std::string args = param("x", "tensor<6x3xf32>") + ", " + param("router", "tensor<6x4xf32>") +
                     ", " + param("u", stacked(5, 3)) + ", " + param("d", stacked(3, 5)) +
                     (biased ? ", %b: tensor<4xf32>" : "");
  std::string attrs = transposeB ? " {transpose_b}" : "";
  std::string ops =
      std::string("  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %router") +
      (biased ? " bias %b" : "") + " {top_k = 2 : i64" + (normalize ? ", normalize" : "") +
      (router.empty() ? "" : ", " + router.substr(biased ? 5 : 0)) + "} : tensor<6x4xf32>" +
      (biased ? " bias tensor<4xf32>" : "") + "\n" +
      "  %xs = llm.moe_dispatch %x, %pos : tensor<6x3xf32>, tensor<6x2xi32>\n"
      "  %h = llm.grouped_matmul %xs, %off, %u" +
      attrs + " : tensor<12x3xf32>, tensor<5xi32>, " + stacked(5, 3) + "\n" +
      "  %a = llm.silu %h : tensor<12x5xf32>\n"
      "  %ys = llm.grouped_matmul %a, %off, %d" +
      attrs + " : tensor<12x5xf32>, tensor<5xi32>, " + stacked(3, 5) + "\n" +
      "  %y = llm.moe_combine %ys, %pos weights %w : tensor<12x3xf32>, tensor<6x2xi32> weights "
      "tensor<6x2xf32>";
  return projected(args, ops, "tensor<6x3xf32>");
}

TEST(VJP, MixtureOfExperts) {
  for (bool normalize : {true, false})
    for (bool transposeB : {true, false}) {
      SCOPED_TRACE(std::string(normalize ? "normalize" : "softmax weights") +
                   (transposeB ? ", [F, K] weights" : ", [K, F] weights"));
      checkGradients(moeLayer(normalize, transposeB));
    }
}

/// Sigmoid routers (DeepSeek-V3): each chosen weight is its own σ, coupled
/// to the others only by the renormalisation; the bias chooses (so the
/// choice is not the logits' top-k) and takes no gradient; the scale
/// multiplies the weights.
TEST(VJP, MixtureOfExpertsSigmoidRouter) {
  for (bool normalize : {true, false})
    for (const char *router : {"score = \"sigmoid\"", "bias score = \"sigmoid\", scale = 2.5 : f64",
                               "score = \"softmax\", scale = 0.5 : f64"}) {
      SCOPED_TRACE(std::string(router) + (normalize ? ", normalize" : ""));
      checkGradients(moeLayer(normalize, true, router));
    }
}

/// loss = router_loss(prob_sum, counts, z_sum) + Σ weights ⊙ q, through a
/// dispatch that scales the copies (combine's transpose as a forward op),
/// routed by `route` (which defines %w, %pos, %ps, %cnt, %z from %router
/// and the arguments `extraArgs` adds).
static std::string auxiliaryLossProgram(const std::string &extraArgs, const std::string &route) {
  return "func.func @forward(" + param("router", "tensor<5x4xf32>") + ", " +
         param("x", "tensor<5x3xf32>") + ", %q: tensor<10x3xf32>" + extraArgs +
         ") -> tensor<f32> {\n" + route +
         "  %xs = llm.moe_dispatch %x, %pos weights %w : tensor<5x3xf32>, tensor<5x2xi32> weights "
         "tensor<5x2xf32>\n"
         "  %b = llm.router_loss %ps, %cnt, %z {aux_scale = 0.7 : f64, z_scale = 0.3 : f64} : "
         "tensor<4xf32>, tensor<4xf32>\n"
         "  %d = llm.mul %xs, %q : tensor<10x3xf32>, tensor<10x3xf32>\n"
         "  %e2 = llm.reduce_sum %d : tensor<10x3xf32> to tensor<f32>\n"
         "  %l = llm.add %b, %e2 : tensor<f32>, tensor<f32>\n"
         "  return %l : tensor<f32>\n}";
}

TEST(VJP, MixtureOfExpertsSigmoidAuxiliaryLosses) {
  // As below with a sigmoid router and a bias: prob_sum adds the scores
  // normalised over the experts, z_sum the logits' logsumexp².
  checkGradients(auxiliaryLossProgram(
      ", %bias: tensor<4xf32>",
      "  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %router bias %bias {top_k = 2 : i64, "
      "normalize, score = \"sigmoid\", scale = 1.5 : f64} : tensor<5x4xf32> bias tensor<4xf32>\n"));
}

TEST(VJP, MixtureOfExpertsAuxiliaryLosses) {
  checkGradients(auxiliaryLossProgram(
      "", "  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %router {top_k = 2 : i64} : "
          "tensor<5x4xf32>\n"));
}

/// A mixture of experts of 6 tokens over 4 experts (top 2) laid out as
/// expert parallelism lays it out: the copies packed into `ranks` slots of
/// `capacity`·El rows (rows past an expert's capacity dropped), regrouped
/// by expert, an elementwise "expert" (SiLU times a parameter of the
/// grouped rows' shape, so each row's gradient depends on where regroup
/// put it), ungrouped, unpacked and combined. The all-to-all between pack
/// and regroup (and back) is the identity: with one rank it is, and with
/// two every source's slot is taken to be the one this rank packed for
/// it, which exercises the source-major to expert-major reordering with
/// After a pack of 12 routed copies (6 tokens, top 2) into `packed`
/// slots with `kept` counts: regroup, an elementwise "expert" (SiLU times
/// %s), ungroup, unpack and combine by the routing weights %w.
std::string expertsAfterPack(const std::string &packed, const std::string &kept) {
  return "  %g, %loff = llm.moe_regroup %packed, %kept : " + packed + ", " + kept + "\n" +
         "  %a = llm.silu %g : " + packed + "\n" + "  %o = llm.mul %a, %s : " + packed + ", " +
         packed + "\n" + "  %back = llm.moe_ungroup %o, %kept : " + packed + ", " + kept + "\n" +
         "  %ys = llm.moe_unpack %back, %off, %kept : " + packed + ", tensor<5xi32>, " + kept +
         " -> tensor<12x3xf32>\n"
         "  %y = llm.moe_combine %ys, %pos weights %w : tensor<12x3xf32>, tensor<6x2xi32> weights "
         "tensor<6x2xf32>";
}

/// the same shapes.
std::string exchangeLayer(int64_t ranks, int64_t capacity) {
  const int64_t local = 4 / ranks, rows = ranks * local * capacity;
  const std::string packed = "tensor<" + std::to_string(rows) + "x3xf32>";
  const std::string kept =
      "tensor<" + std::to_string(ranks) + "x" + std::to_string(local) + "xi32>";
  std::string args = param("x", "tensor<6x3xf32>") + ", " + param("router", "tensor<6x4xf32>") +
                     ", " + param("s", packed);
  std::string ops =
      "  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %router {top_k = 2 : i64} : "
      "tensor<6x4xf32>\n"
      "  %xs = llm.moe_dispatch %x, %pos : tensor<6x3xf32>, tensor<6x2xi32>\n"
      "  %packed, %kept = llm.moe_pack %xs, %off {capacity = " +
      std::to_string(capacity) + " : i64} : tensor<12x3xf32>, tensor<5xi32> -> " + packed + ", " +
      kept + "\n" + expertsAfterPack(packed, kept);
  return projected(args, ops, "tensor<6x3xf32>");
}

TEST(VJP, MixtureOfExpertsExchange) {
  // Capacity 2 of 3 copies per expert on average drops some; 12 drops none.
  for (int64_t ranks : {1, 2})
    for (int64_t capacity : {2, 12}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, capacity " + std::to_string(capacity));
      checkGradients(exchangeLayer(ranks, capacity));
    }
}

TEST(VJP, MixtureOfExpertsExchangeTransposes) {
  // Each op alone on a parameter: pack with a capacity dropping rows,
  // unpack after it, regroup and ungroup of given counts (each source's
  // slot of 4 rows holding at most 4).
  const std::string xs = param("xs", "tensor<12x3xf32>");
  auto route = [](const std::string &body) {
    return "  %w, %e, %pos, %off2, %ps, %cnt, %z = llm.moe_route %router {top_k = 2 : i64} : "
           "tensor<6x4xf32>\n" +
           body;
  };
  const std::string router = ", %router: tensor<6x4xf32>";
  checkGradients(
      projected(xs + router,
                route("  %y, %k = llm.moe_pack %xs, %off2 {capacity = 2 : i64} : tensor<12x3xf32>, "
                      "tensor<5xi32> -> tensor<8x3xf32>, tensor<2x2xi32>"),
                "tensor<8x3xf32>"));
  checkGradients(
      projected(param("slots", "tensor<8x3xf32>") + ", " + param("xs", "tensor<12x3xf32>") + router,
                route("  %q, %k = llm.moe_pack %xs, %off2 {capacity = 2 : i64} : tensor<12x3xf32>, "
                      "tensor<5xi32> -> tensor<8x3xf32>, tensor<2x2xi32>\n"
                      "  %y = llm.moe_unpack %slots, %off2, %k : tensor<8x3xf32>, tensor<5xi32>, "
                      "tensor<2x2xi32> -> tensor<12x3xf32>"),
                "tensor<12x3xf32>"));
  for (const char *op : {"moe_regroup", "moe_ungroup"}) {
    SCOPED_TRACE(op);
    const std::string result = std::string(op) == "moe_regroup" ? "%y, %bounds" : "%y";
    checkGradients(
        projected(param("recv", "tensor<8x3xf32>") + ", " + intArg("c", "tensor<2x2xi32>", 3),
                  "  " + result + " = llm." + op + " %recv, %c : tensor<8x3xf32>, tensor<2x2xi32>",
                  "tensor<8x3xf32>"));
  }
}

/// exchangeLayer's pack with the batch's capacity (4 per expert) over 3
/// ranks, this one second: the first rank routed [5, 5, 2, 0] rows to the
/// experts, using up experts 0 and 1 entirely and expert 2 in part; this
/// rank's own row is the route's counts, the last rank's anything (7s).
std::string batchCapacityLayer() {
  const std::string packed = "tensor<16x3xf32>", kept = "tensor<2x2xi32>";
  std::string args = param("x", "tensor<6x3xf32>") + ", " + param("router", "tensor<6x4xf32>") +
                     ", " + param("s", packed);
  std::string ops =
      "  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %router {top_k = 2 : i64} : "
      "tensor<6x4xf32>\n"
      "  %xs = llm.moe_dispatch %x, %pos : tensor<6x3xf32>, tensor<6x2xi32>\n"
      "  %used = llm.fill 5.0 : tensor<1x2xf32>\n"
      "  %part = llm.fill 2.0 : tensor<1x1xf32>\n"
      "  %none = llm.fill 0.0 : tensor<1x1xf32>\n"
      "  %first = llm.concat %used, %part, %none {dim = 1 : i64} : tensor<1x2xf32>, "
      "tensor<1x1xf32>, tensor<1x1xf32> -> tensor<1x4xf32>\n"
      "  %mine = llm.reshape %cnt : tensor<4xf32> to tensor<1x4xf32>\n"
      "  %last = llm.fill 7.0 : tensor<1x4xf32>\n"
      "  %gc = llm.concat %first, %mine, %last {dim = 0 : i64} : tensor<1x4xf32>, tensor<1x4xf32>, "
      "tensor<1x4xf32> -> tensor<3x4xf32>\n"
      "  %packed, %kept = llm.moe_pack %xs, %off group %gc {capacity = 4 : i64, group_position = "
      "array<i64: 1>} : tensor<12x3xf32>, tensor<5xi32> group tensor<3x4xf32> -> " +
      packed + ", " + kept + "\n" + expertsAfterPack(packed, kept);
  return projected(args, ops, "tensor<6x3xf32>");
}

TEST(VJP, MixtureOfExpertsExchangeWithTheBatchCapacity) {
  // The forward drops what the earlier rank used up; the gradient's pack
  // must drop the same rows (its group counts and position the forward's).
  for (uint64_t seed : {7, 8, 9}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    checkGradients(batchCapacityLayer(), 1e-6, seed);
  }
}

TEST(VJP, MixtureOfExpertsUnpackGradientRepeatsThePacksGroup) {
  // unpack's gradient is a pack with its pack's capacity, group counts,
  // group position and the rank offset that moves the position.
  MLIRContext context;
  llmc::prepareContext(context);
  std::string text =
      "dist.mesh @mesh axes [\"dp\"] shape [3]\n" +
      projected(param("slots", "tensor<8x3xf32>") + ", " + param("xs", "tensor<12x3xf32>") +
                    ", %off: tensor<5xi32>, %gc: tensor<3x4xf32>",
                "  %q, %k = llm.moe_pack %xs, %off group %gc {capacity = 2 : i64, group_position = "
                "array<i64: 0>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "
                "\"group_position\", index = 0, axes = [\"dp\"], stride = 1>]} : "
                "tensor<12x3xf32>, tensor<5xi32> group tensor<3x4xf32> -> tensor<8x3xf32>, "
                "tensor<2x2xi32>\n"
                "  %y = llm.moe_unpack %slots, %off, %k : tensor<8x3xf32>, tensor<5xi32>, "
                "tensor<2x2xi32> -> tensor<12x3xf32>",
                "tensor<12x3xf32>");
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module);
  PassManager pm(&context);
  pm.addPass(llmc::createAutodiff());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  llmc::llm::MoEPackOp forward, gradient;
  module->lookupSymbol<func::FuncOp>("grad").walk([&](llmc::llm::MoEPackOp pack) {
    (pack->hasAttr("llmc.backward") ? gradient : forward) = pack;
  });
  ASSERT_TRUE(forward && gradient);
  EXPECT_EQ(gradient.getGroupCounts(), forward.getGroupCounts());
  EXPECT_EQ(gradient.getCapacityAttr(), forward.getCapacityAttr());
  EXPECT_EQ(gradient.getGroupPositionAttr(), forward.getGroupPositionAttr());
  EXPECT_EQ(gradient->getAttr("dist.rank_offsets"), forward->getAttr("dist.rank_offsets"));
  EXPECT_TRUE(gradient->getAttr("dist.rank_offsets"));
}

/// The diagnostics of llmc-autodiff on `text`, which must fail.
std::string autodiffErrors(MLIRContext &context, const std::string &text) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  EXPECT_TRUE(module);
  if (!module)
    return "";
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    diagnostics += d.str();
    return success();
  });
  PassManager pm(&context);
  pm.addPass(llmc::createAutodiff());
  EXPECT_TRUE(failed(pm.run(*module)));
  return diagnostics;
}

TEST(VJP, MixtureOfExpertsUnpackNeedsItsPack) {
  MLIRContext context;
  llmc::prepareContext(context);
  std::string text =
      projected(param("slots", "tensor<8x3xf32>") + ", %off: tensor<5xi32>, %k: tensor<2x2xi32>",
                "  %y = llm.moe_unpack %slots, %off, %k : tensor<8x3xf32>, tensor<5xi32>, "
                "tensor<2x2xi32> -> tensor<12x3xf32>",
                "tensor<12x3xf32>");
  std::string diagnostics = autodiffErrors(context, text);
  EXPECT_NE(diagnostics.find("has a VJP only when its kept and offsets are an llm.moe_pack's"),
            std::string::npos)
      << diagnostics;
}

TEST(VJP, UnknownOpIsAnError) {
  MLIRContext context;
  llmc::prepareContext(context);
  std::string text = "func.func @forward(" + param("x", "tensor<4xf32>") +
                     ", %s: tensor<f32>) -> tensor<f32> {\n"
                     "  %g = llm.global_norm %x : tensor<4xf32>\n  return %g : tensor<f32>\n}";
  std::string diagnostics = autodiffErrors(context, text);
  EXPECT_NE(diagnostics.find("has no VJP rule"), std::string::npos) << diagnostics;
}

} // namespace
