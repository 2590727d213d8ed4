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

/// The cheapest level that fits `options.memoryBudgetBytes`, as layer modes;
/// the offloading levels only when no recomputation alone fits (and not
/// under pipeline stages). When no level fits, returns the last level:
/// compiling it fails in llmc-memory-budget, which says what else to change.
mlir::FailureOr<std::string> chooseRecompute(mlir::ModuleOp forward, const CompileOptions &options,
                                             llvm::StringRef tool = "llmc");

} // namespace llmc

#endif // LLMC_COMPILER_RECOMPUTEBUDGET_H
