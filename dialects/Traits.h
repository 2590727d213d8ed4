//===- Traits.h - what passes need to know about an op ----------*- C++ -*-===//
//
// Marker traits declared in dialects/Traits.td; each is documented there.
// Passes ask `op->hasTrait<llmc::trait::Positionwise>()` instead of
// keeping lists of op classes.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_DIALECTS_TRAITS_H
#define LLMC_DIALECTS_TRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace llmc::trait {

#define LLMC_MARKER_TRAIT(Name)                                                                  \
  template <typename ConcreteType>                                                               \
  class Name : public mlir::OpTrait::TraitBase<ConcreteType, Name> {};

LLMC_MARKER_TRAIT(Positionwise)
LLMC_MARKER_TRAIT(ExpensiveToRecompute)
LLMC_MARKER_TRAIT(AlwaysRecompute)
LLMC_MARKER_TRAIT(KeepsPrecision)
LLMC_MARKER_TRAIT(F32TrailingResults)
LLMC_MARKER_TRAIT(MixesBatchRows)
LLMC_MARKER_TRAIT(ColumnParallelInterior)

#undef LLMC_MARKER_TRAIT

} // namespace llmc::trait

#endif
