//===- Pipelines.cpp - the training pipeline, built and registered --------===//
//
// `llmc compile` and `llmc-opt --llmc-train-pipeline` run exactly the same
// pass list, so every lit test of the pipeline tests what users run.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void llmc::buildTrainingPipeline(OpPassManager &pm,
                                 const TrainingPipelineOptions &options) {
  if (options.precision != "fp32") {
    PrecisionOptions precision;
    precision.computeType = options.precision;
    pm.addPass(createPrecision(precision));
  }
  if (!options.mesh.empty()) {
    ShardOptions shard;
    shard.mesh = options.mesh;
    shard.zero = options.zero;
    shard.gradSync = options.gradSync;
    shard.rankOrder = options.rankOrder;
    shard.sequenceParallel = options.sequenceParallel;
    pm.addPass(createShard(shard));
  }
  if (!options.qat.empty()) {
    QATOptions qat;
    qat.spec = options.qat;
    pm.addPass(createQAT(qat));
  }
  if (!options.lora.empty()) {
    LoRAOptions lora;
    lora.spec = options.lora;
    lora.qlora = options.qlora;
    pm.addPass(createLoRA(lora));
  }
  if (options.emit == "graph")
    return;
  pm.addPass(createAutodiff());
  OptimizerOptions optimizer;
  optimizer.microbatches = options.microbatches;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.epsilon = options.epsilon;
  optimizer.weightDecay = options.weightDecay;
  optimizer.noDecay = options.noDecay;
  optimizer.maxGradNorm = options.maxGradNorm;
  optimizer.optimizer = options.optimizer;
  pm.addPass(createOptimizer(optimizer));
  pm.addPass(createInferenceEntryPoints());
  pm.addPass(createCSEPass());
  // After CSE, which would merge the deliberately repeated forward ops and
  // gathers.
  if (options.recompute != "none" || !options.recomputeLayers.empty() || options.qlora) {
    RecomputeOptions recompute;
    recompute.mode = options.recompute;
    recompute.layerModes = options.recomputeLayers;
    pm.addPass(createRecompute(recompute));
  }
  if (options.zero == 3) {
    FSDPOptions fsdp;
    fsdp.reshardAfterForward = options.fsdpReshardAfterForward;
    fsdp.prefetch = options.fsdpPrefetch;
    pm.addPass(createFSDP(fsdp));
  }
  if (!options.mesh.empty()) {
    PipelineOptions stages;
    stages.schedule = options.pipelineSchedule;
    stages.virtualStages = options.virtualStages;
    stages.stageLayout = options.stageLayout;
    pm.addPass(createPipeline(stages));
    BucketGradientsOptions buckets;
    buckets.bucketBytes = options.gradBucketBytes;
    pm.addPass(createBucketGradients(buckets));
  }
  if (options.emit == "train")
    return;
  pm.addPass(createDecomposeCollectives());
  pm.addPass(createLowerToExec());
  pm.addPass(createVerifyCollectives());
  if (options.memoryBudget > 0) {
    MemoryBudgetOptions budget;
    budget.bytes = options.memoryBudget;
    pm.addPass(createMemoryBudget(budget));
  }
  if (options.target == "cuda")
    pm.addPass(createTargetCuda());
}

namespace {
struct TrainingPipelineCLOptions
    : public PassPipelineOptions<TrainingPipelineCLOptions> {
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("fp32 | bf16 | f16"),
                                llvm::cl::init("fp32")};
  Option<int64_t> microbatches{*this, "microbatches",
                               llvm::cl::desc("Microbatches per step"),
                               llvm::cl::init(1)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::desc("AdamW weight decay"),
                             llvm::cl::init(0.1)};
  Option<double> maxGradNorm{*this, "max-grad-norm",
                             llvm::cl::desc("Gradient clip (0 disables)"),
                             llvm::cl::init(1.0)};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("adamw | adamw8bit"),
                                llvm::cl::init("adamw")};
  Option<std::string> target{*this, "target", llvm::cl::desc("cpu | cuda"),
                             llvm::cl::init("cpu")};
  Option<std::string> emit{*this, "emit", llvm::cl::desc("graph | train | exec"),
                           llvm::cl::init("exec")};
  Option<std::string> mesh{*this, "mesh", llvm::cl::desc("Mesh, e.g. dp=2,tp=2"),
                           llvm::cl::init("")};
  Option<int64_t> zero{*this, "zero", llvm::cl::desc("ZeRO stage"), llvm::cl::init(0)};
  Option<std::string> gradSync{*this, "grad-sync", llvm::cl::desc("allreduce | ps"),
                               llvm::cl::init("allreduce")};
  Option<std::string> rankOrder{*this, "rank-order",
                                llvm::cl::desc("Mesh axes, slowest to fastest"),
                                llvm::cl::init("")};
  Option<bool> sp{*this, "sp", llvm::cl::desc("Sequence parallelism over tp"),
                  llvm::cl::init(false)};
  Option<std::string> recompute{*this, "recompute", llvm::cl::desc("none | full | selective"),
                                llvm::cl::init("none")};
  Option<std::string> pipelineSchedule{*this, "pipeline-schedule",
                                       llvm::cl::desc("naive | gpipe | 1f1b | interleaved | zero-bubble"),
                                       llvm::cl::init("1f1b")};
  Option<int64_t> virtualStages{*this, "virtual-stages", llvm::cl::desc("Model chunks per stage"),
                                llvm::cl::init(1)};
  Option<std::string> stageLayout{*this, "stage-layout", llvm::cl::desc("Layers per chunk"),
                                  llvm::cl::init("")};
  Option<int64_t> memoryBudget{*this, "memory-budget",
                               llvm::cl::desc("Per-rank memory budget in bytes (0: none)"),
                               llvm::cl::init(0)};
  Option<int64_t> gradBucketBytes{*this, "grad-bucket-bytes",
                                  llvm::cl::desc("Gradient all-reduce bucket size (0: none)"),
                                  llvm::cl::init(25 << 20)};
  Option<bool> fsdpReshardAfterForward{*this, "fsdp-reshard-after-forward",
                                       llvm::cl::desc("ZeRO-3: gather again for backward"),
                                       llvm::cl::init(true)};
  Option<int64_t> fsdpPrefetch{*this, "fsdp-prefetch",
                               llvm::cl::desc("ZeRO-3: blocks to gather ahead"),
                               llvm::cl::init(1)};
  Option<std::string> qat{*this, "qat", llvm::cl::desc("Fake quantization spec (see llmc-qat)"),
                          llvm::cl::init("")};
  Option<std::string> lora{*this, "lora", llvm::cl::desc("LoRA spec (see llmc-lora)"),
                           llvm::cl::init("")};
  Option<bool> qlora{*this, "qlora", llvm::cl::desc("Adapted base weights stored in NF4"),
                     llvm::cl::init(false)};
};
} // namespace

void llmc::registerPasses() {
  registerLLMCPasses();
  PassPipelineRegistration<TrainingPipelineCLOptions>(
      "llmc-train-pipeline",
      "Forward graph to per-rank exec programs (what `llmc compile` runs)",
      [](OpPassManager &pm, const TrainingPipelineCLOptions &cl) {
        llmc::TrainingPipelineOptions options;
        options.precision = cl.precision;
        options.microbatches = cl.microbatches;
        options.weightDecay = cl.weightDecay;
        options.maxGradNorm = cl.maxGradNorm;
        options.optimizer = cl.optimizer;
        options.emit = cl.emit;
        options.target = cl.target;
        options.mesh = cl.mesh;
        options.zero = cl.zero;
        options.gradSync = cl.gradSync;
        options.rankOrder = cl.rankOrder;
        options.sequenceParallel = cl.sp;
        options.gradBucketBytes = cl.gradBucketBytes;
        options.recompute = cl.recompute;
        options.pipelineSchedule = cl.pipelineSchedule;
        options.virtualStages = cl.virtualStages;
        options.stageLayout = cl.stageLayout;
        options.memoryBudget = cl.memoryBudget;
        options.fsdpReshardAfterForward = cl.fsdpReshardAfterForward;
        options.fsdpPrefetch = cl.fsdpPrefetch;
        options.qat = cl.qat;
        options.lora = cl.lora;
        options.qlora = cl.qlora;
        llmc::buildTrainingPipeline(pm, options);
      });
}
