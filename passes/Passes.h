//===- Passes.h - llmc passes and pipelines ---------------------*- C++ -*-===//
#ifndef LLMC_PASSES_PASSES_H
#define LLMC_PASSES_PASSES_H

#include "dialects/Dist/DistDialect.h"
#include "dialects/Exec/ExecDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "dialects/QAT/QATDialect.h"
#include "kernels/QuantScheme.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace llmc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// Everything the training pipeline is configured by (the `llmc compile`
/// flags map onto this one to one).
struct TrainingPipelineOptions {
  std::string precision = "fp32"; ///< fp32 | bf16
  int64_t microbatches = 1;
  double beta1 = 0.9, beta2 = 0.95, epsilon = 1e-8, weightDecay = 0.1;
  std::string noDecay = "norm,bias";
  double maxGradNorm = 1.0;
  std::string optimizer = "adamw"; ///< adamw | adamw8bit
  std::string mesh;              ///< "dp=2,tp=2"; empty: one rank
  int64_t zero = 0;              ///< ZeRO stage
  std::string gradSync = "allreduce";
  std::string rankOrder;         ///< "dp,tp": slowest to fastest; empty: default
  bool sequenceParallel = false; ///< Megatron SP over the tp axis
  int64_t gradBucketBytes = 25 << 20; ///< gradient all-reduce buckets; 0: none
  std::string recompute = "none"; ///< none | full | selective
  std::string recomputeLayers;    ///< per layer: h.0=full,h.1=selective
  std::string qat;               ///< --qat spec; empty: no fake quantization
  std::string lora;              ///< --lora spec; empty: train every parameter
  bool qlora = false;            ///< adapted base weights stored in NF4 (with lora)
  std::string pipelineSchedule = "1f1b"; ///< with a pp axis
  int64_t virtualStages = 1;
  std::string stageLayout;       ///< layers per model chunk; empty: balanced
  int64_t memoryBudget = 0;      ///< per-rank bytes; 0: no limit
  bool fsdpReshardAfterForward = true;
  int64_t fsdpPrefetch = 1;
  std::string target = "cpu";    ///< cpu | cuda: the backend the programs run on
  /// Stop after this stage: graph | train | exec.
  std::string emit = "exec";
};

/// forward graph → (precision) → autodiff → optimizer → inference entry
/// points → lower-to-exec, with verifiers between phases.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options);

/// Registers every pass and the `llmc-train-pipeline` pipeline.
void registerPasses();

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace llmc

#endif
