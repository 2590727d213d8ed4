//===- Planner.cpp - layouts as labels and flags; the entry points ---------===//

#include "compiler/plan/Planner.h"

#include "compiler/plan/Search.h"
#include "dialects/Registration.h"
#include "models/Models.h"
#include "passes/MicrobatchSchedule.h"
#include "passes/Utils.h"

#include "llvm/Support/SourceMgr.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

using namespace mlir;

namespace llmc::plan {

std::string Layout::label() const {
  std::ostringstream os;
  os << "tp" << tp << " pp" << pp << " dp" << dp << " z" << zero << (sp ? " sp" : "") << " mbs"
     << microbatchSize << " m" << microbatches;
  if (pp > 1)
    os << " " << schedule << (virtualStages > 1 ? "×" + std::to_string(virtualStages) : "");
  os << " " << (recompute == "selective" ? "sel" : recompute);
  if (recompute == "budget")
    os << "(" << budgetFullLayers << " full)";
  return os.str();
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
  os << " --set batch_size=" << dp * microbatchSize << " --precision " << request.precision;
  TrainingPipelineOptions options = layoutOptions(request, *this);
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
    std::ostringstream gib;
    gib << std::floor(request.cluster.memoryBytes / (1ll << 30)) << "GiB";
    os << " --recompute budget --memory-budget " << gib.str();
  } else if (recompute != "none") {
    os << " --recompute " << recompute;
  }
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
  return true;
}


bool runPlan(const Request &request, int64_t verified, Result &result, std::string &error) {
  if (std::string bad = validate(request.cluster); !bad.empty()) {
    error = bad;
    return false;
  }
  if (request.globalBatch <= 0) {
    error = "give the global batch (--global-batch, sequences per step)";
    return false;
  }
  ModelShape shape;
  if (!modelShape(request, shape, error))
    return false;
  Request resolved = request;
  if (resolved.seqLen <= 0)
    resolved.seqLen = shape.seqLen;
  result.seqLen = resolved.seqLen;
  result.parameters = shape.parameters;
  result.layers = shape.layers;
  auto start = std::chrono::steady_clock::now();
  Search search(resolved, shape, result);
  search.run();
  // Confirm the leaders compile in their real layout (at one layer per
  // chunk and one microbatch per stage, which is quick at any width).
  std::vector<Prediction> kept;
  for (Prediction &p : result.ranked) {
    if (static_cast<int64_t>(kept.size()) >= verified) {
      kept.push_back(p);
      continue;
    }
    const Layout &l = p.layout;
    Layout reduced = l;
    reduced.microbatches = l.pp;
    if (reduced.recompute == "budget")
      reduced.recompute = "selective";
    std::string why;
    if (search.cache().compile(layoutOptions(resolved, reduced), l.pp * l.virtualStages,
                               l.dp * l.microbatchSize, why))
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
  TrainingPipelineOptions options = layoutOptions(request, layout);
  if (layout.recompute == "budget") {
    error = "compile a budget layout with llmc compile --recompute budget";
    return false;
  }
  mlir::OwningOpRef<mlir::ModuleOp> module =
      cache.compile(options, shape.layers, layout.dp * layout.microbatchSize, error);
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
