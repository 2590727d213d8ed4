//===- RecomputeBudget.cpp - the least recomputation that fits ------------===//

#include "compiler/RecomputeBudget.h"

#include "dialects/Annotations/Annotations.h"
#include "dialects/Exec/ExecDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/SizeFormat.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/WithColor.h"

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

FailureOr<int64_t> plannedArenaBytes(ModuleOp forward, const CompileOptions &options) {
  OwningOpRef<ModuleOp> trial(cast<ModuleOp>(forward->clone()));
  CompileOptions lowered = options;
  lowered.emit = "exec";
  lowered.memoryBudgetBytes = 0; // measured here, not enforced
  PassManager pm(forward.getContext());
  if (failed(buildTrainingPipeline(pm, lowered, [&](const llvm::Twine &message) {
        forward.emitError() << message.str();
      })) ||
      failed(pm.run(*trial)))
    return failure();
  int64_t largest = 0;
  for (ModuleOp role : programModules(*trial))
    if (auto arena = role->getAttrOfType<IntegerAttr>(exec::kArenaBytesAttr))
      largest = std::max(largest, arena.getInt());
  return largest;
}

/// Whether the search may offload activations: not under pipeline stages
/// (llmc-offload-activations refuses them) nor when --offload activations
/// already offloads every layer.
static bool offloadable(const CompileOptions &options) {
  CompileOptions probe = options;
  probe.offload = "activations";
  probe.recompute = "none";
  return resolveOptions(probe).empty() && !offloads(options, "activations");
}

/// The offloading levels above full recomputation (every layer full, the
/// first k layers' inputs in host memory), as few layers as fit: memory falls
/// as k rises, so by bisection. None when even every layer offloaded does
/// not fit.
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

template <typename Fits>
static FailureOr<std::optional<std::string>>
chooseOffload(const CompileOptions &options, const std::vector<std::string> &layers, Fits &fits) {
  if (!offloadable(options))
    return std::optional<std::string>();
  size_t low = 2 * layers.size(), high = low + layers.size(); // low does not fit
  FailureOr<bool> all = fits(high);
  if (failed(all))
    return failure();
  if (!*all)
    return std::optional<std::string>();
  FailureOr<size_t> level = lowestFitting(low, high, fits);
  if (failed(level))
    return failure();
  return std::optional<std::string>(recomputeLevel(layers, *level));
}

FailureOr<std::string> chooseRecompute(ModuleOp forward, const CompileOptions &options,
                                       StringRef tool) {
  std::vector<std::string> layers = layerNames(forward);
  if (layers.empty()) {
    forward.emitError("recompute budget: the model has no layers (llm.block) to recompute");
    return failure();
  }
  int64_t largest = 0; // of the last plan tried
  auto fits = [&](size_t level) -> FailureOr<bool> {
    CompileOptions trial = options;
    trial.recompute = "none";
    trial.recomputeLayers = recomputeLevel(layers, level);
    FailureOr<int64_t> bytes = plannedArenaBytes(forward, trial);
    if (failed(bytes))
      return failure();
    largest = *bytes;
    return *bytes <= options.memoryBudgetBytes;
  };
  // Memory falls as the level rises (each level keeps fewer activations),
  // so the cheapest fitting level is found by bisection: O(log L) compiles.
  // Offloading comes last: it costs host memory and a copy each way per
  // step, where recomputation costs FLOPs the device has.
  size_t top = 2 * layers.size();
  FailureOr<bool> fitsNone = fits(0);
  if (failed(fitsNone))
    return failure();
  if (*fitsNone)
    return std::string();
  FailureOr<bool> fitsAll = fits(top);
  if (failed(fitsAll))
    return failure();
  int64_t fullBytes = largest;
  if (!*fitsAll) {
    // Memory is not quite monotone at the top: recomputing the last layer
    // in full can cost more than selectively (its clones are live beside
    // the loss head's gradients), so try the other full-recompute levels.
    for (size_t level = top - 1; level > layers.size(); --level) {
      FailureOr<bool> ok = fits(level);
      if (failed(ok))
        return failure();
      if (*ok)
        return recomputeLevel(layers, level);
    }
    FailureOr<std::optional<std::string>> offloaded = chooseOffload(options, layers, fits);
    if (failed(offloaded))
      return failure();
    if (*offloaded)
      return **offloaded;
    // Compiling this plan fails in llmc-memory-budget, which says what
    // else to change; say first that recomputation alone is not enough.
    llvm::WithColor::note(llvm::errs(), tool)
        << "no recomputation fits " << formatSize(options.memoryBudgetBytes)
        << ": with every layer recomputed in full each rank needs " << formatSize(fullBytes)
        << (offloadable(options)
                ? ", and with every layer's input offloaded too " + formatSize(largest)
                : std::string())
        << "\n";
    return recomputeLevel(layers, offloadable(options) ? top + layers.size() : top);
  }
  FailureOr<size_t> level = lowestFitting(0, top, fits);
  if (failed(level))
    return failure();
  return recomputeLevel(layers, *level);
}

} // namespace llmc
