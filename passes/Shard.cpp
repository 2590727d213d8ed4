//===- Shard.cpp - spread @forward over a device mesh ---------------------===//
//
// Data parallelism as a rewrite of the forward graph: the batch arguments
// are split along dimension 0 over the batch axes, and every value computed
// from them gets its local shape. Autodiff then derives the local backward,
// and the optimizer pass adds the gradient synchronisation the layout needs.
// Parameters stay replicated here; ZeRO stages shard their optimizer state,
// gradients and (stage 3) storage in the training step.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/ExpertParallel.h"
#include "passes/lib/Layout.h"
#include "passes/lib/ShardAttr.h"
#include "passes/lib/TensorParallel.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

namespace llmc {
#define GEN_PASS_DEF_SHARD
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

int64_t Layout::size(ArrayRef<std::string> axes) const {
  int64_t n = 1;
  for (const std::string &axis : axes)
    n *= std::max<int64_t>(1, dist::MeshOp(mesh).axisSize(axis));
  return n;
}

ArrayAttr Layout::axesAttr(MLIRContext *context, ArrayRef<std::string> axes) const {
  SmallVector<Attribute> names;
  for (const std::string &axis : axes)
    names.push_back(StringAttr::get(context, axis));
  return ArrayAttr::get(context, names);
}

std::optional<Layout> llmc::readLayout(ModuleOp module) {
  auto attr = module->getAttrOfType<DictionaryAttr>(kLayoutAttr);
  auto mesh = module.lookupSymbol<dist::MeshOp>(kMeshName);
  if (!attr || !mesh)
    return std::nullopt;
  Layout layout;
  layout.mesh = mesh;
  auto strings = [&](StringRef key) {
    std::vector<std::string> out;
    if (auto array = attr.getAs<ArrayAttr>(key))
      for (StringRef s : array.getAsValueRange<StringAttr>())
        out.push_back(s.str());
    return out;
  };
  layout.batchAxes = strings("batch_axes");
  layout.zeroAxes = strings("zero_axes");
  if (auto zero = attr.getAs<IntegerAttr>("zero"))
    layout.zero = zero.getInt();
  if (auto sync = attr.getAs<StringAttr>("grad_sync"))
    layout.gradSync = sync.getValue().str();
  return layout;
}

namespace {

RankedTensorType splitDim0(Type type, int64_t parts) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[0] /= parts;
  return RankedTensorType::get(shape, t.getElementType());
}

struct ShardPass : llmc::impl::ShardBase<ShardPass> {
  using ShardBase::ShardBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<std::vector<std::pair<std::string, int64_t>>> axes = parseMesh(module);
    if (failed(axes))
      return signalPassFailure();
    if (module.lookupSymbol(kMeshName)) {
      module.emitError("shard: the module already has a @mesh");
      return signalPassFailure();
    }
    if (zero < 0 || zero > 3) {
      module.emitError() << "shard: ZeRO stage must be 0, 1, 2 or 3, got "
                         << static_cast<int64_t>(zero);
      return signalPassFailure();
    }
    if (gradSync != "allreduce" && gradSync != "ps") {
      module.emitError() << "shard: unknown grad-sync '" << gradSync
                         << "' (expected allreduce or ps)";
      return signalPassFailure();
    }

    OpBuilder b(module.getContext());
    b.setInsertionPointToStart(module.getBody());
    SmallVector<StringRef> names;
    SmallVector<int64_t> sizes;
    for (auto &[name, size] : *axes) {
      names.push_back(name);
      sizes.push_back(size);
    }
    auto mesh = dist::MeshOp::create(b, module.getLoc(), kMeshName, b.getStrArrayAttr(names),
                                     b.getDenseI64ArrayAttr(sizes));
    Layout layout;
    layout.mesh = mesh;
    // Expert parallelism spreads the experts over ranks that also split
    // the batch (as DeepSpeed-MoE and Megatron-Core place it); a
    // generation step's ranks share the batch instead.
    for (auto &[name, size] : *axes)
      if (name == "dp" || name == "fsdp" || (name == "ep" && !sharedTokens))
        layout.batchAxes.push_back(name);
    // ZeRO shards over `fsdp` when present (hybrid: replicate over dp),
    // else over `dp`.
    if (zero > 0) {
      bool hasFsdp = llvm::is_contained(layout.batchAxes, "fsdp");
      layout.zeroAxes.push_back(hasFsdp ? "fsdp" : "dp");
      if (!llvm::is_contained(layout.batchAxes, layout.zeroAxes[0])) {
        module.emitError("shard: ZeRO needs a dp or fsdp axis in the mesh");
        return signalPassFailure();
      }
    }
    module->setAttr(kLayoutAttr,
                    b.getDictionaryAttr({
                        b.getNamedAttr("batch_axes", layout.axesAttr(b.getContext(), layout.batchAxes)),
                        b.getNamedAttr("zero_axes", layout.axesAttr(b.getContext(), layout.zeroAxes)),
                        b.getNamedAttr("zero", b.getI64IntegerAttr(zero)),
                        b.getNamedAttr("grad_sync", b.getStringAttr(gradSync)),
                    }));
    for (auto &[name, size] : *axes)
      if (name != "dp" && name != "fsdp" && name != "tp" && name != "pp" && name != "ep" &&
          size > 1) {
        module.emitError() << "shard: axis '" << name
                           << "' is not supported (data parallel: dp, fsdp; tensor parallel: "
                              "tp; pipeline: pp; expert parallel: ep)";
        return signalPassFailure();
      }

    func::FuncOp forward = lookupFunc(module, "forward");
    if (!forward) {
      module.emitError("shard: no @forward");
      return signalPassFailure();
    }
    if (layout.batchSize() > 1 &&
        failed(splitBatch(forward, layout.batchSize(),
                          layout.axesAttr(module.getContext(), layout.batchAxes))))
      return signalPassFailure();
    if (int64_t ep = mesh.axisSize("ep");
        ep > 1 && failed(applyExpertParallel(forward, "ep", ep, sharedTokens)))
      return signalPassFailure();
    int64_t tp = mesh.axisSize("tp");
    if (sequenceParallel && tp <= 1) {
      module.emitError("shard: sequence parallelism (sp) splits over the tensor-parallel axis; "
                       "the mesh needs tp >= 2");
      return signalPassFailure();
    }
    if (tp > 1 && failed(applyTensorParallel(forward, "tp", tp, sharedTokens)))
      return signalPassFailure();
    if (sequenceParallel && failed(applySequenceParallel(forward, "tp", tp)))
      return signalPassFailure();
  }

  FailureOr<std::vector<std::pair<std::string, int64_t>>> parseMesh(ModuleOp module) {
    std::vector<std::pair<std::string, int64_t>> axes;
    llvm::StringSet<> seen;
    for (StringRef item : llvm::split(StringRef(mesh), ',')) {
      item = item.trim();
      auto [name, value] = item.split('=');
      int64_t size;
      if (name.empty() || value.trim().getAsInteger(10, size) || size < 1) {
        module.emitError() << "shard: bad mesh entry '" << item
                           << "' (expected axis=size with size >= 1, e.g. dp=2,tp=2)";
        return failure();
      }
      if (!seen.insert(name.trim()).second) {
        module.emitError() << "shard: mesh axis '" << name.trim() << "' appears twice";
        return failure();
      }
      axes.push_back({name.trim().str(), size});
    }
    if (axes.empty()) {
      module.emitError("shard: empty mesh");
      return failure();
    }
    return orderAxes(module, std::move(axes));
  }

  /// Puts the axes in rank order (slowest first): `rank-order` when given,
  /// else pp, dp, fsdp, the others as written (ep), tp — so the ranks of a
  /// tensor-parallel group, which communicate most, are consecutive, and
  /// an expert-parallel group's next.
  FailureOr<std::vector<std::pair<std::string, int64_t>>>
  orderAxes(ModuleOp module, std::vector<std::pair<std::string, int64_t>> axes) {
    if (StringRef(rankOrder).trim().empty()) {
      auto priority = [](StringRef name) {
        return llvm::StringSwitch<int>(name).Case("pp", 0).Case("dp", 1).Case("fsdp", 2)
            .Case("tp", 4).Default(3);
      };
      std::stable_sort(axes.begin(), axes.end(), [&](const auto &x, const auto &y) {
        return priority(x.first) < priority(y.first);
      });
      return axes;
    }
    std::vector<std::pair<std::string, int64_t>> ordered;
    for (StringRef name : llvm::split(StringRef(rankOrder), ',')) {
      name = name.trim();
      auto it = llvm::find_if(axes, [&](const auto &a) { return a.first == name; });
      if (it == axes.end() || llvm::any_of(ordered, [&](const auto &a) { return a.first == name; })) {
        module.emitError() << "shard: rank-order '" << rankOrder
                           << "' must name each mesh axis exactly once; '" << name
                           << "' is " << (it == axes.end() ? "not a mesh axis" : "repeated");
        return failure();
      }
      ordered.push_back(*it);
    }
    if (ordered.size() != axes.size()) {
      module.emitError() << "shard: rank-order '" << rankOrder
                         << "' must name each mesh axis exactly once";
      return failure();
    }
    return ordered;
  }

  /// Divides dimension 0 of the batch arguments and everything computed
  /// from them by `parts`, over mesh axes `axes`.
  LogicalResult splitBatch(func::FuncOp func, int64_t parts, ArrayAttr axes) {
    llvm::DenseSet<Value> batched;
    SmallVector<Type> argTypes(func.getArgumentTypes());
    for (BlockArgument arg : func.getArguments()) {
      if (llm::getParamAttr(func, arg.getArgNumber()))
        continue;
      auto t = cast<RankedTensorType>(arg.getType());
      if (t.getRank() < 1 || t.getDimSize(0) % parts != 0)
        return emitError(arg.getLoc())
               << "shard: batch argument " << arg.getArgNumber() << " of type " << t
               << " cannot be split " << parts << " ways along dimension 0";
      arg.setType(splitDim0(t, parts));
      argTypes[arg.getArgNumber()] = arg.getType();
      batched.insert(arg);
    }
    func.setFunctionType(FunctionType::get(func.getContext(), argTypes,
                                           func.getResultTypes()));
    WalkResult result = func.walk<WalkOrder::PostOrder>([&](Operation *op) {
      if (auto block = dyn_cast<llm::BlockOp>(op)) {
        auto yield = cast<llm::YieldOp>(block.getBody().front().getTerminator());
        for (auto [r, v] : llvm::zip(block.getResults(), yield.getValues())) {
          r.setType(v.getType());
          if (batched.contains(v))
            batched.insert(r);
        }
        return WalkResult::advance();
      }
      if (isa<func::ReturnOp, llm::YieldOp>(op) ||
          llvm::none_of(op->getOperands(), [&](Value v) { return batched.contains(v); }))
        return WalkResult::advance();
      if (failed(splitOp(op, parts, axes, batched)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }

  /// Each rank's router statistics are sums over its rows. The
  /// load-balancing loss needs the whole batch's counts (summed over the
  /// batch axes; they take no gradient); then it is linear in this rank's
  /// prob_sum, as the z-loss is in its z_sum, so both count `parts` times
  /// and the ranks' losses (and gradients) average to the whole batch's.
  void splitRouterLoss(llm::RouterLossOp loss, int64_t parts, ArrayAttr axes) {
    OpBuilder b(loss);
    Value counts = loss.getCounts();
    Value total = dist::AllReduceOp::create(b, loss.getLoc(), counts.getType(), counts,
                                            FlatSymbolRefAttr::get(b.getContext(), kMeshName), axes,
                                            b.getStringAttr("sum"));
    loss.getCountsMutable().assign(total);
    loss.setAuxScaleAttr(b.getF64FloatAttr(loss.getAuxScale().convertToDouble() * parts));
    loss.setZScaleAttr(b.getF64FloatAttr(loss.getZScale().convertToDouble() * parts));
  }

  /// A capacity factor counts an expert's copies over the whole batch, as
  /// one rank would (docs/models.md): each rank keeps what the ranks before
  /// it in batch order left of the capacity, so it learns every rank's
  /// per-expert counts (an all-gather of E numbers per layer; they take no
  /// gradient) and its own position among them. Its slot keeps the local
  /// rows, up to the capacity of every expert in it.
  LogicalResult splitCapacity(llm::MoEPackOp pack, int64_t parts, ArrayAttr axes,
                              llvm::DenseSet<Value> &batched) {
    auto route = pack.getOffsets().getDefiningOp<llm::MoERouteOp>();
    if (!route)
      return pack.emitOpError("shard: a capacity-limited pack must read llm.moe_route's offsets");
    OpBuilder b(pack);
    Location loc = pack.getLoc();
    Value counts = route.getCounts();
    const int64_t experts = cast<RankedTensorType>(counts.getType()).getDimSize(0);
    Value row =
        llm::ReshapeOp::create(b, loc, RankedTensorType::get({1, experts}, b.getF32Type()), counts);
    Value all = dist::AllGatherOp::create(
        b, loc, RankedTensorType::get({parts, experts}, b.getF32Type()), row, kMeshName, axes, 0);
    pack.getGroupCountsMutable().assign(all);
    pack->setAttr("group_position", b.getDenseI64ArrayAttr({0}));
    addRankOffset(pack, "group_position", 0, axes, 1);
    RankedTensorType xs = pack.getXs().getType(), kept = pack.getKept().getType();
    const int64_t slot = capacitySlotRows(xs.getDimSize(0), kept.getDimSize(1),
                                          static_cast<int64_t>(pack.getCapacity()));
    pack.getPacked().setType(
        RankedTensorType::get({kept.getDimSize(0) * slot, xs.getDimSize(1)}, xs.getElementType()));
    batched.insert(pack.getPacked());
    return success();
  }

  LogicalResult splitOp(Operation *op, int64_t parts, ArrayAttr axes,
                        llvm::DenseSet<Value> &batched) {
    if (auto loss = dyn_cast<llm::RouterLossOp>(op)) {
      splitRouterLoss(loss, parts, axes);
      return success();
    }
    if (auto pack = dyn_cast<llm::MoEPackOp>(op))
      return splitCapacity(pack, parts, axes, batched);
    // Ops that would mix rows of different ranks say so themselves.
    if (auto rule = dyn_cast<llm::RowSplitOpInterface>(op)) {
      SmallVector<bool> rowSplit;
      for (Value operand : op->getOperands())
        rowSplit.push_back(batched.contains(operand));
      if (failed(rule.verifyRowSplit(rowSplit, parts)))
        return failure();
    }
    if (op->hasTrait<llmc::trait::MixesBatchRows>())
      return op->emitOpError("reduces over the batch dimension in @forward; it cannot be split");

    // Each rank's dropout mask is its rows of the whole batch's mask.
    if (isa<llm::DropoutOp>(op))
      markDropoutPiece(op, cast<RankedTensorType>(op->getResult(0).getType()), 0, axes, parts);

    // New result types: inferred from the new operands where the op can, else
    // dimension 0 divided.
    SmallVector<Type> types;
    if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
      if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                        op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                        op->getRegions(), types)))
        return op->emitOpError("cannot infer its local shape after splitting the batch");
    } else {
      for (Type t : op->getResultTypes()) {
        auto tensor = cast<RankedTensorType>(t);
        if (tensor.getRank() == 0 || tensor.getDimSize(0) % parts != 0)
          return op->emitOpError("result ") << t << " cannot be split " << parts
                                            << " ways along dimension 0";
        types.push_back(splitDim0(t, parts));
      }
    }
    for (auto [result, type] : llvm::zip(op->getResults(), types)) {
      result.setType(type);
      if (cast<RankedTensorType>(type).getRank() > 0)
        batched.insert(result);
    }
    return success();
  }
};

} // namespace
