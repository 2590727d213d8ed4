//===- Layout.h - the parallel layout passes agree on -----------*- C++ -*-===//
//
// llmc-shard records the layout once (the `dist.mesh @mesh` op plus the
// module attribute `llmc.layout`); the optimizer, FSDP and lowering passes
// read it back through this header.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_LAYOUT_H
#define LLMC_PASSES_LIB_LAYOUT_H

#include "dialects/Annotations/Annotations.h"
#include "dialects/Dist/DistDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace llmc {

inline constexpr llvm::StringLiteral kMeshName = "mesh";

struct Layout {
  dist::MeshOp mesh;
  std::vector<std::string> batchAxes; ///< split the batch (dp, fsdp)
  std::vector<std::string> zeroAxes;  ///< shard optimizer state / grads / params
  int64_t zero = 0;
  std::string gradSync = "allreduce";

  int64_t size(llvm::ArrayRef<std::string> axes) const;
  int64_t batchSize() const { return size(batchAxes); }
  mlir::ArrayAttr axesAttr(mlir::MLIRContext *context, llvm::ArrayRef<std::string> axes) const;
};

/// The layout of `module`, or nullopt for a single-rank module.
std::optional<Layout> readLayout(mlir::ModuleOp module);

} // namespace llmc

#endif
