//===- ExpertParallel.h - experts spread over a mesh axis -------*- C++ -*-===//
#ifndef LLMC_PASSES_LIB_EXPERTPARALLEL_H
#define LLMC_PASSES_LIB_EXPERTPARALLEL_H

#include "dialects/Dist/DistDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <cstdint>

namespace llmc {

/// The rows of one slot of a capacity-limited llm.moe_pack: a rank's
/// `rows` copies, at most `capacity` for each of the slot's
/// `expertsPerSlot` experts.
inline int64_t capacitySlotRows(int64_t rows, int64_t expertsPerSlot, int64_t capacity) {
  return std::min(rows, expertsPerSlot * capacity);
}

/// Spreads the experts of every mixture-of-experts layer of `forward` over
/// the `parts` ranks of mesh axis `axis`: each rank keeps E / parts
/// experts' stacked weights. Training (`sharedTokens` false): the batch is
/// already split over `axis`, and the routed rows travel to their expert's
/// rank and back by all-to-all. A generation step (`sharedTokens`): every
/// rank holds the same tokens, so each computes its own experts' rows and
/// an all-reduce over `axis` adds the layer's partial outputs. Errors name
/// the op or parameter that cannot be split.
/// Whether `user` only moves the experts' output rows `rows` on their way
/// home (moe_ungroup, dist.all_to_all, llm.pad, moe_unpack: linear in
/// them), so a sum over ranks of partial rows commutes with it.
inline bool movesExpertRows(mlir::Operation *user, mlir::Value rows) {
  return mlir::isa<dist::AllToAllOp, llm::PadOp>(user) ||
         (mlir::isa<llm::MoEUngroupOp, llm::MoEUnpackOp>(user) && user->getOperand(0) == rows);
}

mlir::LogicalResult applyExpertParallel(mlir::func::FuncOp forward, llvm::StringRef axis,
                                        int64_t parts, bool sharedTokens);

} // namespace llmc

#endif
