//===- Inlining.cpp - straight-line functions -----------------------------===//
//
// Part of llmc: see Inlining.h.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/Inlining.h"
#include "passes/lib/EntryPoints.h"

#include "dialects/Annotations/Annotations.h"
#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace llmc;

void llmc::flattenBlocks(func::FuncOp func) {
  SmallVector<llm::BlockOp> blocks;
  // Post-order: inner blocks are flattened (and tagged) before outer ones.
  func.walk([&](llm::BlockOp block) { blocks.push_back(block); });
  for (llm::BlockOp block : blocks) {
    Block &body = block.getBody().front();
    auto yield = cast<llm::YieldOp>(body.getTerminator());
    for (Operation &op : body.without_terminator())
      if (!op.hasAttr(kBlockNameAttr))
        op.setAttr(kBlockNameAttr, block.getNameAttr());
    block.replaceAllUsesWith(yield.getValues());
    yield.erase();
    block->getBlock()->getOperations().splice(Block::iterator(block), body.getOperations());
    block.erase();
  }
}

LogicalResult llmc::inlineCalls(ModuleOp module, func::FuncOp func) {
  SmallVector<func::CallOp> calls;
  func.walk([&](func::CallOp call) { calls.push_back(call); });
  for (func::CallOp call : calls) {
    func::FuncOp callee = lookupFunc(module, call.getCallee());
    if (!callee || callee.isExternal())
      return call.emitOpError("cannot inline call to '")
             << call.getCallee() << "': no body in this module";
    IRMapping mapping;
    for (auto [arg, operand] : llvm::zip(callee.getArguments(), call.getOperands()))
      mapping.map(arg, operand);
    OpBuilder builder(call);
    for (Operation &op : callee.getBody().front().without_terminator()) builder.clone(op, mapping);
    auto ret = cast<func::ReturnOp>(callee.getBody().front().getTerminator());
    for (auto [result, value] : llvm::zip(call.getResults(), ret.getOperands()))
      result.replaceAllUsesWith(mapping.lookupOrDefault(value));
    call.erase();
  }
  return success();
}
