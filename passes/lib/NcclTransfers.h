//===- NcclTransfers.h - pipeline transfers as NCCL runs them ---*- C++ -*-===//
//
// On the CPU a pipeline send returns at once and a receive picks its message
// by tag. NCCL has neither: a send blocks its stream until the peer posts
// the matching receive, and the n-th send from one rank to another matches
// the n-th receive there from the first, whatever the tags. The runtime
// issues each run of consecutive sends and receives on one stream as one
// group (ncclGroupStart/End), whose transfers progress together. For
// --target cuda the compiler therefore puts each stage's sends in the order
// its peer receives them, then proves that the stages' programs, run
// together with those rules, cannot hang.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_PASSES_LIB_NCCLTRANSFERS_H
#define LLMC_PASSES_LIB_NCCLTRANSFERS_H

#include "mlir/IR/BuiltinOps.h"

namespace llmc {

/// Delays sends (never advances one) so that every stage sends to each
/// peer in the order of the tags that peer receives from it. Sent buffers
/// stay intact until the program's end (the memory plan), so a later send
/// reads the same bytes. Runs before streams are placed; fails, naming the
/// tags, if a peer never receives what a stage sends.
mlir::LogicalResult orderSendsAsReceived(mlir::ModuleOp module);

/// Runs each program kind of every pipeline stage (the stage modules in pp
/// order; a module without them runs its one program as every stage) on
/// its streams with blocking, grouped transfers, events and collectives
/// over pp as rendezvous. Fails, naming what each stuck stage waits for, if
/// they cannot all finish, or if transfers between two stages would pair
/// different tags. A module without transfers passes.
mlir::LogicalResult verifyPointToPointProgress(mlir::ModuleOp module);

} // namespace llmc

#endif
