//===- OffloadCost.h - what --offload optimizer costs a step ----*- C++ -*-===//
//
// ZeRO-Offload (`llmc compile --offload optimizer`) keeps the optimizer
// state in host memory and runs the update on the host. Per step and rank
// it moves the rank's gradients (its ZeRO shard, in their dtype) down and
// its updated parameters up over the device's host link, and the host
// reads and writes the state while updating. The runtime runs the copies
// and the host update in the compute stream's order, the update after the
// global norm: nothing of this overlaps with the device's work.
//
// Activation offloading (`--offload activations`) copies what each layer
// saves for its backward down after its forward and back up before its
// backward, every microbatch, on the same stream: exposed too.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_PLAN_OFFLOADCOST_H
#define LLMC_COMPILER_PLAN_OFFLOADCOST_H

#include "compiler/plan/Cluster.h"

#include <cstdint>

namespace llmc::plan {

/// One rank's host traffic per step, read from its compiled program.
struct OffloadTraffic {
  double downBytes = 0;   ///< copy_to_host: gradients (and lr, norm, ...)
  double upBytes = 0;     ///< copy_to_device: updated parameters
  double updateBytes = 0; ///< bytes the host kernels read and write
  double stateBytes = 0;  ///< optimizer state kept in host memory
  double stagingBytes = 0; ///< host copies of what the update reads and writes
  /// --offload activations: every saved value copied down after its layer's
  /// forward and back up before its backward, both ways together, per step
  /// (each rank its own microbatches: not sharded).
  double activationCopyBytes = 0;
  double activationHostBytes = 0; ///< host memory holding them
  /// The same traffic for one of `dp` ranks under ZeRO stage `zero`
  /// (ZeRO ≥ 1 shards the state, the copies and the update over dp).
  OffloadTraffic shard(int64_t zero, int64_t dp) const;
  /// Host memory per rank: the state and the staging copies.
  double hostBytes() const { return stateBytes + stagingBytes + activationHostBytes; }
};

/// Seconds offloading adds to a step, none of it overlapped:
///   (down + up + activation copies) / host link
///     +  update / (host memory bandwidth / g)
/// where g = the devices sharing a node's host memory (min(node, devices)).
/// The activation copies run in the compute stream's order (docs/memory.md),
/// so they are priced as exposed, like the optimizer's.
double offloadSeconds(const OffloadTraffic &traffic, const Cluster &cluster);

} // namespace llmc::plan

#endif
