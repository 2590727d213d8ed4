//===- Recompute.cpp - activation recomputation per layer -----------------===//
//
// In @train_step every op of a layer carries llmc.block_name and
// llmc.microbatch, and backward ops llmc.backward, so a (microbatch, layer)
// unit's forward and backward are known. The values its forward produces
// and its backward reads are what the memory plan keeps alive across the
// pass; recomputing them clones their producers right before the unit's
// first backward op. See Passes.td for the modes. A QLoRA weight's
// expansion is redone in every mode, and before every reader outside the
// layers too (a tied table's lookup and head).
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/QAT/QATDialect.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

#include <map>
#include <set>

namespace llmc {
#define GEN_PASS_DEF_RECOMPUTE
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// Cheap to redo, expensive to keep: everything but what the op's definition
/// marks ExpensiveToRecompute (matmuls, attention, communication other than
/// what Megatron's sequence parallelism redoes anyway: the all-gather of a
/// normalised input, so only the 1/t shard of it is kept, as Korthikanti et
/// al. count, and the tensor-parallel entry, an identity forward).
bool cheapToRecompute(Operation *op) { return !op->hasTrait<llmc::trait::ExpensiveToRecompute>(); }

/// Recomputed in every mode: a QLoRA weight expanded from its 4-bit storage
/// would otherwise stay alive in fp32 from forward to backward, undoing
/// the point of storing it in 4 bits.
bool alwaysRecompute(Operation *op) { return op->hasTrait<llmc::trait::AlwaysRecompute>(); }

enum class Policy { WeightsOnly, Selective, Full };

struct Unit {
  SmallVector<Operation *> forward;
  Operation *firstBackward = nullptr;
};

struct RecomputePass : llmc::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto known = [](StringRef m) { return m == "none" || m == "full" || m == "selective"; };
    if (!known(mode)) {
      module.emitError() << "recompute: unknown mode '" << mode
                         << "' (expected none, full or selective)";
      return signalPassFailure();
    }
    for (StringRef item : llvm::split(StringRef(layerModes), ',')) {
      item = item.trim();
      if (item.empty())
        continue;
      auto [layer, m] = item.split('=');
      // Offloading (llmc-offload-activations) moves what the mode keeps.
      m = m.trim();
      if (m == "offload")
        m = "none";
      else
        m.consume_back("+offload");
      if (layer.trim().empty() || !known(m)) {
        module.emitError() << "recompute: bad layer mode '" << item
                           << "' (expected <layer>=none|full|selective, each optionally "
                              "+offload, or offload)";
        return signalPassFailure();
      }
      perLayer[layer.trim()] = m.str();
    }
    // The training step, and @grad (gradients for inspection), which would
    // otherwise set the arena's size.
    for (StringRef name : {"train_step", "grad"})
      if (func::FuncOp f = lookupFunc(module, name)) {
        recomputeIn(f);
        expandPerReader(f);
      }
    // A misspelt layer would silently keep its activations.
    for (auto &entry : perLayer)
      if (!seenLayers.count(entry.getKey().str())) {
        std::string known;
        for (auto &seen : seenLayers)
          known += (known.empty() ? "" : ", ") + seen;
        module.emitError() << "recompute: no layer named '" << entry.getKey()
                           << "' (layers: " << (known.empty() ? "none" : known) << ")";
        return signalPassFailure();
      }
  }

  void recomputeIn(func::FuncOp step) {
    Block &body = step.getBody().front();
    llvm::DenseMap<Operation *, int64_t> order;
    int64_t position = 0;
    for (Operation &op : body)
      order[&op] = position++;

    // Units: (microbatch, layer) → its forward ops and first backward op.
    std::map<std::pair<int64_t, std::string>, Unit> units;
    for (Operation &op : body) {
      auto name = op.getAttrOfType<StringAttr>(kBlockNameAttr);
      if (!name || op.hasAttr(kRecomputedAttr))
        continue;
      auto mb = op.getAttrOfType<IntegerAttr>(kMicrobatchAttr);
      Unit &unit = units[{mb ? mb.getInt() : 0, name.getValue().str()}];
      seenLayers.insert(name.getValue().str());
      if (op.hasAttr(kBackwardAttr)) {
        if (!unit.firstBackward)
          unit.firstBackward = &op;
      } else {
        unit.forward.push_back(&op);
      }
    }
    for (auto &[key, unit] : units) {
      auto it = perLayer.find(key.second);
      StringRef m = it != perLayer.end() ? StringRef(it->second) : StringRef(mode);
      Policy policy = m == "full"        ? Policy::Full
                      : m == "selective" ? Policy::Selective
                                         : Policy::WeightsOnly;
      if (unit.firstBackward)
        recompute(unit, order, policy);
    }
  }

  /// An expansion AlwaysRecompute marks (a QLoRA weight) that several ops
  /// read — a tied table's lookup and head, a head outside the layers in
  /// forward and backward, microbatches CSE merged — is expanded again
  /// right before each reader after the first, in the reader's part of the
  /// step, so it never lives from one reader to the next.
  void expandPerReader(func::FuncOp step) {
    Block &body = step.getBody().front();
    SmallVector<Operation *> expansions;
    for (Operation &op : body)
      if (alwaysRecompute(&op))
        expansions.push_back(&op);
    for (Operation *op : expansions) {
      SmallVector<Operation *> readers;
      for (Operation *user : op->getUsers())
        if (user->getBlock() == &body && !llvm::is_contained(readers, user))
          readers.push_back(user);
      llvm::sort(readers, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      for (Operation *reader : llvm::drop_begin(readers)) {
        OpBuilder b(reader);
        Operation *clone = b.clone(*op);
        for (StringRef attr : {kBackwardAttr, kMicrobatchAttr})
          if (Attribute value = reader->getAttr(attr))
            clone->setAttr(attr, value);
        if (reader->hasAttr(kBackwardAttr))
          clone->setAttr(kRecomputedAttr, b.getUnitAttr());
        reader->replaceUsesOfWith(op->getResult(0), clone->getResult(0));
      }
    }
  }

  llvm::StringMap<std::string> perLayer;
  std::set<std::string> seenLayers; // sorted, for the error message

  /// Clones the producers of the unit's saved values (those allowed by the
  /// mode) before its backward and points the backward at the clones.
  void recompute(const Unit &unit, const llvm::DenseMap<Operation *, int64_t> &order,
                 Policy policy) {
    int64_t backwardStart = order.lookup(unit.firstBackward);
    llvm::DenseSet<Operation *> inUnit(unit.forward.begin(), unit.forward.end());
    auto allowed = [&](Operation *op) {
      return op && inUnit.contains(op) &&
             (policy == Policy::Full || alwaysRecompute(op) ||
              (policy == Policy::Selective && cheapToRecompute(op)));
    };
    // Saved values read at or after the backward starts.
    llvm::SetVector<Operation *> toClone;
    SmallVector<Operation *> worklist;
    for (Operation *op : unit.forward)
      for (Value result : op->getResults())
        for (Operation *user : result.getUsers())
          if (order.lookup(user) >= backwardStart && allowed(op))
            worklist.push_back(op);
    // And, transitively, the allowed producers they are recomputed from.
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!toClone.insert(op))
        continue;
      for (Value operand : op->getOperands())
        if (allowed(operand.getDefiningOp()))
          worklist.push_back(operand.getDefiningOp());
    }
    if (toClone.empty())
      return;
    SmallVector<Operation *> sorted(toClone.begin(), toClone.end());
    llvm::sort(sorted, [&](Operation *a, Operation *b) {
      return order.lookup(a) < order.lookup(b);
    });
    OpBuilder b(unit.firstBackward);
    IRMapping mapping;
    for (Operation *op : sorted) {
      Operation *clone = b.clone(*op, mapping);
      clone->setAttr(kBackwardAttr, b.getUnitAttr());
      clone->setAttr(kRecomputedAttr, b.getUnitAttr());
    }
    for (Operation *op : sorted)
      for (Value result : op->getResults())
        result.replaceUsesWithIf(mapping.lookup(result), [&](OpOperand &use) {
          Operation *user = use.getOwner();
          return !user->hasAttr(kRecomputedAttr) &&
                 order.lookup(user) >= backwardStart && order.count(user);
        });
    // A re-expanded weight is needed by one backward matmul: expand it just
    // before that, so one layer's weights are never all expanded at once.
    for (Operation *op : sorted) {
      if (!alwaysRecompute(op))
        continue;
      Operation *clone = mapping.lookup(op->getResult(0)).getDefiningOp();
      Operation *first = nullptr;
      for (Operation *user : clone->getUsers())
        if (!first || user->isBeforeInBlock(first))
          first = user;
      if (first)
        clone->moveBefore(first);
    }
  }
};

} // namespace
