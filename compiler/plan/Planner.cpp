//===- Planner.cpp - layouts as labels and flags; the entry points ---------===//

#include "compiler/plan/Planner.h"

#include "compiler/plan/Search.h"
#include "dialects/Registration.h"
#include "models/Models.h"
#include "passes/lib/MicrobatchSchedule.h"

#include "llvm/Support/SourceMgr.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

using namespace mlir;

namespace llmc::plan {

std::string Layout::label() const {
  std::ostringstream os;
  os << "tp" << tp << " pp" << pp << " dp" << dp;
  if (ep > 1)
    os << " ep" << ep;
  os << " z" << zero << (sp ? " sp" : "") << " mbs" << microbatchSize << " m" << microbatches;
  if (pp > 1)
    os << " " << schedule << (virtualStages > 1 ? "×" + std::to_string(virtualStages) : "");
  os << " " << (recompute == "selective" ? "sel" : recompute);
  if (recompute == "budget")
    os << "(" << budgetFullLayers << " full)";
  if (offloadActivations)
    os << " act-off";
  if (offload)
    os << " off";
  return os.str();
}

std::string Layout::offloadChoice() const {
  if (offload && offloadActivations)
    return "optimizer+activations";
  return offload ? "optimizer" : offloadActivations ? "activations" : "none";
}

std::string Layout::compileFlags(const Request &request) const {
  std::ostringstream os;
  if (!request.model.inputFile.empty())
    os << request.model.inputFile;
  else
    os << "--model " << request.model.family << " --preset " << request.model.preset;
  if (!request.model.configJson.empty())
    os << " --config " << request.model.configJson;
  for (const std::string &set : request.model.overrides)
    os << " --set " << set;
  if (request.seqLen > 0)
    os << " --set seq_len=" << request.seqLen;
  // The model's batch_size is one microbatch over all data-parallel ranks.
  os << " --set batch_size=" << batchRanks() * microbatchSize << " --precision "
     << request.precision << " --target " << request.target;
  CompileOptions options = layoutOptions(request, *this);
  if (!options.mesh.empty())
    os << " --mesh " << options.mesh;
  if (zero)
    os << " --zero " << zero;
  if (sp)
    os << " --sp";
  if (microbatches > 1)
    os << " --microbatches " << microbatches;
  if (pp > 1 && schedule != "1f1b")
    os << " --pipeline-schedule " << schedule;
  if (virtualStages > 1)
    os << " --virtual-stages " << virtualStages;
  if (recompute == "budget") {
    // Whole MiB, rounded down: the budget never exceeds the device.
    os << " --recompute budget --memory-budget "
       << static_cast<int64_t>(std::floor(request.cluster.memoryBytes / (1 << 20))) << "MiB";
  } else if (recompute != "none") {
    os << " --recompute " << recompute;
  }
  if (offload || offloadActivations)
    os << " --offload " << options.offload;
  return os.str();
}

bool modelShape(const Request &request, ModelShape &shape, std::string &error) {
  MLIRContext context;
  prepareContext(context);
  std::string diagnostics;
  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &d) {
    diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return success();
  });
  ModelSource source = request.model;
  if (request.seqLen > 0)
    source.overrides.push_back("seq_len=" + std::to_string(request.seqLen));
  llvm::SourceMgr sourceMgr;
  ModelConfig config;
  OwningOpRef<ModuleOp> module = loadModel(context, source, sourceMgr, &config);
  if (!module) {
    error = diagnostics.empty() ? "cannot load the model" : diagnostics;
    return false;
  }
  if (!source.inputFile.empty()) {
    error = "llmc plan needs a built-in model (--model): it varies the number of layers";
    return false;
  }
  shape.layers = config.nLayer;
  shape.seqLen = config.seqLen;
  shape.heads = config.nHead;
  shape.kvHeads = config.nKvHead > 0 ? config.nKvHead : config.nHead;
  shape.parameters = static_cast<double>(countParameters(*module).total);
  shape.dropout = config.dropout;
  shape.experts = config.moe() ? config.numExperts : 0;
  return true;
}


std::string validate(const Request &r) {
  if (std::string bad = validate(r.cluster); !bad.empty())
    return bad;
  auto is = [](const std::string &value, std::initializer_list<const char *> choices) {
    for (const char *choice : choices)
      if (value == choice)
        return true;
    return false;
  };
  if (r.globalBatch <= 0)
    return "--global-batch must be a positive number of sequences per step, not " +
           std::to_string(r.globalBatch);
  if (r.seqLen < 0)
    return "--seq must be a positive number of tokens, not " + std::to_string(r.seqLen);
  if (!is(r.target, {"cpu", "cuda"}))
    return "--target must be cpu or cuda, not '" + r.target + "'";
  if (!is(r.precision, {"fp32", "bf16", "fp16"}))
    return "--precision must be fp32, bf16 or fp16, not '" + r.precision + "'";
  if (!(r.fp32MatmulScale > 0 && r.fp32MatmulScale <= 1)) {
    std::ostringstream os;
    os << "--fp32-matmul-scale must be in (0, 1], not " << r.fp32MatmulScale;
    return os.str();
  }
  if (r.microbatchSizes.empty())
    return "--microbatch-sizes: give at least one size";
  for (int64_t size : r.microbatchSizes)
    if (size <= 0)
      return "--microbatch-sizes: " + std::to_string(size) + " is not a positive size";
  for (int64_t tp : r.onlyTp)
    if (tp <= 0 || (tp & (tp - 1)))
      return "--tp: " + std::to_string(tp) +
             " is not a power of two (the sizes tensor parallelism is searched at)";
  for (int64_t pp : r.onlyPp)
    if (pp <= 0)
      return "--pp: " + std::to_string(pp) + " is not a positive number of stages";
  for (int64_t ep : r.onlyEp)
    if (ep <= 0)
      return "--ep: " + std::to_string(ep) + " is not a positive number of expert-parallel ranks";
  for (int64_t zero : r.onlyZero)
    if (zero < 0 || zero > 3)
      return "--zero: " + std::to_string(zero) + " is not a ZeRO stage (0, 1, 2 or 3)";
  for (const std::string &mode : r.onlyRecompute)
    if (!is(mode, {"none", "selective", "full", "budget"}))
      return "--recompute: '" + mode + "' is not none, selective, full or budget";
  for (const std::string &kind : r.onlySchedule)
    if (!is(kind, {"1f1b", "interleaved", "zero-bubble"}))
      return "--pipeline-schedule: '" + kind + "' is not 1f1b, interleaved or zero-bubble";
  for (int64_t v : r.onlyVirtualStages)
    if (v < 2)
      return "--virtual-stages: " + std::to_string(v) +
             " is not an interleaved schedule's chunk count (2 or more per stage)";
  for (const std::string &choice : r.offload)
    if (!is(choice, {"none", "optimizer", "activations", "optimizer+activations"}))
      return "--offload: '" + choice +
             "' is not none, optimizer, activations or optimizer+activations";
  for (const std::string &choice : r.offload) {
    if (choice == "none")
      continue;
    // The optimizer's update runs in host memory; activations only cross
    // the link.
    bool update = choice != "activations";
    if (!(r.cluster.hostLinkBandwidth > 0 && (!update || r.cluster.hostMemoryBandwidth > 0)))
      return "--offload " + choice + ": the cluster needs --host-bw" +
             (update ? " and --host-memory-bw" : "") + " (a preset has them)";
  }
  if (r.maxVirtualStages < 1)
    return "the largest number of virtual stages must be at least 1";
  return "";
}

bool runPlan(const Request &request, int64_t verified, Result &result, std::string &error) {
  if (std::string bad = validate(request); !bad.empty()) {
    error = bad;
    return false;
  }
  ModelShape shape;
  if (!modelShape(request, shape, error))
    return false;
  for (int64_t ep : request.onlyEp)
    if (ep > 1 && (shape.experts <= 1 || shape.experts % ep)) {
      error = "--ep: " + std::to_string(ep) + " does not divide the model's " +
              std::to_string(shape.experts) + " experts" +
              (shape.experts ? "" : " (a dense model has no expert parallelism)");
      return false;
    }
  Request resolved = request;
  if (resolved.seqLen <= 0)
    resolved.seqLen = shape.seqLen;
  resolved.cluster.efficiency.attentionDropout = shape.dropout > 0;
  result.seqLen = resolved.seqLen;
  result.achievableFraction =
      achievableFraction(request.cluster.efficiency, request.cluster.peakFlops);
  result.parameters = shape.parameters;
  result.layers = shape.layers;
  auto start = std::chrono::steady_clock::now();
  Search search(resolved, shape, result);
  search.run();
  // Confirm the leaders compile in their real layout (at one layer per
  // chunk and, but for CUDA's pipelines, one microbatch per stage, which is
  // quick at any width).
  std::vector<Prediction> kept;
  for (Prediction &p : result.ranked) {
    if (static_cast<int64_t>(kept.size()) >= verified) {
      kept.push_back(p);
      continue;
    }
    const Layout &l = p.layout;
    Layout reduced = l;
    // CUDA proves the transfers of the real microbatch count (NcclTransfers.h).
    if (resolved.target != "cuda")
      reduced.microbatches = l.pp;
    if (reduced.recompute == "budget")
      reduced.recompute = "selective";
    std::string why;
    if (search.cache().compile(layoutOptions(resolved, reduced), l.pp * l.virtualStages,
                               l.batchRanks() * l.microbatchSize, why))
      kept.push_back(p);
    else
      result.rejected.push_back({l.label(), "the compiler refuses it: " + why});
  }
  result.ranked = std::move(kept);
  result.probesCompiled = search.cache().compiled();
  result.probeSeconds = search.cache().seconds();
  result.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return true;
}

bool compiledStageBytes(const Request &request, const Layout &layout, std::vector<double> &bytes,
                        std::string &error) {
  ModelShape shape;
  if (!modelShape(request, shape, error))
    return false;
  ProbeCache cache(request);
  CompileOptions options = layoutOptions(request, layout);
  if (layout.recompute == "budget") {
    error = "compile a budget layout with llmc compile --recompute budget";
    return false;
  }
  mlir::OwningOpRef<mlir::ModuleOp> module =
      cache.compile(options, shape.layers, layout.batchRanks() * layout.microbatchSize, error);
  if (!module)
    return false;
  bytes = stageArenaBytes(*module);
  return true;
}

bool predictedStageBytes(const Request &request, const Layout &layout, std::vector<double> &bytes,
                         std::string &error) {
  ModelShape shape;
  if (!modelShape(request, shape, error))
    return false;
  Result result;
  Search search(request, shape, result);
  return search.stageBytes(layout, bytes, error);
}

} // namespace llmc::plan
