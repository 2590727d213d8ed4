//===- RecomputeBudget.cpp - the least recomputation that fits ------------===//

#include "compiler/RecomputeBudget.h"

#include "compiler/RecomputePrice.h"
#include "compiler/plan/ProgramCost.h"

#include "dialects/Annotations/Annotations.h"
#include "dialects/Exec/ExecDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/SizeFormat.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/WithColor.h"

#include <cstdio>
#include <map>
#include <optional>

using namespace mlir;

namespace llmc {

std::vector<std::string> layerNames(ModuleOp forward) {
  std::vector<std::string> names;
  forward.walk([&](llm::BlockOp block) {
    std::string name = block.getName().str();
    if (!llvm::is_contained(names, name))
      names.push_back(name);
  });
  return names;
}

std::string recomputeLevel(const std::vector<std::string> &layers, size_t level) {
  size_t count = layers.size();
  std::string modes;
  for (size_t i = 0; i < count; ++i) {
    const char *mode = level > 2 * count && i < level - 2 * count ? "full+offload"
                       : level > count && i < level - count       ? "full"
                       : i < level                                ? "selective"
                                                                  : nullptr;
    if (mode)
      modes += (modes.empty() ? "" : ",") + layers[i] + "=" + mode;
  }
  return modes;
}

/// Whether the search may offload activations: not where --offload
/// activations is refused (--inference) nor when it already offloads every
/// layer.
static bool offloadable(const CompileOptions &options) {
  CompileOptions probe = options;
  probe.offload = "activations";
  probe.recompute = "none";
  return resolveOptions(probe).empty() && !offloads(options, "activations");
}

/// The lowest level in (low, high] that fits, by bisection (memory falls
/// as the level rises): `low` does not fit, `high` does.
template <typename Fits>
static FailureOr<size_t> lowestFitting(size_t low, size_t high, Fits &fits) {
  while (high - low > 1) {
    size_t mid = (low + high) / 2;
    FailureOr<bool> ok = fits(mid);
    if (failed(ok))
      return failure();
    (*ok ? high : low) = mid;
  }
  return high;
}

namespace {

/// One compiled candidate: its largest arena, what each layer keeps for
/// its backward, and the priced seconds of its slowest rank's step.
struct Trial {
  int64_t arena = 0;
  std::map<std::string, double> savedPerLayer;
  double seconds = 0;
};

/// Reads a compiled module's arena, saved bytes per layer (the largest
/// over ranks) and step price.
Trial readTrial(ModuleOp module, const CompileOptions &options, const plan::Cluster &device) {
  Trial trial;
  plan::MeshShape mesh = plan::MeshShape::parse(options.mesh);
  double fp32Scale = plan::fp32MatmulScaleOf(options.target);
  for (ModuleOp role : programModules(module)) {
    if (auto arena = role->getAttrOfType<IntegerAttr>(exec::kArenaBytesAttr))
      trial.arena = std::max(trial.arena, arena.getInt());
    auto memory = role->getAttrOfType<DictionaryAttr>("exec.memory_plan");
    auto programs = memory ? memory.getAs<DictionaryAttr>("programs") : DictionaryAttr();
    auto train = programs ? programs.getAs<DictionaryAttr>("train_step") : DictionaryAttr();
    if (auto saved = train ? train.getAs<DictionaryAttr>("saved_per_layer") : DictionaryAttr())
      for (NamedAttribute layer : saved) {
        double &bytes = trial.savedPerLayer[layer.getName().str()];
        bytes = std::max<double>(bytes, cast<IntegerAttr>(layer.getValue()).getInt());
      }
    for (auto program : role.getOps<exec::ProgramOp>()) {
      if (program.getSymName() != "train_step")
        continue;
      plan::ProgramCost cost = plan::costProgram(program, device, mesh, fp32Scale);
      double seconds = 0;
      for (auto &[phase, phaseCost] : cost.phases) seconds += phaseCost.seconds();
      trial.seconds = std::max(trial.seconds, seconds);
    }
  }
  return trial;
}

/// Compiles `forward` with `options` (their recomputation as given; the
/// budget measured, not enforced) and reads the plan.
FailureOr<Trial> compileTrial(ModuleOp forward, const CompileOptions &options,
                              const plan::Cluster &device) {
  OwningOpRef<ModuleOp> candidate(cast<ModuleOp>(forward->clone()));
  CompileOptions lowered = options;
  lowered.emit = "exec";
  lowered.memoryBudgetBytes = 0;
  PassManager pm(forward.getContext());
  if (failed(buildTrainingPipeline(
          pm, lowered,
          [&](const llvm::Twine &message) { forward.emitError() << message.str(); })) ||
      failed(pm.run(*candidate)))
    return failure();
  return readTrial(*candidate, lowered, device);
}

/// The candidates a budget search compiles, each once, by layer modes.
class BudgetSearch {
public:
  BudgetSearch(ModuleOp forward, const CompileOptions &options)
      : forward(forward), options(options), layers(layerNames(forward)),
        device(plan::targetDevice(options.target, options.hostBw)) {}

  FailureOr<const Trial *> trial(const std::string &modes) {
    auto it = trials.find(modes);
    if (it != trials.end())
      return &it->second;
    CompileOptions candidate = options;
    candidate.recompute = "none";
    candidate.recomputeLayers = modes;
    FailureOr<Trial> compiled = compileTrial(forward, candidate, device);
    if (failed(compiled))
      return failure();
    return &(trials[modes] = *compiled);
  }

  FailureOr<bool> fits(const std::string &modes) {
    FailureOr<const Trial *> t = trial(modes);
    if (failed(t))
      return failure();
    return (*t)->arena <= options.memoryBudgetBytes;
  }

  /// Each layer's kept bytes and recomputation seconds, from the plans
  /// that recompute nothing, every layer selectively, every layer in full.
  /// A mode's seconds are shared equally by the layers (every built-in
  /// model's layers are alike).
  FailureOr<std::vector<LayerCosts>> measure() {
    size_t count = layers.size();
    std::vector<LayerCosts> costs(count);
    const Trial *byMode[3];
    for (int m : {kKeep, kSelective, kFull}) {
      FailureOr<const Trial *> t = trial(recomputeLevel(layers, m * count));
      if (failed(t))
        return failure();
      byMode[m] = *t;
    }
    for (size_t i = 0; i < count; ++i) {
      costs[i].name = layers[i];
      for (int m : {kKeep, kSelective, kFull}) {
        auto saved = byMode[m]->savedPerLayer.find(layers[i]);
        costs[i].keptBytes[m] = saved == byMode[m]->savedPerLayer.end() ? 0 : saved->second;
        costs[i].recomputeSeconds[m] =
            std::max(0.0, (byMode[m]->seconds - byMode[kKeep]->seconds) / count);
      }
    }
    return costs;
  }

  PriceModel priceModel() const {
    PriceModel model;
    model.hostLinkBandwidth = offloadable(options) ? device.hostLinkBandwidth : 0;
    model.microbatches = std::max<int64_t>(1, options.microbatches);
    return model;
  }

  ModuleOp forward;
  const CompileOptions &options;
  std::vector<std::string> layers;
  plan::Cluster device;
  std::map<std::string, Trial> trials;
};

/// The ladder's search: the cheapest level by recomputed FLOPs that fits,
/// offloading inputs only when every layer recomputed in full does not fit.
/// None when nothing fits.
FailureOr<std::optional<std::string>> searchLadder(BudgetSearch &search) {
  const std::vector<std::string> &layers = search.layers;
  auto fits = [&](size_t level) { return search.fits(recomputeLevel(layers, level)); };
  size_t top = 2 * layers.size();
  FailureOr<bool> fitsAll = fits(top);
  if (failed(fitsAll))
    return failure();
  if (*fitsAll) {
    FailureOr<size_t> level = lowestFitting(0, top, fits);
    if (failed(level))
      return failure();
    return std::optional<std::string>(recomputeLevel(layers, *level));
  }
  // Memory is not quite monotone at the top: recomputing the last layer
  // in full can cost more than selectively (its clones are live beside
  // the loss head's gradients), so try the other full-recompute levels.
  for (size_t level = top - 1; level > layers.size(); --level) {
    FailureOr<bool> ok = fits(level);
    if (failed(ok))
      return failure();
    if (*ok)
      return std::optional<std::string>(recomputeLevel(layers, level));
  }
  // Then the offloading levels above full recomputation (every layer
  // full, the first k layers' inputs in host memory), as few as fit.
  if (!offloadable(search.options))
    return std::optional<std::string>();
  size_t high = top + layers.size();
  FailureOr<bool> all = fits(high);
  if (failed(all))
    return failure();
  if (!*all)
    return std::optional<std::string>();
  FailureOr<size_t> level = lowestFitting(top, high, fits);
  if (failed(level))
    return failure();
  return std::optional<std::string>(recomputeLevel(layers, *level));
}

/// The priced ladder's search: its lowest level that fits, by bisection
/// (modeled bytes fall along it). None when its top does not fit.
FailureOr<std::optional<std::string>> searchPriced(BudgetSearch &search,
                                                   const std::vector<LayerCosts> &costs) {
  std::vector<std::vector<std::string>> ladder = pricedLadder(costs, search.priceModel());
  auto fits = [&](size_t level) { return search.fits(layerModes(costs, ladder[level])); };
  size_t top = ladder.size() - 1;
  FailureOr<bool> fitsTop = fits(top);
  if (failed(fitsTop))
    return failure();
  if (top == 0 || !*fitsTop)
    return std::optional<std::string>();
  FailureOr<size_t> level = lowestFitting(0, top, fits);
  if (failed(level))
    return failure();
  return std::optional<std::string>(layerModes(costs, ladder[*level]));
}

std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", seconds);
  return text;
}

RecomputeChoice describe(const BudgetSearch &search, const std::vector<LayerCosts> &costs,
                         const std::string &chosen) {
  RecomputeChoice choice;
  choice.layers = chosen;
  PriceModel model = search.priceModel();
  if (model.hostLinkBandwidth <= 0)
    model.hostLinkBandwidth = search.device.hostLinkBandwidth; // a named offload is priced
  std::vector<std::string> modes = parseLayerModes(costs, chosen);
  for (size_t i = 0; i < costs.size(); ++i) {
    LayerChoice c = choiceOf(costs[i], model, modes[i]);
    choice.price += (i ? "," : "") + costs[i].name + "=" + c.mode + ":" + formatSeconds(c.seconds);
    choice.seconds += c.seconds;
  }
  const plan::Cluster &d = search.device;
  char basis[256];
  std::snprintf(basis, sizeof basis,
                "--target %s priced on %s; host link %.3g GB/s each way, copies not overlapped",
                search.options.target.c_str(), d.deviceName.c_str(), model.hostLinkBandwidth / 1e9);
  choice.basis = basis;
  return choice;
}

} // namespace

FailureOr<int64_t> plannedArenaBytes(ModuleOp forward, const CompileOptions &options) {
  FailureOr<Trial> trial =
      compileTrial(forward, options, plan::targetDevice(options.target, options.hostBw));
  if (failed(trial))
    return failure();
  return trial->arena;
}

FailureOr<std::string> chooseRecompute(ModuleOp forward, const CompileOptions &options,
                                       StringRef tool, RecomputeChoice *priced) {
  BudgetSearch search(forward, options);
  const std::vector<std::string> &layers = search.layers;
  if (layers.empty()) {
    forward.emitError("recompute budget: the model has no layers (llm.block) to recompute");
    return failure();
  }
  FailureOr<bool> fitsNone = search.fits("");
  if (failed(fitsNone))
    return failure();
  if (*fitsNone)
    return std::string();
  FailureOr<std::vector<LayerCosts>> costs = search.measure();
  if (failed(costs))
    return failure();
  auto finish = [&](const std::string &chosen) -> FailureOr<std::string> {
    if (priced)
      *priced = describe(search, *costs, chosen);
    return chosen;
  };
  FailureOr<std::optional<std::string>> ladder = searchLadder(search);
  if (failed(ladder))
    return failure();
  FailureOr<std::optional<std::string>> cheapest = searchPriced(search, *costs);
  if (failed(cheapest))
    return failure();
  PriceModel model = search.priceModel();
  auto seconds = [&](const std::string &modes) {
    return planSeconds(*costs, model, parseLayerModes(*costs, modes));
  };
  if (*cheapest && (!*ladder || seconds(**cheapest) < seconds(**ladder)))
    return finish(**cheapest);
  if (*ladder)
    return finish(**ladder);
  // Compiling this plan fails in llmc-memory-budget, which says what
  // else to change; say first that recomputation alone is not enough.
  size_t top = 2 * layers.size();
  int64_t fullBytes = search.trials[recomputeLevel(layers, top)].arena;
  bool offloading = offloadable(options);
  std::string last = recomputeLevel(layers, offloading ? top + layers.size() : top);
  llvm::WithColor::note(llvm::errs(), tool)
      << "no recomputation fits " << formatSize(options.memoryBudgetBytes)
      << ": with every layer recomputed in full each rank needs " << formatSize(fullBytes)
      << (offloading ? ", and with every layer's input offloaded too " +
                           formatSize(search.trials[last].arena)
                     : std::string())
      << "\n";
  return finish(last);
}

} // namespace llmc
