//===- MemoryBudget.cpp - refuse plans that do not fit --------------------===//
//
// The plan is exact (the runtime allocates its arena and nothing else), so
// "will it fit?" is answered at compile time. A plan over the budget is an
// error that says where the bytes go and what would move them.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/SizeFormat.h"

#include <map>

namespace llmc {
#define GEN_PASS_DEF_MEMORYBUDGET
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// What shrinks each kind of memory.
const char *remedy(StringRef category) {
  if (category == "activations")
    return "--recompute selective|full|budget=<bytes>, --offload activations (keeps them in "
           "host memory), --precision bf16, fewer rows per microbatch (a smaller batch_size "
           "with more --microbatches), more pipeline stages (pp) or tensor parallelism (tp, --sp)";
  if (category == "optimizer state")
    return "--zero 1 (shards it over dp), --offload optimizer (keeps it in host memory), "
           "more pp or tp";
  if (category == "gradients")
    return "--zero 2 (shards them over dp), --precision bf16, more pp or tp";
  if (category == "workspace")
    return "--precision bf16, fewer rows per microbatch, tensor parallelism (tp)";
  if (category == "communication buffers")
    return "with ZeRO-3 --fsdp-prefetch 0 and --fsdp-reshard-after-forward=true (fewer gathered "
           "parameters live), fewer rows per microbatch";
  if (category == "parameters")
    return "--zero 3 (shards them over dp), --precision bf16, more pp or tp";
  return "more pp or tp";
}

struct MemoryBudgetPass : llmc::impl::MemoryBudgetBase<MemoryBudgetPass> {
  using MemoryBudgetBase::MemoryBudgetBase;

  void runOnOperation() override {
    if (bytes < 0) {
      getOperation().emitError() << "memory budget must be >= 0 bytes, got "
                                 << static_cast<int64_t>(bytes);
      return signalPassFailure();
    }
    if (bytes == 0)
      return;
    SmallVector<ModuleOp> roles = programModules(getOperation());
    for (auto [index, role] : llvm::enumerate(roles)) {
      auto arena = role->getAttrOfType<IntegerAttr>(exec::kArenaBytesAttr);
      auto plan = role->getAttrOfType<DictionaryAttr>("exec.memory_plan");
      if (!arena || !plan) {
        role.emitError("memory budget: the module is not lowered (run llmc-lower-to-exec)");
        return signalPassFailure();
      }
      if (arena.getInt() <= bytes)
        continue;
      // Where the bytes go: persistent state, and the biggest program's
      // transient peak by category.
      std::map<std::string, int64_t> parts;
      auto get = [](DictionaryAttr d, StringRef key) {
        auto v = d ? d.getAs<IntegerAttr>(key) : IntegerAttr();
        return v ? v.getInt() : 0;
      };
      parts["parameters"] = get(plan, "params");
      // Optimizer state offloaded to host memory is not in the arena.
      parts["optimizer state"] = get(plan, "optimizer_state") - get(plan, "host_optimizer_state");
      DictionaryAttr worst;
      if (auto programs = plan.getAs<DictionaryAttr>("programs"))
        for (NamedAttribute p : programs)
          if (auto d = dyn_cast<DictionaryAttr>(p.getValue()); d && (!worst || get(d, "peak") > get(worst, "peak")))
            worst = d;
      if (worst)
        for (NamedAttribute entry : worst) {
          StringRef name = entry.getName().getValue();
          auto bytes = dyn_cast<IntegerAttr>(entry.getValue());
          if (name == "peak" || name == "live_bound" || !bytes) // the rest are categories
            continue;
          std::string label = memoryCategoryLabel(name);
          parts[label] += bytes.getInt();
        }
      SmallVector<std::pair<int64_t, std::string>> sorted;
      for (auto &[name, size] : parts)
        sorted.push_back({size, name});
      llvm::sort(sorted, [](auto &a, auto &b) { return a.first > b.first; });
      std::string who = roles.size() > 1 ? ("pipeline stage " + Twine(index) + " (ranks ").str()
                                         : std::string("each rank (");
      if (roles.size() > 1) {
        std::string ranks;
        if (auto list = role->getAttrOfType<DenseI64ArrayAttr>(kStageRanksAttr))
          for (int64_t r : list.asArrayRef())
            ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
        who += ranks + ")";
      } else {
        who = "each rank";
      }
      InFlightDiagnostic error = getOperation().emitError();
      error << "memory budget: " << who << " needs " << formatSize(arena.getInt()) << ", "
            << formatSize(arena.getInt() - bytes) << " over the " << formatSize(bytes) << " budget; largest: ";
      for (size_t i = 0; i < std::min<size_t>(3, sorted.size()); ++i)
        error << (i ? ", " : "") << sorted[i].second << " " << formatSize(sorted[i].first);
      error << ". To shrink " << sorted[0].second << ": " << remedy(sorted[0].second);
      if (sorted.size() > 1)
        error << "; " << sorted[1].second << ": " << remedy(sorted[1].second);
      return signalPassFailure();
    }
  }
};

} // namespace
