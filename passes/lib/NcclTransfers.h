//===- NcclTransfers.h - pipeline transfers as NCCL runs them ---*- C++ -*-===//
//
// On the CPU a pipeline send returns at once and a receive picks its message
// by tag. NCCL has neither: a send blocks its stream until the peer posts
// the matching receive, and the n-th send from one rank to another matches
// the n-th receive there from the first on the same communicator, whatever
// the tags. So transfers travel on channels (common/TransferChannel.h),
// each a stream and a communicator of its own: by direction (to later or
// earlier stages) and link (between neighbours by the parity of the lower
// stage, or a far one). The runtime issues each run of consecutive sends
// and receives on one stream as one group (ncclGroupStart/End), whose
// transfers progress together. For --target cuda the compiler therefore
// puts each stage's sends on a channel in the order its peer receives them
// there, then proves that the stages' programs, run together with those
// rules, cannot hang.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_PASSES_LIB_NCCLTRANSFERS_H
#define LLMC_PASSES_LIB_NCCLTRANSFERS_H

#include "mlir/IR/BuiltinOps.h"

namespace llmc {

/// Gives every send and receive its channel by the direction its data
/// flows — a send to a later stage (shift > 0) and the receive from an
/// earlier one (shift < 0) downstream, the others upstream — and its link:
/// between neighbours by the parity of the lower stage (the stage modules'
/// order), or a far one.
void assignTransferChannels(mlir::ModuleOp module);

/// Delays sends (never advances one) so that every stage sends to each
/// peer, on each channel, in the order of the tags that peer receives from
/// it there. Sent buffers
/// stay intact until the program's end (the memory plan), so a later send
/// reads the same bytes. Runs before streams are placed; fails, naming the
/// tags, if a peer never receives what a stage sends.
mlir::LogicalResult orderSendsAsReceived(mlir::ModuleOp module);

/// Runs each program kind of every pipeline stage (the stage modules in pp
/// order; a module without them runs its one program as every stage) on
/// its streams with blocking, grouped transfers paired per channel, events
/// and collectives over pp as rendezvous. Fails, naming what each stuck
/// stage waits for, if they cannot all finish, or if transfers between two
/// stages on one channel would pair different tags. A module without
/// transfers passes.
mlir::LogicalResult verifyPointToPointProgress(mlir::ModuleOp module);

} // namespace llmc

#endif
