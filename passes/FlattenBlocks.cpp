//===- FlattenBlocks.cpp - inline llm.block regions -----------------------===//
//
// Autodiff and lowering work on straight-line code; the layer structure
// survives as the llm.block_name attribute on every op that was inside a
// block, which is all FSDP, recompute and pipelining need later.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Utils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace llmc {
#define GEN_PASS_DEF_FLATTENBLOCKS
#include "passes/Passes.h.inc"
} // namespace llmc

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
    block->getBlock()->getOperations().splice(Block::iterator(block),
                                              body.getOperations());
    block.erase();
  }
}

DictionaryAttr llmc::addShardLevel(MLIRContext *context, DictionaryAttr existing,
                                   RankedTensorType current, ArrayAttr axes, int64_t dim,
                                   int64_t blocks) {
  Builder b(context);
  SmallVector<Attribute> levels;
  Attribute global = b.getDenseI64ArrayAttr(current.getShape());
  if (existing) {
    global = existing.get("global_shape");
    if (auto old = existing.getAs<ArrayAttr>("levels"))
      levels.append(old.begin(), old.end());
  }
  levels.push_back(b.getDictionaryAttr({b.getNamedAttr("axes", axes),
                                        b.getNamedAttr("dim", b.getI64IntegerAttr(dim)),
                                        b.getNamedAttr("blocks", b.getI64IntegerAttr(blocks))}));
  return b.getDictionaryAttr(
      {b.getNamedAttr("global_shape", global), b.getNamedAttr("levels", b.getArrayAttr(levels))});
}

func::FuncOp llmc::lookupFunc(ModuleOp module, StringRef name) {
  return module.lookupSymbol<func::FuncOp>(name);
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
    for (auto [arg, operand] :
         llvm::zip(callee.getArguments(), call.getOperands()))
      mapping.map(arg, operand);
    OpBuilder builder(call);
    for (Operation &op : callee.getBody().front().without_terminator())
      builder.clone(op, mapping);
    auto ret = cast<func::ReturnOp>(callee.getBody().front().getTerminator());
    for (auto [result, value] : llvm::zip(call.getResults(), ret.getOperands()))
      result.replaceAllUsesWith(mapping.lookupOrDefault(value));
    call.erase();
  }
  return success();
}

namespace {
struct FlattenBlocksPass : llmc::impl::FlattenBlocksBase<FlattenBlocksPass> {
  void runOnOperation() override { flattenBlocks(getOperation()); }
};
} // namespace
