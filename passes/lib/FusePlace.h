//===- FusePlace.h - where a fused op belongs (llmc-fuse) -------*- C++ -*-===//
//
// The fusions of llmc-fuse (passes/fuse/) join only ops that run in the
// same part of the step, and give the fused op that place. Both facts live
// in an op's discardable attributes (microbatch, pipeline action, block,
// forward or backward, replay) and its block.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_FUSEPLACE_H
#define LLMC_PASSES_LIB_FUSEPLACE_H

#include "mlir/IR/Operation.h"

namespace llmc {

/// `a` and `b` run in the same part of the step.
inline bool samePlace(mlir::Operation *a, mlir::Operation *b) {
  return a->getBlock() == b->getBlock() &&
         a->getDiscardableAttrDictionary() == b->getDiscardableAttrDictionary();
}

/// Copies `from`'s discardable attributes (where it belongs, and its rank
/// offsets) onto the fused op `to`.
inline void copyPlace(mlir::Operation *from, mlir::Operation *to) {
  for (mlir::NamedAttribute attr : from->getDiscardableAttrs())
    to->setAttr(attr.getName(), attr.getValue());
}

} // namespace llmc

#endif
