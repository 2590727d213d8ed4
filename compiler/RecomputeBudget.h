//===- RecomputeBudget.h - the least recomputation that fits ---*- C++ -*-===//
//
// `--recompute budget=<bytes>`: of the per-layer recomputation plans, from
// none through selective to full, choose the cheapest whose memory plan fits
// the budget on every rank.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_COMPILER_RECOMPUTEBUDGET_H
#define LLMC_COMPILER_RECOMPUTEBUDGET_H

#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace llmc {

/// The layers (`llm.block` names) of a forward graph, in model order.
std::vector<std::string> layerNames(mlir::ModuleOp forward);

/// Plan `level` of the ladder the search walks, for `layers` (L of them):
/// level k <= L makes the first k layers selective; level L + k makes every
/// layer selective and the first k full; level 2L + k makes every layer
/// full and offloads the first k layers' activations (their inputs) to host
/// memory. Returned as `recompute` layer modes
/// ("h.0=full+offload,h.1=full"; empty at level 0). Earlier layers go
/// first because they hold their activations longest (and, in a pipeline,
/// the first stage holds the most microbatches in flight).
std::string recomputeLevel(const std::vector<std::string> &layers, size_t level);

/// The largest arena (bytes) of any rank when `forward` is compiled with
/// `options` (whose recomputation and budget are taken as given).
mlir::FailureOr<int64_t> plannedArenaBytes(mlir::ModuleOp forward, const CompileOptions &options);

/// What a budget search chose and what it costs (RecomputePrice.h).
struct RecomputeChoice {
  std::string layers; ///< layer modes, as chooseRecompute returns them
  /// Per layer "h.0=offload:1.2e-04" (mode and seconds added per step).
  std::string price;
  std::string basis; ///< the device and host link it was priced on
  double seconds = 0; ///< the sum
};

/// The plan that fits `options.memoryBudgetBytes` at the least priced time,
/// as layer modes. Two orders are searched, each by bisection over its
/// levels: the ladder above, and the priced ladder (RecomputePrice.h),
/// which may keep a layer's values in host memory instead of recomputing
/// them where the host link makes that cheaper (never under pipeline
/// stages); the cheaper of their fitting plans wins, the ladder's on a tie.
/// When nothing fits, returns the ladder's last level: compiling it fails
/// in llmc-memory-budget, which says what else to change. `priced`, when
/// given, receives the choice's price.
mlir::FailureOr<std::string> chooseRecompute(mlir::ModuleOp forward, const CompileOptions &options,
                                             llvm::StringRef tool = "llmc",
                                             RecomputeChoice *priced = nullptr);

} // namespace llmc

#endif // LLMC_COMPILER_RECOMPUTEBUDGET_H
