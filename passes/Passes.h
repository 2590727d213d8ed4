//===- Passes.h - llmc passes and pipelines ---------------------*- C++ -*-===//
#ifndef LLMC_PASSES_PASSES_H
#define LLMC_PASSES_PASSES_H

#include "common/QuantScheme.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/Exec/ExecDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "dialects/QAT/QATDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "passes/lib/CompileOptions.h"

#include <string>

namespace llmc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// The training pipeline: forward graph → pad vocab → precision → shard → qat → lora →
/// autodiff → optimizer → inference entry points → cse → recompute → fsdp →
/// fp8 matmuls → pipeline stages → gradient buckets → fuse → decompose collectives →
/// lower-to-exec → verify collectives → memory budget → place streams or
/// target cuda (each only where the options ask for it), plus the
/// `--insert-pass` insertions.
/// Fails (through `error`) when an `--insert-pass` cannot be placed.
mlir::LogicalResult buildTrainingPipeline(mlir::OpPassManager &pm, const CompileOptions &options,
                                          llvm::function_ref<void(const llvm::Twine &)> error);

/// Registers every pass and the `llmc-train-pipeline` pipeline.
/// One inference step's graph passes (`llmc compile --inference` runs them
/// once for @prefill's shape and once for @decode's, then merges the two):
/// precision and layout as in training, NF4 weights (--weight-quant), @logits,
/// then the KV cache.
void buildInferencePipeline(mlir::OpPassManager &pm, const CompileOptions &options,
                            const KvCacheOptions &cache);
/// Fusion and lowering of the merged inference steps.
void buildInferenceLowering(mlir::OpPassManager &pm, const CompileOptions &options);

void registerPasses();

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace llmc

#endif
