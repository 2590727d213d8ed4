//===- llmc.cpp - the llmc driver -----------------------------------------===//
//
//   llmc model <family> --preset <name> [--set k=v]... [--config f] [-o f] [--stats]
//   llmc compile (<graph.mlir> | --model <family> --preset <name>) [options] -o f
//   llmc inspect <model.llmc>
//   llmc quantize <ckpt-dir> (--model <family> | <graph.mlir>) --scheme s -o f
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"
#include "compiler/ScheduleSvg.h"
#include "models/Models.h"
#include "runtime/Inspect.h"
#include "runtime/quant/MergeLoRA.h"
#include "tools/llmc/Quantize.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>
#include <sstream>

using namespace llvm;

namespace {

cl::OptionCategory llmcCategory("llmc options");

cl::SubCommand modelCmd("model", "Print a built-in model's forward graph (llm dialect)");
cl::SubCommand compileCmd("compile", "Compile a forward graph into a training artifact");
cl::SubCommand inspectCmd("inspect", "Summarize an artifact: programs, parameters, memory plan");
cl::SubCommand mergeCmd("merge-lora",
                        "Fold a LoRA/QLoRA checkpoint's adapters into its base weights "
                        "(a plain fp32 weights file for the model without --lora)");

// --- model -------------------------------------------------------------------
cl::opt<std::string> modelFamily(cl::Positional, cl::desc("<gpt2|llama>"), cl::Required,
                                 cl::sub(modelCmd), cl::cat(llmcCategory));
cl::opt<std::string> modelPreset("preset", cl::desc("Preset name (gpt2: tiny, 124M, 350M, "
                                                    "774M, 1.5B; llama: tiny, 1B)"),
                                 cl::init("tiny"), cl::sub(modelCmd), cl::sub(compileCmd));
cl::list<std::string> modelSet("set", cl::desc("Override a config key (key=value)"),
                               cl::sub(modelCmd), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> modelConfig("config", cl::desc("Hugging Face style config.json"),
                                 cl::sub(modelCmd), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<bool> modelStats("stats", cl::desc("Print parameter counts instead of the graph"),
                         cl::sub(modelCmd), cl::cat(llmcCategory));
cl::opt<std::string> output("o", cl::desc("Output file ('-' for stdout)"), cl::init("-"),
                            cl::sub(modelCmd), cl::sub(compileCmd), cl::sub(inspectCmd),
                            cl::sub(mergeCmd),
                            cl::cat(llmcCategory));

// --- compile -----------------------------------------------------------------
cl::opt<std::string> compileInput(cl::Positional, cl::desc("<graph.mlir>"), cl::init(""),
                                  cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> compileModel("model", cl::desc("Built-in model family instead of a file"),
                                  cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> emit("emit", cl::desc("Stage to write: graph | train | exec | artifact"),
                          cl::init("artifact"), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> precision("precision", cl::desc("fp32 | bf16"), cl::init("fp32"),
                               cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> target("target",
                            cl::desc("Backend the programs run on: cpu | cuda (NVIDIA GPUs; "
                                     "kernels on one stream, communication on another)"),
                            cl::init("cpu"), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<int64_t> microbatches("microbatches", cl::desc("Gradient-accumulation microbatches"),
                              cl::init(1), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<double> beta1("beta1", cl::init(0.9), cl::desc("AdamW beta1"), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<double> beta2("beta2", cl::init(0.95), cl::desc("AdamW beta2"), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<double> adamEps("adam-eps", cl::init(1e-8), cl::desc("AdamW epsilon"), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<double> weightDecay("weight-decay", cl::init(0.1), cl::desc("AdamW weight decay"),
                            cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> noDecay("no-decay", cl::init("norm,bias"),
                             cl::desc("Parameter kinds without weight decay: norm,bias,embedding or none"),
                             cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<double> maxGradNorm("max-grad-norm", cl::init(1.0),
                            cl::desc("Clip gradients to this global norm (0 disables)"),
                            cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> optimizerKind("optimizer", cl::init("adamw"),
                                   cl::desc("adamw | adamw8bit (moments in 8-bit blocks: 2 "
                                            "bytes per parameter instead of 8)"),
                                   cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<double> lr("lr", cl::init(1e-3), cl::desc("Default peak learning rate"), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<double> minLr("min-lr", cl::init(1e-4), cl::desc("Default final learning rate"),
                      cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<int64_t> warmup("warmup", cl::init(10), cl::desc("Default warmup steps"), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<int64_t> steps("steps", cl::init(300), cl::desc("Default schedule length in steps"),
                       cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> schedule("schedule", cl::init("cosine"),
                              cl::desc("Default LR decay: cosine | linear | constant"),
                              cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<uint64_t> seed("seed", cl::init(1337), cl::desc("Default seed (init, data order)"),
                       cl::sub(compileCmd), cl::cat(llmcCategory));

cl::opt<std::string> mesh("mesh", cl::desc("Device mesh, e.g. dp=2,tp=2 or dp=2,fsdp=2 (axes in any "
                                          "order); empty: one rank"),
                          cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> rankOrder("rank-order",
                               cl::desc("Mesh axes from slowest to fastest varying rank "
                                        "coordinate (default pp,dp,fsdp,<others>,tp)"),
                               cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<bool> sequenceParallel("sp", cl::init(false),
                               cl::desc("Sequence parallelism: split layernorm, dropout and "
                                        "residual regions along the sequence over tp"),
                               cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<int64_t> zero("zero", cl::init(0),
                      cl::desc("ZeRO stage over dp (or fsdp): 1 optimizer state, 2 + gradients, "
                               "3 + parameters"),
                      cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> gradSync("grad-sync", cl::init("allreduce"),
                              cl::desc("Data-parallel gradient sync: allreduce | ps (reduce to "
                                       "rank 0 + broadcast)"),
                              cl::sub(compileCmd), cl::cat(llmcCategory));

cl::opt<double> gradBucketMb("grad-bucket-mb", cl::init(25.0),
                             cl::desc("Fuse gradient all-reduces into buckets of this many MiB, "
                                      "in backward order (0: one per gradient)"),
                             cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> memoryBudget("memory-budget",
                                  cl::desc("Fail unless every rank's plan fits in this many "
                                           "bytes (e.g. 24GiB, 512MiB, 1e9)"),
                                  cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> recompute("recompute", cl::init("none"),
                               cl::desc("Activation recomputation per layer: none | full | "
                                        "selective | budget[=<bytes>] (the least that fits "
                                        "--memory-budget)"),
                               cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> qat("qat",
                         cl::desc("Quantization-aware training, e.g. \"weights=int4:block64, "
                                  "activations=int8:tensor:asym, skip=head\" (docs/quantization.md)"),
                         cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> lora("lora",
                          cl::desc("Low-rank adapters, base model frozen, e.g. \"rank=8, alpha=16, "
                                   "targets=qkv,proj,mlp\" (docs/quantization.md)"),
                          cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<bool> qlora("qlora", cl::init(false),
                    cl::desc("With --lora: store the adapted base weights in NF4 (blocks of 64, "
                             "double-quantized absmax), load them with llmc-run --weights from "
                             "`llmc quantize --scheme nf4:block64`"),
                    cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> pipelineSchedule("pipeline-schedule", cl::init("1f1b"),
                                      cl::desc("With a pp mesh axis: naive | gpipe | 1f1b | "
                                               "interleaved | zero-bubble"),
                                      cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<int64_t> virtualStages("virtual-stages", cl::init(1),
                               cl::desc("Model chunks per pipeline stage (interleaved)"),
                               cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> stageLayout("stage-layout",
                                 cl::desc("Layers per model chunk, e.g. 3,3,2 (default: "
                                          "balanced by FLOPs)"),
                                 cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<bool> fsdpReshard("fsdp-reshard-after-forward", cl::init(true),
                          cl::desc("ZeRO-3: free gathered parameters after forward and gather "
                                   "again for backward (true) or keep them (false)"),
                          cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<int64_t> fsdpPrefetch("fsdp-prefetch", cl::init(1),
                              cl::desc("ZeRO-3: gather a block's parameters this many blocks "
                                       "ahead (bounds gathered blocks alive at once to 1+N)"),
                              cl::sub(compileCmd), cl::cat(llmcCategory));

// --- inspect -----------------------------------------------------------------
cl::opt<std::string> inspectInput(cl::Positional, cl::desc("<model.llmc>"), cl::Required,
                                  cl::sub(inspectCmd), cl::cat(llmcCategory));
cl::opt<bool> inspectSchedule("schedule",
                              cl::desc("Draw the pipeline schedule as SVG (to -o) instead of "
                                       "the summary"),
                              cl::sub(inspectCmd), cl::cat(llmcCategory));

int fail(StringRef tool, const Twine &message) {
  WithColor::error(errs(), tool) << message << "\n";
  return 1;
}


/// "24GiB", "512MiB", "100MB", "1e9" → bytes; -1 when malformed.
int64_t parseBytes(StringRef text) {
  text = text.trim();
  static const std::pair<StringRef, double> units[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},         {"GB", 1e9},           {"TB", 1e12},
      {"B", 1.0}};
  double scale = 1.0;
  for (auto [suffix, factor] : units)
    if (text.ends_with(suffix)) {
      text = text.drop_back(suffix.size()).trim();
      scale = factor;
      break;
    }
  double value;
  if (text.empty() || text.getAsDouble(value) || value < 0)
    return -1;
  return static_cast<int64_t>(value * scale);
}

int runModel() {
  mlir::MLIRContext context;
  llmc::prepareContext(context);
  llmc::ModelSource source{"", modelFamily, modelPreset, modelConfig, modelSet};
  llmc::ModelConfig config;
  llvm::SourceMgr sourceMgr;
  llmc::ToolDiagnostics diagnostics(context, sourceMgr, "llmc model");
  mlir::OwningOpRef<mlir::ModuleOp> module = llmc::loadModel(context, source, sourceMgr, &config);
  if (!module)
    return 1;
  std::string error;
  auto out = mlir::openOutputFile(output, &error);
  if (!out)
    return fail("llmc model", "cannot write '" + output + "': " + error);
  if (modelStats) {
    llmc::ParamStats stats = llmc::countParameters(*module);
    out->os() << "model:      " << modelFamily << " " << modelPreset << "\n"
              << "parameters: " << llmc::withCommas(stats.total) << " in " << stats.tensors
              << " tensors (" << llmc::withCommas(stats.trainable) << " trainable)\n"
              << "convention: every parameter tensor counted once; "
              << (config.tieEmbeddings ? "output head tied to the token embedding"
                                       : "separate output head")
              << "; vocabulary " << config.vocabSize << " (not padded)\n"
              << "shape:      n_layer=" << config.nLayer << " n_head=" << config.nHead
              << " n_kv_head=" << config.nKvHead << " n_embd=" << config.nEmbd
              << " ffn_hidden=" << config.ffnHidden << " seq_len=" << config.seqLen
              << " batch_size=" << config.batchSize << "\n";
  } else {
    module->print(out->os());
    out->os() << "\n";
  }
  out->keep();
  return 0;
}

int runCompile() {
  llmc::CompileOptions options;
  if (!compileInput.empty() && !compileModel.empty())
    return fail("llmc compile", "give either a graph file or --model, not both");
  if (compileInput.empty() && compileModel.empty())
    return fail("llmc compile", "no input: give <graph.mlir> or --model <family>");
  options.source = {compileInput, compileModel, modelPreset, modelConfig, modelSet};
  options.pipeline.precision = precision;
  if (target != "cpu" && target != "cuda")
    return fail("llmc compile", "unknown --target '" + target + "' (expected cpu or cuda)");
  options.pipeline.target = target;
  options.pipeline.microbatches = microbatches;
  options.pipeline.beta1 = beta1;
  options.pipeline.beta2 = beta2;
  options.pipeline.epsilon = adamEps;
  options.pipeline.weightDecay = weightDecay;
  options.pipeline.noDecay = noDecay;
  options.pipeline.maxGradNorm = maxGradNorm;
  options.pipeline.optimizer = optimizerKind;
  options.pipeline.mesh = mesh;
  options.pipeline.zero = zero;
  options.pipeline.gradSync = gradSync;
  options.pipeline.rankOrder = rankOrder;
  options.pipeline.sequenceParallel = sequenceParallel;
  options.pipeline.recompute = recompute;
  options.pipeline.qat = qat;
  options.pipeline.lora = lora;
  options.pipeline.qlora = qlora;
  if (qlora && lora.empty())
    return fail("llmc compile", "--qlora needs --lora (it quantizes the weights adapters are "
                                "added to)");
  if (!memoryBudget.empty()) {
    options.pipeline.memoryBudget = parseBytes(memoryBudget);
    if (options.pipeline.memoryBudget <= 0)
      return fail("llmc compile", "bad --memory-budget '" + memoryBudget +
                                      "' (expected a size such as 24GiB, 512MiB or 1e9)");
  }
  // --recompute budget=<bytes> is --recompute budget --memory-budget <bytes>.
  if (llvm::StringRef(recompute).starts_with("budget=")) {
    std::string size = recompute.substr(7);
    int64_t bytes = parseBytes(size);
    if (bytes <= 0)
      return fail("llmc compile", "bad --recompute budget '" + size +
                                      "' (expected a size such as 24GiB, 512MiB or 1e9)");
    if (options.pipeline.memoryBudget > 0 && options.pipeline.memoryBudget != bytes)
      return fail("llmc compile", "--recompute budget=" + size + " and --memory-budget " +
                                      memoryBudget + " disagree; give one");
    options.pipeline.recompute = "budget";
    options.pipeline.memoryBudget = bytes;
  }
  options.pipeline.pipelineSchedule = pipelineSchedule;
  options.pipeline.virtualStages = virtualStages;
  options.pipeline.stageLayout = stageLayout;
  if (gradBucketMb < 0)
    return fail("llmc compile", "--grad-bucket-mb must be >= 0");
  options.pipeline.gradBucketBytes = static_cast<int64_t>(gradBucketMb * (1 << 20));
  options.pipeline.fsdpReshardAfterForward = fsdpReshard;
  options.pipeline.fsdpPrefetch = fsdpPrefetch;
  options.schedule = {lr, minLr, warmup, steps, schedule, seed};
  if (schedule != "cosine" && schedule != "linear" && schedule != "constant")
    return fail("llmc compile", "unknown --schedule '" + schedule +
                                    "' (expected cosine, linear or constant)");
  options.emit = emit;
  options.output = output;
  return llmc::compile(options, "llmc compile");
}

int runInspect() {
  std::ostringstream os;
  std::string error;
  if (inspectSchedule) {
    std::map<std::string, std::string> metadata;
    if (!llmc::artifactMetadata(inspectInput, metadata, error) ||
        !llmc::renderScheduleSvg(metadata, os, error))
      return fail("llmc inspect", error);
  } else if (!llmc::inspectArtifact(inspectInput, os, error)) {
    return fail("llmc inspect", error);
  }
  std::string openError;
  auto out = mlir::openOutputFile(output, &openError);
  if (!out)
    return fail("llmc inspect", "cannot write '" + output + "': " + openError);
  out->os() << os.str();
  out->keep();
  return 0;
}

// --- merge-lora --------------------------------------------------------------
cl::opt<std::string> mergeCheckpoint(cl::Positional, cl::desc("<ckpt-dir>"), cl::Required,
                                     cl::sub(mergeCmd), cl::cat(llmcCategory));
cl::opt<std::string> mergeArtifact(cl::Positional, cl::desc("<lora.llmc>"), cl::Required,
                                   cl::sub(mergeCmd), cl::cat(llmcCategory));

int runMerge() {
  if (output == "-")
    return fail("llmc merge-lora", "give the output file with -o (safetensors)");
  llmc::MergeReport report;
  std::string error;
  if (!llmc::mergeLoRA(mergeCheckpoint, mergeArtifact, output, report, error))
    return fail("llmc merge-lora", error);
  outs() << "merged: " << report.merged << " weights (" << report.expanded
         << " expanded from NF4), " << report.copied << " other parameters copied -> " << output
         << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&llmcCategory, &llmc::quantizeCategory()});
  if (!cl::ParseCommandLineOptions(argc, argv,
                                   "llmc: compile transformer training steps\n\n"
                                   "  llmc model <family> --preset <name>    print a forward graph\n"
                                   "  llmc compile <graph.mlir> -o m.llmc    compile a training artifact\n"
                                   "  llmc inspect m.llmc                    summarize an artifact\n"
                                   "  llmc quantize ck --model gpt2 --scheme int4:block64 -o q.safetensors\n"
                                   "                                         export quantized weights\n"
                                   "  llmc merge-lora ck lora.llmc -o m.safetensors\n"
                                   "                                         fold adapters into the base\n",
                                   &errs()))
    return 1;
  if (modelCmd)
    return runModel();
  if (compileCmd)
    return runCompile();
  if (inspectCmd)
    return runInspect();
  if (llmc::quantizeCommand)
    return llmc::runQuantize();
  if (mergeCmd)
    return runMerge();
  return fail("llmc", "missing subcommand (model, compile, inspect, quantize or merge-lora); see llmc --help");
}
