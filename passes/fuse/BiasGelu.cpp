//===- BiasGelu.cpp - matmul, bias add and GELU as one linear -------------===//
//
// llmc-fuse's `bias-gelu`: `bias` (Bias.cpp) with the GELU after the sum in
// the GEMM's epilogue too. In training gelu_grad still reads the biased
// value: the fused op then also returns it (keep_pre), as cuBLASLt's
// GELU_AUX epilogue does, so the fusion holds in the backward's presence.
// It runs before `bias`, which takes the adds no GELU reads.
//
// Runs in llmc-fuse (passes/Fuse.cpp) on the finished graph, after every
// pass that rewrites llm ops. It matches exactly the ops the model
// builders, autodiff and the sharding passes produce and leaves anything
// else alone: a value some other op still reads keeps the op that makes it.
//
//===----------------------------------------------------------------------===//

#include "passes/fuse/Fusions.h"
#include "passes/lib/FuseMatch.h"

#include "dialects/LLM/LLMDialect.h"

#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

unsigned llmc::fuseBiasGelu(ModuleOp module) {
  SmallVector<AddOp> adds;
  module.walk([&](AddOp op) { adds.push_back(op); });
  unsigned fused = 0;
  for (AddOp add : adds) fused += fuseBiasAdd(add, /*withGelu=*/true);
  return fused;
}
