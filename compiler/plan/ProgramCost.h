//===- ProgramCost.h - step time of a compiled program ----------*- C++ -*-===//
//
// Reads an exec program instruction by instruction and prices it on a
// cluster: each kernel by the device's efficiency model (KernelCost.h:
// GEMMs by their tile waves, attention at its measured rate, the rest at
// the achieved memory bandwidth, plus a launch cost), each collective by the alpha-beta model of the link its group
// spans in the layout being planned (inside a node or across nodes). Costs
// are summed per pipeline action phase (the `exec.action` of each
// instruction: F, B or W) and for the work outside any microbatch (the
// optimizer step).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_PLAN_PROGRAMCOST_H
#define LLMC_COMPILER_PLAN_PROGRAMCOST_H

#include "compiler/plan/Cluster.h"
#include "compiler/plan/KernelCost.h"

#include "mlir/IR/Operation.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace llmc::plan {

struct Cost {
  double computeSeconds = 0; ///< kernels
  double commSeconds = 0;    ///< collectives inside the work (tensor/sequence parallel)
  double p2pBytes = 0;       ///< pipeline sends (priced by the layout's pp link)
  double p2pMessages = 0;
  double flops = 0;
  double modelFlops = 0;     ///< products and attention, as MFU counts them (KernelCost.h)
  double bytes = 0; ///< kernel memory traffic
  int64_t kernels = 0;
  double seconds() const { return computeSeconds + commSeconds; }
  Cost &operator+=(const Cost &o);
  Cost operator-(const Cost &o) const;
  Cost scaled(double factor) const;
};

/// A collective left unpriced because its group's size is the layout's to
/// choose (data parallelism: probes compile with two ranks).
struct Message {
  char phase = 'S';    ///< as ProgramCost's phases
  int microbatch = -1; ///< -1 outside microbatches
  Collective kind = Collective::AllReduce;
  double bytes = 0;    ///< the full buffer (see collectiveSeconds)
  std::vector<std::string> group; ///< the mesh axes it spans ("dp", "ep")
};

/// Work by phase: 'F' forward, 'B' backward (input and weight gradients),
/// 'W' split-off weight gradients (zero-bubble), 'S' outside microbatches
/// (gradient synchronisation and the optimizer).
struct ProgramCost {
  std::map<char, Cost> phases;
  std::vector<Message> deferred; ///< collectives over a deferred axis
  int64_t microbatches = 0; ///< distinct microbatch actions seen
  Cost phase(char p) const;
};

/// Prices `program` (an exec.program) for a job laid out as `mesh` on
/// `cluster`. Collectives on groups spanning a node use the inter-node
/// link. `fp32MatmulScale` scales the GEMM rate for fp32 products (1 on a
/// CPU; ½ on tensor-core GPUs, whose fp32 path is TF32 at half the bf16
/// rate).
/// Collectives whose group includes one of `deferredAxes` are recorded in
/// `deferred` instead of priced, but for all-to-alls: expert parallelism's
/// exchange is compiled at the layout's own ep size, so it is priced where
/// it stands, on the link its ep group spans. Under an `ep` axis the
/// experts' grouped matmuls are priced at the rows received (KernelCost.h).
ProgramCost costProgram(mlir::Operation *program, const Cluster &cluster, const MeshShape &mesh,
                        double fp32MatmulScale, const std::vector<std::string> &deferredAxes = {});

} // namespace llmc::plan

#endif
