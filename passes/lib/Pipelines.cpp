//===- TrainingPipeline.cpp - the training pipeline, built and registered -===//
//
// `llmc compile` and `llmc-opt --llmc-train-pipeline` run exactly the same
// pass list, so every lit test of the pipeline tests what users run.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/lib/QATScheme.h"

#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {

/// Adds the pipeline's passes and, around the ones `--insert-pass` names,
/// the user's (plugin) passes.
class PipelineBuilder {
public:
  PipelineBuilder(OpPassManager &pm, std::vector<llmc::PassInsertion> insertions)
      : pm(pm), insertions(std::move(insertions)), used(this->insertions.size(), false) {}

  void add(std::unique_ptr<Pass> pass) {
    std::string anchor = pass->getArgument().str();
    insert(anchor, /*after=*/false);
    pm.addPass(std::move(pass));
    added.push_back(anchor);
    insert(anchor, /*after=*/true);
  }

  /// Fails for an insertion whose anchor pass is not in this pipeline or
  /// whose pass text does not parse.
  LogicalResult finish(function_ref<void(const Twine &)> error) {
    if (!parseErrors.empty()) {
      error(parseErrors);
      return failure();
    }
    for (auto [insertion, done] : llvm::zip(insertions, used))
      if (!done) {
        std::string passes;
        for (const std::string &name : added) passes += (passes.empty() ? "" : ", ") + name;
        error("--insert-pass: no pass '" + insertion.anchor + "' in this pipeline (it runs " +
              passes + ")");
        return failure();
      }
    return success();
  }

private:
  void insert(StringRef anchor, bool after) {
    for (auto [insertion, done] : llvm::zip(insertions, used)) {
      if (insertion.anchor != anchor || insertion.after != after)
        continue;
      done = true;
      std::string message;
      llvm::raw_string_ostream os(message);
      if (failed(parsePassPipeline(insertion.passes, pm, os)))
        parseErrors += "--insert-pass '" + insertion.passes + "': " + message;
    }
  }

  OpPassManager &pm;
  std::vector<llmc::PassInsertion> insertions;
  std::vector<bool> used;
  std::vector<std::string> added;
  std::string parseErrors;
};

using AddPass = function_ref<void(std::unique_ptr<Pass>)>;

/// --precision fp8 (docs/fp8.md): Transformer Engine's hybrid recipe with
/// per-tensor scaling, current or (--fp8-scaling delayed) delayed — the
/// blocks' weights and activations in E4M3, the gradients of their outputs
/// in E5M2; the LM head (and the embedding, which --qat leaves alone unless
/// ops=embedding) stays bf16.
std::string fp8TrainingRecipe(const llmc::CompileOptions &options) {
  std::string error;
  std::string scaling = llmc::fp8ScalingSuffix(options.fp8Scaling, error).value_or("");
  return "weights=fp8_e4m3:tensor" + scaling + ", activations=fp8_e4m3:tensor" + scaling +
         ", gradients=fp8_e5m2:tensor" + scaling + ", skip=head";
}

/// What the model computes: precision, layout, fake quantization, adapters.
void addGraphPasses(AddPass add, const llmc::CompileOptions &options) {
  using namespace llmc;
  if (int64_t multiple = resolvedVocabMultiple(options); multiple > 1) {
    PadVocabOptions pad;
    pad.multiple = multiple;
    add(createPadVocab(pad));
  }
  if (options.precision != "fp32") {
    PrecisionOptions precision;
    // The option says fp16 (as --precision does), the pass the MLIR type.
    // fp8 is bf16 everywhere but the blocks' linear layers (llmc-qat below).
    precision.computeType = options.precision == "fp16"  ? "f16"
                            : options.precision == "fp8" ? "bf16"
                                                         : options.precision;
    add(createPrecision(precision));
  }
  if (!options.mesh.empty()) {
    ShardOptions shard;
    shard.mesh = options.mesh;
    shard.zero = options.zero;
    shard.gradSync = options.gradSync;
    shard.rankOrder = options.rankOrder;
    shard.sequenceParallel = options.sequenceParallel;
    shard.sharedTokens = !options.inference.empty();
    add(createShard(shard));
  }
  if (!options.qat.empty() || options.precision == "fp8") {
    QATOptions qat;
    qat.spec = options.precision == "fp8" ? fp8TrainingRecipe(options) : options.qat;
    // Gating stays in high precision, as DeepSeek-V3's fp8 recipe keeps it.
    qat.keepRouters = options.precision == "fp8";
    add(createQAT(qat));
  }
  if (!options.lora.empty()) {
    LoRAOptions lora;
    lora.spec = options.lora;
    lora.qlora = options.qlora;
    lora.qloraBlock = options.qloraBlock;
    lora.qloraDoubleQuant = options.doubleQuant;
    add(createLoRA(lora));
  }
}

/// From llm ops to placed exec programs on the target.
void addLoweringPasses(AddPass add, const llmc::CompileOptions &options) {
  using namespace llmc;
  add(createDecomposeCollectives());
  LowerToExecOptions lower;
  lower.target = options.target;
  add(createLowerToExec(lower));
  add(createVerifyCollectives());
  if (llmc::offloads(options, "optimizer"))
    add(createOffloadOptimizer());
  if (options.deviceMemoryBytes > 0) { // generation only (resolveOptions)
    OffloadWeightsOptions weights;
    weights.deviceBytes = options.deviceMemoryBytes;
    // `auto` is resolved by llmc compile (compiler/OffloadChoice.h), which
    // lowers every way; a pipeline run directly streams.
    weights.layers = options.offloadedLayers == "auto" ? "stream" : options.offloadedLayers;
    add(createOffloadWeights(weights));
  }
  if (options.memoryBudgetBytes > 0) {
    MemoryBudgetOptions budget;
    budget.bytes = options.memoryBudgetBytes;
    add(createMemoryBudget(budget));
  }
  if (options.target == "cuda")
    add(createTargetCuda());
  else if (options.overlapComm)
    add(createPlaceStreams());
}

} // namespace

LogicalResult llmc::buildTrainingPipeline(OpPassManager &pm, const CompileOptions &options,
                                          function_ref<void(const Twine &)> error) {
  std::string insertError;
  PipelineBuilder builder(pm, parsePassInsertions(options.insertPass, insertError));
  if (!insertError.empty()) {
    error(insertError);
    return failure();
  }
  auto add = [&](std::unique_ptr<Pass> pass) { builder.add(std::move(pass)); };
  if (!options.inference.empty()) {
    error("--inference compiles the model at two shapes (prefill and decode); use "
          "`llmc compile --inference`");
    return failure();
  }
  addGraphPasses(add, options);
  if (options.emit == "graph")
    return builder.finish(error);
  add(createAutodiff());
  OptimizerOptions optimizer;
  optimizer.microbatches = options.microbatches;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.epsilon = options.epsilon;
  optimizer.weightDecay = options.weightDecay;
  optimizer.noDecay = options.noDecay;
  optimizer.maxGradNorm = options.maxGradNorm;
  optimizer.optimizer = options.optimizer;
  // fp16's 5-bit exponent underflows small gradients unless the loss is
  // scaled; bf16 has fp32's range and needs no scale.
  optimizer.lossScaling = options.precision == "fp16";
  optimizer.fp32Gradients = options.gradDtype == "fp32";
  add(createOptimizer(optimizer));
  add(createInferenceEntryPoints());
  add(createCSEPass());
  // After CSE, which would merge the deliberately repeated forward ops and
  // gathers.
  if (options.recompute != "none" || !options.recomputeLayers.empty() || options.qlora) {
    RecomputeOptions recompute;
    recompute.mode = options.recompute;
    recompute.layerModes = options.recomputeLayers;
    add(createRecompute(recompute));
  }
  if (options.zero == 3) {
    FSDPOptions fsdp;
    fsdp.reshardAfterForward = options.fsdpReshardAfterForward;
    fsdp.prefetch = options.fsdpPrefetch;
    fsdp.keepGathered = options.fsdpKeepGathered;
    add(createFSDP(fsdp));
  }
  // fp8 storage for the products fake quantization rounded to fp8, once
  // the backward and its recomputation are in place.
  if (!options.qat.empty() || options.precision == "fp8") {
    Fp8MatmulsOptions fp8;
    fp8.fastAccumulation = options.fp8FastAccumulation;
    add(createFp8Matmuls(fp8));
  }
  if (!options.mesh.empty()) {
    PipelineParallelOptions stages;
    stages.schedule = options.pipelineSchedule;
    stages.virtualStages = options.virtualStages;
    stages.stageLayout = options.stageLayout;
    add(createPipelineParallel(stages));
    BucketGradientsOptions buckets;
    buckets.bucketBytes = options.gradBucketBytes;
    add(createBucketGradients(buckets));
  }
  FuseOptions fuse;
  fuse.fusions = options.fuse;
  fuse.chunkMb = resolvedFuseChunkMb(options);
  fuse.target = options.target;
  add(createFuse(fuse));
  // After fusion, whose patterns read the unsplit forward values; on the
  // layers recomputation left, so what a layer keeps is what moves.
  if (std::string layers = offloadedLayers(options); !layers.empty()) {
    OffloadActivationsOptions offload;
    offload.layers = layers == "*" ? "" : layers;
    add(createOffloadActivations(offload));
  }
  if (options.emit == "train")
    return builder.finish(error);
  addLoweringPasses(add, options);
  return builder.finish(error);
}

void llmc::buildInferencePipeline(OpPassManager &pm, const CompileOptions &options,
                                  const KvCacheOptions &cache) {
  auto add = [&](std::unique_ptr<Pass> pass) { pm.addPass(std::move(pass)); };
  addGraphPasses(add, options);
  if (!options.weightQuant.empty()) {
    WeightQuantOptions quant;
    quant.scheme = options.weightQuant;
    quant.doubleQuant = options.doubleQuant;
    add(createWeightQuant(quant));
  }
  add(createInferenceEntryPoints());
  add(createKvCache(cache));
  add(createCSEPass());
}

void llmc::buildInferenceLowering(OpPassManager &pm, const CompileOptions &options) {
  auto add = [&](std::unique_ptr<Pass> pass) { pm.addPass(std::move(pass)); };
  FuseOptions fuse;
  fuse.fusions = options.fuse;
  fuse.chunkMb = resolvedFuseChunkMb(options);
  fuse.target = options.target;
  add(createFuse(fuse));
  addLoweringPasses(add, options);
}

namespace {
/// `--llmc-train-pipeline="..."` takes exactly the `llmc compile` flags.
struct TrainingPipelineCLOptions : public PassPipelineOptions<TrainingPipelineCLOptions> {
#define LLMC_PIPELINE_OPTION(Type, field, flag, Default, choices, key, help)                       \
  Option<Type> field{*this, flag, llvm::cl::desc(help), llvm::cl::init(Default)};
#include "passes/lib/CompileOptions.def"
  Option<std::string> emit{*this, "emit", llvm::cl::desc("Stop after: graph | train | exec"),
                           llvm::cl::init("exec")};

  llmc::CompileOptions get() const {
    llmc::CompileOptions options;
#define LLMC_PIPELINE_OPTION(Type, field, flag, Default, choices, key, help) options.field = field;
#include "passes/lib/CompileOptions.def"
    options.emit = emit;
    return options;
  }
};
} // namespace

void llmc::registerPasses() {
  registerLLMCPasses();
  registerPassPipeline(
      "llmc-train-pipeline", "Forward graph to per-rank exec programs (what `llmc compile` runs)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) -> LogicalResult {
        TrainingPipelineCLOptions cl;
        if (failed(cl.parseFromString(text)))
          return failure();
        CompileOptions options = cl.get();
        if (std::string error = resolveOptions(options); !error.empty())
          return errorHandler("llmc-train-pipeline: " + error);
        if (options.recompute == "budget")
          return errorHandler("llmc-train-pipeline: recompute=budget chooses layers by "
                              "compiling many times; use `llmc compile`");
        return buildTrainingPipeline(pm, options, [&](const Twine &message) {
          (void)errorHandler("llmc-train-pipeline: " + message);
        });
      },
      [](function_ref<void(const detail::PassOptions &)> printOptions) {
        printOptions(TrainingPipelineCLOptions());
      });
}
