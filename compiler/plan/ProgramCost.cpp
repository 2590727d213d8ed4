//===- ProgramCost.cpp - kernel and alpha-beta pricing of exec programs ---===//

#include "compiler/plan/ProgramCost.h"
#include "compiler/plan/KernelCost.h"

#include "dialects/Exec/ExecDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <set>

using namespace mlir;

namespace llmc::plan {

Cost &Cost::operator+=(const Cost &o) {
  computeSeconds += o.computeSeconds;
  commSeconds += o.commSeconds;
  p2pBytes += o.p2pBytes;
  p2pMessages += o.p2pMessages;
  flops += o.flops;
  modelFlops += o.modelFlops;
  bytes += o.bytes;
  kernels += o.kernels;
  return *this;
}

Cost Cost::operator-(const Cost &o) const {
  Cost c = *this;
  return c += o.scaled(-1);
}

Cost Cost::scaled(double f) const {
  Cost c;
  c.computeSeconds = computeSeconds * f;
  c.commSeconds = commSeconds * f;
  c.p2pBytes = p2pBytes * f;
  c.p2pMessages = p2pMessages * f;
  c.flops = flops * f;
  c.modelFlops = modelFlops * f;
  c.bytes = bytes * f;
  c.kernels = static_cast<int64_t>(kernels * f);
  return c;
}

Cost ProgramCost::phase(char p) const {
  auto it = phases.find(p);
  return it == phases.end() ? Cost() : it->second;
}

namespace {

/// The phase letter of an instruction's `exec.action` ("F3" → 'F', "B0.1"
/// → 'B') and its microbatch; 'S' and -1 outside the microbatches.
char phaseOf(Operation *op, std::set<std::string> &microbatches, int &microbatch) {
  microbatch = -1;
  auto action = op->getAttrOfType<StringAttr>("exec.action");
  if (!action || action.getValue().empty())
    return 'S';
  StringRef text = action.getValue();
  StringRef index = text.drop_front().split('.').first;
  microbatches.insert(index.str());
  if (index.getAsInteger(10, microbatch))
    microbatch = -1;
  return text.front();
}

} // namespace

ProgramCost costProgram(Operation *program, const Cluster &cluster, const MeshShape &mesh,
                        double fp32MatmulScale, const std::vector<std::string> &deferredAxes) {
  ProgramCost result;
  std::set<std::string> microbatches;
  const int64_t expertRanks = mesh.size("ep");
  auto link = [&](const std::vector<std::string> &group, double &alpha, double &beta) {
    bool inside = groupInsideNode(mesh, group, cluster.nodeSize);
    alpha = inside ? cluster.intraLatency : cluster.interLatency;
    beta = inside ? cluster.intraBandwidth : cluster.interBandwidth;
  };
  auto groupOf = [](ArrayAttr axes, int64_t &n, const MeshShape &mesh) {
    std::vector<std::string> group;
    n = 1;
    for (Attribute a : axes) {
      group.push_back(cast<StringAttr>(a).getValue().str());
      n *= mesh.size(group.back());
    }
    return group;
  };
  program->walk([&](Operation *op) {
    if (isa<exec::ProgramOp, exec::BufferOp>(op))
      return;
    Cost cost;
    // --offload optimizer's host kernels and copies, and the collectives
    // of layers run on the host, are priced from their bytes (OffloadCost.h,
    // OffloadChoice.h), not as the device's.
    if (op->hasAttr(exec::kOnHostAttr))
      return;
    if (auto kernel = dyn_cast<exec::KernelOp>(op);
        kernel && (kernel.getCallee() == "copy_to_host" || kernel.getCallee() == "copy_to_device"))
      return;
    if (isa<exec::KernelOp>(op)) {
      cost.computeSeconds = kernelSeconds(op, cluster, fp32MatmulScale, expertRanks);
      cost.flops = kernelFlops(op, expertRanks);
      cost.modelFlops = kernelModelFlops(op, expertRanks);
      cost.bytes = kernelBytes(op, expertRanks);
      cost.kernels = 1;
    } else if (auto send = dyn_cast<exec::SendOp>(op)) {
      cost.p2pBytes = bytesOf(send.getBuffer().getType());
      cost.p2pMessages = 1;
    } else {
      auto collective = [&](Collective kind, ArrayAttr axes, Type full) {
        int64_t n;
        std::vector<std::string> group = groupOf(axes, n, mesh);
        for (const std::string &axis : group)
          if (kind != Collective::AllToAll && llvm::is_contained(deferredAxes, axis)) {
            Message message;
            message.phase = phaseOf(op, microbatches, message.microbatch);
            message.kind = kind;
            message.bytes = bytesOf(full);
            message.group = group;
            result.deferred.push_back(message);
            return;
          }
        double alpha, beta;
        link(group, alpha, beta);
        cost.commSeconds = collectiveSeconds(kind, n, bytesOf(full), alpha, beta);
      };
      llvm::TypeSwitch<Operation *>(op)
          .Case([&](exec::AllReduceOp c) {
            collective(Collective::AllReduce, c.getGroup(), c.getInput().getType());
          })
          .Case([&](exec::AllGatherOp c) {
            collective(Collective::AllGather, c.getGroup(), c.getOutput().getType());
          })
          .Case([&](exec::ReduceScatterOp c) {
            collective(Collective::ReduceScatter, c.getGroup(), c.getInput().getType());
          })
          .Case([&](exec::AllToAllOp c) {
            collective(Collective::AllToAll, c.getGroup(), c.getInput().getType());
          })
          .Case([&](exec::BroadcastOp c) {
            collective(Collective::Broadcast, c.getGroup(), c.getInput().getType());
          })
          .Case([&](exec::ReduceOp c) {
            collective(Collective::Reduce, c.getGroup(), c.getInput().getType());
          })
          .Default([](Operation *) {});
    }
    int microbatch;
    result.phases[phaseOf(op, microbatches, microbatch)] += cost;
  });
  result.microbatches = static_cast<int64_t>(microbatches.size());
  return result;
}

} // namespace llmc::plan
