//===- OffloadActivations.cpp - saved activations in host memory ----------===//
//
// The third way to hold a layer's activations between its forward and its
// backward, beside keeping them in the device arena and recomputing them:
// keep them in host memory. In @train_step every op of a layer carries
// llmc.block_name and llmc.microbatch, and backward ops llmc.backward (as
// llmc-recompute uses them), so the values the forward makes and a chosen
// layer's backward reads first are known (a layer's input is its own, as
// the memory plan and Korthikanti et al. count). Each goes down through
// llm.copy_to_host after its last forward use and comes back through
// llm.copy_to_device before the backward needs it; the lowering places the
// copies' results in host memory and the device arena respectively, so the
// device holds a value only while its forward and its backward use it.
//
// The copy back is placed one layer ahead: at the start of the backward of
// the layer that runs right before the reader's (in a GPU's stream order
// the copy then runs beside that layer's compute), or right before the
// reader when no such backward follows the copy down (the last layer's
// values, a microbatch after the first).
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/QAT/QATDialect.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"

#include <map>
#include <set>

namespace llmc {
#define GEN_PASS_DEF_OFFLOADACTIVATIONS
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// Whether `v` is a function argument seen through identity views and
/// collectives (a parameter, a gathered parameter): state the step does not
/// make, which offloading would only copy.
bool isStateView(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    bool passesThrough =
        isa<llm::ReshapeOp, llm::StopGradientOp, llm::SliceOp, llm::CastOp, qat::QuantizeGradOp>(
            def) ||
        (isa<dist::DistDialect>(def->getDialect()) && def->getNumOperands() == 1);
    if (!passesThrough)
      return false;
    v = def->getOperand(0);
  }
  return true;
}

/// One function's offloading: its ops numbered, where each layer's backward
/// starts, and the rewrite.
class StepOffload {
public:
  StepOffload(func::FuncOp step, const std::set<std::string> &chosen, bool prefetch)
      : body(step.getBody().front()), chosen(chosen), prefetch(prefetch) {}

  /// Offloads every saved value of a chosen layer; returns the layers seen.
  std::set<std::string> run() {
    number();
    // A value and its reshapes are one buffer: grouped by the value they
    // view, so each moves once.
    llvm::MapVector<Value, SmallVector<Value>> groups;
    for (Operation &op : body)
      if (!op.hasAttr(kBackwardAttr))
        for (Value result : op.getResults()) {
          Value root = result;
          while (auto reshape = root.getDefiningOp<llm::ReshapeOp>()) root = reshape.getX();
          groups[root].push_back(result);
        }
    for (auto &[root, members] : groups) offload(root, members);
    return seen;
  }

private:
  Block &body;
  const std::set<std::string> &chosen;
  bool prefetch;
  std::set<std::string> seen;
  llvm::DenseMap<Operation *, int64_t> order;
  /// (microbatch, layer) → the first op of its backward, and those ops in
  /// program order.
  std::map<std::pair<int64_t, std::string>, Operation *> backwardStart;
  SmallVector<Operation *> starts;

  static int64_t microbatchOf(Operation *op) {
    auto mb = op->getAttrOfType<IntegerAttr>(kMicrobatchAttr);
    return mb ? mb.getInt() : 0;
  }

  void number() {
    int64_t position = 0;
    for (Operation &op : body) {
      order[&op] = position++;
      auto name = op.getAttrOfType<StringAttr>(kBlockNameAttr);
      if (!name || !op.hasAttr(kBackwardAttr))
        continue;
      seen.insert(name.getValue().str());
      auto [it, added] = backwardStart.insert({{microbatchOf(&op), name.getValue().str()}, &op});
      if (added)
        starts.push_back(&op);
    }
  }

  /// The op of `body` that `use` is in (a use inside a nested region counts
  /// as its ancestor's).
  Operation *userIn(OpOperand &use) const { return body.findAncestorOpInBlock(*use.getOwner()); }

  /// Where the copy back goes: before the first op of the backward that runs
  /// right before `reader`'s layer's, when that is after `down`; else right
  /// before `reader`.
  Operation *fetchPoint(Operation *reader, Operation *down) const {
    if (!prefetch)
      return reader;
    int64_t readerStart = order.lookup(reader);
    if (auto name = reader->getAttrOfType<StringAttr>(kBlockNameAttr))
      if (auto it = backwardStart.find({microbatchOf(reader), name.getValue().str()});
          it != backwardStart.end())
        readerStart = order.lookup(it->second);
    Operation *before = nullptr;
    for (Operation *start : starts)
      if (order.lookup(start) < readerStart)
        before = start;
    if (before && order.lookup(before) > order.lookup(down))
      return before;
    return reader;
  }

  /// Offloads `root` once for itself and its reshapes (`members`, root
  /// included when the backward reads it): one copy each way, and each
  /// reshape redone on the copy.
  void offload(Value root, ArrayRef<Value> members) {
    if (!isa<RankedTensorType>(root.getType()) || isStateView(root))
      return;
    // The forward's last use and the backward's first; a value some forward
    // op (or the step's result) reads after its backward began stays.
    Operation *firstBackward = nullptr, *lastForward = root.getDefiningOp();
    for (Value member : members)
      for (OpOperand &use : member.getUses()) {
        Operation *user = userIn(use);
        if (!user)
          return;
        if (user->hasAttr(kBackwardAttr)) {
          if (!firstBackward || order.lookup(user) < order.lookup(firstBackward))
            firstBackward = user;
        } else if (order.lookup(user) > order.lookup(lastForward)) {
          lastForward = user;
        }
      }
    if (!firstBackward || order.lookup(lastForward) > order.lookup(firstBackward) ||
        isa<func::ReturnOp>(lastForward))
      return;
    // The value is the layer's whose backward reads it first.
    auto layer = firstBackward->getAttrOfType<StringAttr>(kBlockNameAttr);
    if (!layer || (!chosen.empty() && !chosen.count(layer.getValue().str())))
      return;
    Operation *def = root.getDefiningOp();
    OpBuilder b(def->getContext());
    b.setInsertionPointAfter(lastForward);
    auto down = llm::CopyToHostOp::create(b, root.getLoc(), root);
    for (StringRef attr : {kBlockNameAttr, kMicrobatchAttr})
      if (Attribute value = def->getAttr(attr))
        down->setAttr(attr, value);
    b.setInsertionPoint(fetchPoint(firstBackward, lastForward));
    auto up = llm::CopyToDeviceOp::create(b, root.getLoc(), down.getResult());
    // The copy back belongs to the backward that reads it first.
    for (StringRef attr : {kBlockNameAttr, kMicrobatchAttr})
      if (Attribute value = firstBackward->getAttr(attr))
        up->setAttr(attr, value);
    up->setAttr(kBackwardAttr, b.getUnitAttr());
    for (Value member : members) {
      Operation *replacement = up;
      if (member != root) {
        replacement = llm::ReshapeOp::create(b, member.getLoc(), member.getType(), up.getResult());
        replacement->setDiscardableAttrs(up->getDiscardableAttrDictionary());
      }
      member.replaceUsesWithIf(replacement->getResult(0), [&](OpOperand &use) {
        Operation *user = userIn(use);
        return user && user != replacement && user->hasAttr(kBackwardAttr);
      });
    }
  }
};

struct OffloadActivationsPass : llmc::impl::OffloadActivationsBase<OffloadActivationsPass> {
  using OffloadActivationsBase::OffloadActivationsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::set<std::string> chosen;
    for (StringRef layer : llvm::split(StringRef(layers), ','))
      if (!layer.trim().empty())
        chosen.insert(layer.trim().str());
    std::set<std::string> seen;
    // The training step, and @grad (gradients for inspection), which would
    // otherwise set the arena's size.
    // Each pipeline stage's step on its own: what a stage saves comes
    // back one layer ahead of its backward in the stage's schedule.
    for (ModuleOp stage : programModules(module))
      for (StringRef name : {"train_step", "grad"})
        if (func::FuncOp f = lookupFunc(stage, name)) {
          std::set<std::string> layersHere = StepOffload(f, chosen, prefetch).run();
          seen.insert(layersHere.begin(), layersHere.end());
        }
    if (seen.empty()) {
      module.emitError("offload activations: no training step with layers (llm.block) to "
                       "offload (--offload activations needs a model with layers)");
      return signalPassFailure();
    }
    // A misspelt layer would silently keep its activations on the device.
    for (const std::string &layer : chosen)
      if (!seen.count(layer)) {
        module.emitError() << "offload activations: no layer named '" << layer
                           << "' (layers: " << llvm::join(seen, ", ") << ")";
        return signalPassFailure();
      }
  }
};

} // namespace
