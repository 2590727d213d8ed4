//===- FuseElementwise.h - llmc-fuse's elementwise chains -------*- C++ -*-===//
//
// The `elementwise` fusion of llmc-fuse (passes/Fuse.cpp), kept in its own
// file: chains of elementwise llm ops become one llm.fused_elementwise.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_FUSEELEMENTWISE_H
#define LLMC_PASSES_FUSEELEMENTWISE_H

#include "mlir/IR/BuiltinOps.h"

namespace llmc {

/// Fuses every chain of at least two elementwise ops of one part of the
/// step in `module` into one llm.fused_elementwise; returns the number of
/// fused ops created. Runs after the other fusions and takes what they
/// left.
int fuseElementwiseChains(mlir::ModuleOp module);

} // namespace llmc

#endif
