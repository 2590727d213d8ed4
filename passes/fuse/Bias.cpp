//===- Bias.cpp - a matmul and its bias add as one linear -----------------===//
//
// llmc-fuse's `bias`. A matmul with a shared weight and its bias,
//   %m = matmul %x, %w               (w [K, N], or [N, K] with transpose_b)
//   %a = add %m, %b                  (b [N])
// become one linear placed where the add was, when the product feeds only
// the add. The ops must belong to the same part of the step (microbatch,
// pipeline action, forward, backward or recomputation): under selective
// recomputation the kept product feeds the forward's add and the replayed
// one, so neither fuses. BiasGelu.cpp's `bias-gelu` runs first and takes
// the sums a GELU reads, with the GELU.
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

unsigned llmc::fuseBias(ModuleOp module) {
  SmallVector<AddOp> adds;
  module.walk([&](AddOp op) { adds.push_back(op); });
  unsigned fused = 0;
  for (AddOp add : adds) fused += fuseBiasAdd(add, /*withGelu=*/false);
  return fused;
}
