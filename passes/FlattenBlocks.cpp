//===- FlattenBlocks.cpp - inline llm.block regions -----------------------===//
//
// Autodiff and lowering work on straight-line code; the layer structure
// survives as the llmc.block_name attribute on every op that was inside a
// block, which is all FSDP, recompute and pipelining need later.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/lib/Inlining.h"

namespace llmc {
#define GEN_PASS_DEF_FLATTENBLOCKS
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace llmc;

namespace {
struct FlattenBlocksPass : llmc::impl::FlattenBlocksBase<FlattenBlocksPass> {
  void runOnOperation() override { flattenBlocks(getOperation()); }
};
} // namespace
