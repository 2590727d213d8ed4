//===- FlattenBlocks.cpp - inline llm.block regions -----------------------===//
//
// Autodiff and lowering work on straight-line code; the layer structure
// survives as the llmc.block_name attribute on every op that was inside a
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

namespace {
struct FlattenBlocksPass : llmc::impl::FlattenBlocksBase<FlattenBlocksPass> {
  void runOnOperation() override { flattenBlocks(getOperation()); }
};
} // namespace
