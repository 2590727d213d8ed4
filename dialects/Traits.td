//===- Traits.td - what passes need to know about an op ----*- tablegen -*-===//
//
// Properties that passes used to keep in hand-written op lists. An op states
// them where it is defined, so a new op is one edit: its definition. The
// C++ side (empty marker traits) is dialects/Traits.h.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_DIALECTS_TRAITS
#define LLMC_DIALECTS_TRAITS

include "mlir/IR/OpBase.td"

class LLMC_Trait<string name> : NativeOpTrait<name> {
  let cppNamespace = "::llmc::trait";
}

// Computes each token position from that position alone (elementwise ops,
// norms over the hidden dimension): sequence parallelism runs it on a
// sequence shard unchanged.
def Positionwise : LLMC_Trait<"Positionwise">;

// Worth keeping rather than redoing in backward (matmuls, attention,
// communication): activation recomputation never replays it.
def ExpensiveToRecompute : LLMC_Trait<"ExpensiveToRecompute">;

// Replayed in backward under every recompute mode, because keeping its
// result would undo its purpose (a 4-bit weight expanded to fp32).
def AlwaysRecompute : LLMC_Trait<"AlwaysRecompute">;

// Keeps the types it was built with under reduced precision (casts, the
// loss, constants): the precision pass leaves its results alone.
def KeepsPrecision : LLMC_Trait<"KeepsPrecision">;

// Every result after the first is a softmax statistic kept in fp32 under
// reduced precision (attention's log-sum-exp).
def F32TrailingResults : LLMC_Trait<"F32TrailingResults">;

// Megatron's tensor parallelism splits the feature dimension around it (an
// MLP activation): its operands come from column-parallel matmuls, its
// result feeds a row-parallel one, and it runs on the local features as is.
def ColumnParallelInterior : LLMC_Trait<"ColumnParallelInterior">;

// Combines values across rows of the batch (a sum over all elements, an
// optimizer step): data parallelism cannot run it on a local batch shard.
def MixesBatchRows : LLMC_Trait<"MixesBatchRows">;

#endif // LLMC_DIALECTS_TRAITS
