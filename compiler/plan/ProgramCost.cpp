//===- ProgramCost.cpp - roofline and alpha-beta pricing of exec programs -===//

#include "compiler/plan/ProgramCost.h"
#include "common/ElementwiseProgram.h"

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

double bytesOf(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref)
    return 0;
  unsigned bits = memref.getElementType().getIntOrFloatBitWidth();
  return static_cast<double>(memref.getNumElements()) * std::max(8u, bits) / 8;
}

ArrayRef<int64_t> shapeOf(Value v) { return cast<MemRefType>(v.getType()).getShape(); }

int64_t attrInt(Operation *op, StringRef name) {
  auto attr = op->getAttrOfType<IntegerAttr>(name);
  return attr ? attr.getInt() : 0;
}

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

double kernelFlops(Operation *op) {
  auto kernel = cast<exec::KernelOp>(op);
  StringRef name = kernel.getCallee();
  auto inputs = kernel.getInputs();
  auto outputs = kernel.getOutputs();
  if (outputs.empty())
    return 0;
  double outElements = cast<MemRefType>(outputs[0].getType()).getNumElements();
  if (name == "matmul" && inputs.size() >= 2) {
    ArrayRef<int64_t> a = shapeOf(inputs[0]);
    int64_t k = attrInt(op, "transpose_a") ? a[a.size() - 2] : a.back();
    return 2.0 * outElements * k;
  }
  // x [..., K] times a weight kept quantized (expanded inside the kernel).
  if ((name == "matmul_nf4" || name == "matmul_int") && !inputs.empty())
    return 2.0 * outElements * shapeOf(inputs[0]).back();
  // A matmul with its bias (and GELU) epilogue or GELU's backward: the
  // product's FLOPs; the weight gradient's product sums over every row.
  if ((name == "linear" || name == "matmul_gelu_grad" || name == "matmul_swiglu_grad") &&
      inputs.size() >= 2)
    return 2.0 * outElements * static_cast<double>(shapeOf(inputs[0]).back());
  if (name == "linear_weight_grad" && inputs.size() >= 2) {
    ArrayRef<int64_t> x = shapeOf(inputs[0]);
    double rows = 1;
    for (size_t i = 0; i + 1 < x.size(); ++i) rows *= x[i];
    return 2.0 * outElements * rows;
  }
  // The fused head + loss: the logits' product, and in its backward forms
  // also dh's product and, unless the head is frozen, dw's.
  if (name.starts_with("linear_cross_entropy") && inputs.size() >= 3) {
    ArrayRef<int64_t> h = shapeOf(inputs[0]), w = shapeOf(inputs[1]);
    double rows = 1;
    for (size_t i = 0; i + 1 < h.size(); ++i) rows *= h[i];
    double forward = 2.0 * rows * static_cast<double>(w[0]) * static_cast<double>(w[1]);
    if (name == "linear_cross_entropy" || name == "linear_cross_entropy_partial")
      return forward;
    return (attrInt(op, "frozen_weight") ? 2 : 3) * forward;
  }
  if ((name == "attention" || name == "attention_grad" || name == "attention_rope" ||
       name == "attention_rope_grad") &&
      inputs.size() >= 3) {
    ArrayRef<int64_t> q = shapeOf(inputs[0]), k = shapeOf(inputs[1]);
    if (q.size() == 4 && k.size() == 4) {
      double forward = 4.0 * q[0] * q[2] * q[1] * k[1] * q[3];
      if (attrInt(op, "causal"))
        forward /= 2;
      return name.ends_with("_grad") ? 2.5 * forward : forward;
    }
  }
  // Packed: the output (an input of the backward) is q's shape, and k's
  // length is q's.
  if (name == "attention_packed" || name == "attention_packed_grad") {
    ArrayRef<int64_t> q = shapeOf(name == "attention_packed" ? outputs[0] : inputs[1]);
    double forward = 4.0 * q[0] * q[2] * q[1] * q[1] * q[3];
    if (attrInt(op, "causal"))
      forward /= 2;
    return name == "attention_packed" ? forward : 2.5 * forward;
  }
  // Over a paged cache: every key a row can address (M·P), at most; an
  // int8 cache adds one multiply per key and value element read.
  if (name == "paged_attention" && inputs.size() >= 4) {
    ArrayRef<int64_t> q = shapeOf(inputs[0]), pool = shapeOf(inputs[1]),
                      table = shapeOf(inputs[3]);
    if (q.size() == 4 && pool.size() == 4 && table.size() == 2) {
      double keys = static_cast<double>(table[1]) * pool[1];
      double flops = 4.0 * q[0] * q[1] * q[2] * q[3] * keys;
      if (inputs.size() == 7)
        flops += 2.0 * q[0] * q[1] * pool[2] * q[3] * keys;
      return flops;
    }
  }
  // A generated elementwise loop: one FLOP per element and arithmetic
  // instruction, as each unfused op it replaces counted (loads, constants
  // and casts only move).
  if (name == "fused_elementwise")
    if (auto program = op->getAttrOfType<DenseI64ArrayAttr>("program")) {
      int64_t arithmetic = 0;
      for (int64_t i = 0; i + ew::kFields <= program.size(); i += ew::kFields) {
        auto opcode = static_cast<ew::Opcode>(program[i]);
        arithmetic += opcode != ew::Opcode::Load && opcode != ew::Opcode::Const &&
                      opcode != ew::Opcode::Cast;
      }
      return outElements * static_cast<double>(arithmetic);
    }
  static const std::set<std::string> movesOnly = {"slice", "pad", "concat", "transpose", "fill",
                                                  "embedding", "copy", "cast"};
  return movesOnly.count(name.str()) ? 0 : outElements;
}

double kernelBytes(Operation *op) {
  double bytes = 0;
  for (Value v : op->getOperands())
    bytes += bytesOf(v.getType());
  return bytes;
}

ProgramCost costProgram(Operation *program, const Cluster &cluster, const MeshShape &mesh,
                        double fp32MatmulScale, const std::vector<std::string> &deferredAxes) {
  ProgramCost result;
  std::set<std::string> microbatches;
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
    if (auto kernel = dyn_cast<exec::KernelOp>(op)) {
      double flops = kernelFlops(op), bytes = kernelBytes(op);
      double peak = cluster.peakFlops;
      // fp32 products (the fused head + loss is fp32 only).
      StringRef callee = kernel.getCallee();
      bool product = (callee.starts_with("matmul") && kernel.getOutputs().size() == 1) ||
                     callee == "matmul_swiglu_grad" || callee == "linear" ||
                     callee == "linear_weight_grad";
      if ((product &&
           cast<MemRefType>(kernel.getOutputs()[0].getType()).getElementType().isF32()) ||
          callee.starts_with("linear_cross_entropy"))
        peak *= fp32MatmulScale;
      cost.computeSeconds =
          std::max(flops / peak, bytes / cluster.memoryBandwidth) + cluster.kernelOverhead;
      cost.flops = flops;
      cost.bytes = bytes;
      cost.kernels = 1;
      if (callee.starts_with("matmul") || callee.starts_with("linear") ||
          callee.starts_with("attention"))
        cost.modelFlops = flops;
    } else if (auto send = dyn_cast<exec::SendOp>(op)) {
      cost.p2pBytes = bytesOf(send.getBuffer().getType());
      cost.p2pMessages = 1;
    } else {
      auto collective = [&](Collective kind, ArrayAttr axes, Type full) {
        int64_t n;
        std::vector<std::string> group = groupOf(axes, n, mesh);
        for (const std::string &axis : group)
          if (llvm::is_contained(deferredAxes, axis)) {
            Message message;
            message.phase = phaseOf(op, microbatches, message.microbatch);
            message.kind = kind;
            message.bytes = bytesOf(full);
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
