//===- llmc.cpp - the llmc driver -----------------------------------------===//
//
//   llmc model <family> --preset <name> [--set k=v]... [--config f] [-o f] [--stats]
//   llmc compile (<graph.mlir> | --model <family> --preset <name>) [options] -o f
//   llmc inspect <model.llmc>
//   llmc quantize <ckpt-dir | hf-dir | weights> [--model <family> | <graph.mlir>] --scheme s -o f
//   llmc export-hf <ckpt-dir | weights.safetensors> <model.llmc> -o <hf-dir>
//   llmc data <text|ids|-> -o <prefix> [--from text|ids|u16|u32] [--shard-tokens N]
//   llmc generate <model.llmc> [--weights w] --prompt S [--max-new-tokens N] ...
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"
#include "compiler/ScheduleSvg.h"
#include "models/Models.h"
#include "runtime/Inspect.h"
#include "runtime/checkpoint/HuggingFace.h"
#include "runtime/generate/GenerateCommand.h"
#include "runtime/quant/MergeLoRA.h"
#include "tools/llmc/Data.h"
#include "tools/llmc/Plan.h"
#include "tools/llmc/Quantize.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
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
cl::SubCommand exportHfCmd("export-hf",
                           "Write a checkpoint or weights file as a Hugging Face model "
                           "directory (config.json, model.safetensors)");

// --- model -------------------------------------------------------------------
cl::opt<std::string>
    modelFamily(cl::Positional,
                cl::desc("<gpt2|llama|qwen2|qwen3|mistral|gemma2|gemma3_text|mixtral|qwen2_moe|"
                         "qwen3_moe> (default: --config's model_type)"),
                cl::Optional, cl::sub(modelCmd), cl::cat(llmcCategory));
cl::opt<std::string> modelPreset("preset",
                                 cl::desc("Preset name (gpt2: tiny, 124M, 350M, "
                                          "774M, 1.5B; llama: tiny, 1B; qwen2: tiny, "
                                          "0.5B; qwen3: tiny, 0.6B; mistral: tiny, 7B; gemma2: "
                                          "tiny, 2B; gemma3_text: tiny, 1B; mixtral: tiny, 8x7B; "
                                          "qwen2_moe: tiny, A2.7B; qwen3_moe: tiny, 30B-A3B)"),
                                 cl::init("tiny"), cl::sub(modelCmd), cl::sub(compileCmd));
cl::list<std::string> modelSet("set", cl::desc("Override a config key (key=value)"),
                               cl::sub(modelCmd), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> modelConfig("config", cl::desc("Hugging Face style config.json"),
                                 cl::sub(modelCmd), cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<bool> modelStats("stats", cl::desc("Print parameter counts instead of the graph"),
                         cl::sub(modelCmd), cl::cat(llmcCategory));
cl::opt<std::string> output("o", cl::desc("Output file ('-' for stdout)"), cl::init("-"),
                            cl::sub(modelCmd), cl::sub(compileCmd), cl::sub(inspectCmd),
                            cl::sub(mergeCmd), cl::sub(exportHfCmd),
                            cl::cat(llmcCategory));

// --- compile -----------------------------------------------------------------
cl::opt<std::string> compileInput(cl::Positional, cl::desc("<graph.mlir>"), cl::init(""),
                                  cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> compileModel("model", cl::desc("Built-in model family instead of a file"),
                                  cl::sub(compileCmd), cl::cat(llmcCategory));
cl::opt<std::string> emit("emit", cl::desc("Stage to write: graph | train | exec | artifact"),
                          cl::init("artifact"), cl::sub(compileCmd), cl::cat(llmcCategory));
// Every training-pipeline option and schedule default, from the one list.
#define LLMC_PIPELINE_OPTION(Type, field, flag, Default, choices, key, help)                        \
  cl::opt<Type> field##Flag(flag, cl::desc(help), cl::init(Default), cl::sub(compileCmd),            \
                            cl::cat(llmcCategory));
#define LLMC_SCHEDULE_OPTION(Type, field, flag, Default, choices, key, help)                        \
  LLMC_PIPELINE_OPTION(Type, field, flag, Default, choices, key, help)
#include "passes/lib/CompileOptions.def"

// The LR schedule's old spelling, before "schedule" also meant pipelines.
cl::opt<std::string> oldLrSchedule("schedule", cl::desc("Old spelling of --lr-schedule"),
                                   cl::Hidden, cl::sub(compileCmd), cl::cat(llmcCategory));

cl::list<std::string> passPlugins("pass-plugin",
                                  cl::desc("Load passes from a plugin library (run them with "
                                           "--insert-pass; docs/extending.md)"),
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


/// What `llmc compile` does by default with a vocabulary of `vocab`
/// classes: --target cuda pads it (--vocab-multiple), the CPU does not.
std::string vocabularyPadding(int64_t vocab) {
  llmc::CompileOptions cuda;
  cuda.target = "cuda";
  const int64_t multiple = llmc::resolvedVocabMultiple(cuda);
  const int64_t padded = (vocab + multiple - 1) / multiple * multiple;
  if (padded == vocab)
    return " (a multiple of " + std::to_string(multiple) + ": not padded)";
  return " (llmc compile --target cuda pads it to " + std::to_string(padded) +
         " inside the artifact, --vocab-multiple " + std::to_string(multiple) +
         "; the CPU does not)";
}

int runModel() {
  mlir::MLIRContext context;
  llmc::prepareContext(context);
  if (modelFamily.empty() && modelConfig.empty())
    return fail("llmc model",
                "give a family (gpt2, llama, qwen2, qwen3, mistral, gemma2, gemma3_text, mixtral, "
                "qwen2_moe, qwen3_moe) or --config <config.json>");
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
    out->os() << "model:      " << config.family << " " << modelPreset << "\n"
              << "parameters: " << llmc::withCommas(stats.total) << " in " << stats.tensors
              << " tensors (" << llmc::withCommas(stats.trainable) << " trainable)\n"
              << "convention: every parameter tensor counted once; "
              << (config.tieEmbeddings ? "output head tied to the token embedding"
                                       : "separate output head")
              << "; vocabulary " << config.vocabSize << vocabularyPadding(config.vocabSize) << "\n"
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
  llmc::CompileRequest options;
  if (!compileInput.empty() && !compileModel.empty())
    return fail("llmc compile", "give either a graph file or --model, not both");
  if (compileInput.empty() && compileModel.empty() && modelConfig.empty())
    return fail("llmc compile",
                "no input: give <graph.mlir>, --model <family> or --config <config.json>");
  options.source = {compileInput, compileModel, modelPreset, modelConfig, modelSet};
  for (const std::string &path : passPlugins) {
    Expected<mlir::PassPlugin> plugin = mlir::PassPlugin::load(path);
    if (!plugin)
      return fail("llmc compile",
                  "cannot load pass plugin '" + path + "': " + toString(plugin.takeError()));
    plugin->registerPassRegistryCallbacks();
  }
#define LLMC_PIPELINE_OPTION(Type, field, flag, Default, choices, key, help)                        \
  options.pipeline.field = field##Flag;
#define LLMC_SCHEDULE_OPTION(Type, field, flag, Default, choices, key, help)                        \
  options.schedule.field = field##Flag;
#include "passes/lib/CompileOptions.def"
  if (oldLrSchedule.getNumOccurrences()) {
    if (kindFlag.getNumOccurrences())
      return fail("llmc compile", "--schedule is the old spelling of --lr-schedule; give one");
    WithColor::note(errs(), "llmc compile") << "--schedule is now spelled --lr-schedule\n";
    options.schedule.kind = oldLrSchedule;
  }
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

// --- export-hf ---------------------------------------------------------------
cl::opt<std::string> exportSource(cl::Positional, cl::desc("<ckpt-dir | weights.safetensors>"),
                                  cl::Required, cl::sub(exportHfCmd), cl::cat(llmcCategory));
cl::opt<std::string> exportArtifact(cl::Positional, cl::desc("<model.llmc>"), cl::Required,
                                    cl::sub(exportHfCmd), cl::cat(llmcCategory));

cl::opt<std::string> exportDType("dtype",
                                 cl::desc("Tensor dtype: float32, bfloat16 or float16 "
                                          "(default: as stored)"),
                                 cl::sub(exportHfCmd), cl::cat(llmcCategory));

int runExportHf() {
  if (output == "-")
    return fail("llmc export-hf", "give the output directory with -o");
  std::string error;
  llmc::HuggingFaceExport report;
  if (!llmc::exportHuggingFace(exportSource, exportArtifact, output, exportDType, report, error))
    return fail("llmc export-hf", error);
  outs() << "exported: " << report.tensors << " tensors (" << report.dtype << ") -> " << output
         << "/model.safetensors, " << output << "/config.json\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // `llmc generate` is llmc-generate: the runtime reads its flags.
  if (argc >= 2 && StringRef(argv[1]) == "generate")
    return llmc::generateMain("llmc generate", argc - 1, argv + 1);
  cl::HideUnrelatedOptions(
      {&llmcCategory, &llmc::quantizeCategory(), &llmc::planCategory(), &llmc::dataCategory()});
  if (!cl::ParseCommandLineOptions(argc, argv,
                                   "llmc: compile transformer training steps\n\n"
                                   "  llmc model <family> --preset <name>    print a forward graph\n"
                                   "  llmc compile <graph.mlir> -o m.llmc    compile a training artifact\n"
                                   "  llmc inspect m.llmc                    summarize an artifact\n"
                                   "  llmc plan --model gpt2 --cluster dgx-h100:64 --global-batch 512\n"
                                   "                                         rank layouts for a cluster\n"
                                   "  llmc quantize ck --model gpt2 --scheme int4:block64 -o q.safetensors\n"
                                   "                                         export quantized weights\n"
                                   "  llmc merge-lora ck lora.llmc -o m.safetensors\n"
                                   "                                         fold adapters into the base\n"
                                   "  llmc export-hf ck m.llmc -o hf/        write a Hugging Face model\n"
                                   "  llmc data corpus.txt -o data/train --shard-tokens 100000000\n"
                                   "                                         write token shards\n"
                                   "  llmc generate m.llmc --weights ck --prompt \"Once\"\n"
                                   "                                         generate text (--inference)\n",
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
  if (exportHfCmd)
    return runExportHf();
  if (llmc::planCommand)
    return llmc::runPlan();
  if (llmc::dataCommand)
    return llmc::runData();
  return fail("llmc", "missing subcommand (model, compile, inspect, plan, quantize, merge-lora, "
                      "export-hf, data or generate); "
                      "see llmc --help");
}
