//===- InterpreterTest.cpp - the interpreter's op registry and its encoding ===//
//
// The reference interpreter evaluates an op through the evaluator its
// reference file registers under the op's name (kernels/reference/
// Evaluator.h). These tests hold the registry to the dialects (every op
// has an evaluator, or is structure the interpreter walks, or is listed as
// not interpreted), and the interpreter to its encoding of operands and
// attributes: absent optional operands, operand segments, unit and default
// attributes, and the error for an op without an evaluator.
//
//===----------------------------------------------------------------------===//

#include "compiler/Interpreter.h"
#include "compiler/Compiler.h"
#include "kernels/reference/Evaluator.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

using namespace mlir;
using llmc::ref::RefTensor;

namespace {

/// Ops the interpreter walks itself (regions and terminators).
const std::set<std::string> kStructural = {"llm.block", "llm.yield"};
/// Ops no IR-level test evaluates, so none has an evaluator yet.
const std::set<std::string> kNotInterpreted = {"llm.adamw8bit", "qat.dequantize_nf4"};

TEST(Interpreter, EveryLlmAndQatOpHasAnEvaluator) {
  MLIRContext context;
  llmc::prepareContext(context);
  context.loadAllAvailableDialects();
  int ops = 0;
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    std::string op = name.getStringRef().str();
    if (op.rfind("llm.", 0) != 0 && op.rfind("qat.", 0) != 0)
      continue;
    ++ops;
    if (kStructural.count(op) || kNotInterpreted.count(op)) {
      EXPECT_FALSE(llmc::ref::findEvaluator(op)) << op << " is listed but has an evaluator";
      continue;
    }
    EXPECT_TRUE(llmc::ref::findEvaluator(op))
        << op << " has no reference evaluator (LLMC_REGISTER_EVALUATOR in its "
        << "kernels/reference/<concept>.cpp)";
  }
  EXPECT_GE(ops, 60);
  for (const std::string &name : llmc::ref::evaluatorNames())
    EXPECT_TRUE(context.isOperationRegistered(name)) << "evaluator for unknown op " << name;
  for (const std::set<std::string> *listed : {&kStructural, &kNotInterpreted})
    for (const std::string &name : *listed)
      EXPECT_TRUE(context.isOperationRegistered(name)) << "listed op " << name << " is unknown";
}

/// Runs @f of `ir` on `args`.
FailureOr<std::vector<RefTensor>> run(MLIRContext &context, const std::string &ir,
                                      const std::vector<RefTensor> &args) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(ir, &context);
  if (!module)
    return failure();
  return llmc::interpret(module->lookupSymbol<func::FuncOp>("f"), args);
}

TEST(Interpreter, OptionalOperandsAndSegmentsReachTheReference) {
  MLIRContext context;
  llmc::prepareContext(context);
  // linear's operands x, w, bias?, residual? are told apart by their
  // segments: here a residual without a bias.
  const std::string ir = R"(
    func.func @f(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>, %r: tensor<2x2xf32>) -> tensor<2x2xf32> {
      %y = llm.linear %x, %w residual %r : tensor<2x3xf32>, tensor<3x2xf32> residual tensor<2x2xf32>
      return %y : tensor<2x2xf32>
    })";
  RefTensor x{{2, 3}, {1, 2, 3, 4, 5, 6}}, w{{3, 2}, {1, 0, 0, 1, 1, 1}},
      r{{2, 2}, {10, 20, 30, 40}};
  FailureOr<std::vector<RefTensor>> out = run(context, ir, {x, w, r});
  ASSERT_TRUE(succeeded(out));
  // x·w = [[4, 5], [10, 11]], plus the residual.
  EXPECT_EQ((*out)[0].data, (std::vector<double>{14, 25, 40, 51}));
}

TEST(Interpreter, UnitAndDefaultAttributes) {
  MLIRContext context;
  llmc::prepareContext(context);
  // transpose_b (a unit attribute) present; cross_entropy's ignore_index
  // left at the op's default (-1), so a target of -1 is ignored.
  const std::string ir = R"(
    func.func @f(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>, %t: tensor<2xi32>) -> (tensor<2x2xf32>, tensor<f32>) {
      %c = llm.matmul %a, %b {transpose_b} : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
      %l = llm.cross_entropy %c, %t : tensor<2x2xf32>, tensor<2xi32>
      return %c, %l : tensor<2x2xf32>, tensor<f32>
    })";
  RefTensor a{{2, 2}, {1, 2, 3, 4}}, b{{2, 2}, {1, 0, 1, 1}}, t{{2}, {0, -1}};
  FailureOr<std::vector<RefTensor>> out = run(context, ir, {a, b, t});
  ASSERT_TRUE(succeeded(out));
  EXPECT_EQ((*out)[0].data, (std::vector<double>{1, 3, 3, 7}));
  // Only row 0 counts: log(e^1 + e^3) - 1.
  EXPECT_NEAR((*out)[1].data[0], std::log(std::exp(1.0) + std::exp(3.0)) - 1.0, 1e-12);
}

} // namespace
