//===- ExpertParallel.cpp - experts spread over a mesh axis ---------------===//
//
// Expert parallelism as GShard and Megatron-Core do it, with static shapes.
// The batch is already split over the `ep` ranks (an ep axis is a batch
// axis, as in DeepSpeed-MoE, where experts are sharded over data-parallel
// ranks); each rank now keeps El = E / P of the E experts — the slice of
// every stacked expert weight along dimension 0 — and a layer becomes
//
//   %xs            = llm.moe_dispatch ...            // [R, C] by expert
//   %packed, %kept = llm.moe_pack %xs, %off          // slot p: peer p's experts
//   %counts        = dist.all_to_all %kept           // [P, El] rows per source
//   %recv          = dist.all_to_all %packed         // slot q: from source q
//   %g, %loff      = llm.moe_regroup %recv, %counts  // by local expert
//   ... the experts' grouped matmuls on %g with %loff ...
//   %back          = llm.moe_ungroup %ys, %counts
//   %ret           = dist.all_to_all %back           // home again
//   %y             = llm.moe_unpack %ret, %off, %kept
//   llm.moe_combine %y, ...
//
// Dropless routing may send all R = N·k rows of a rank to one peer: each
// slot holds S = R rows and the buffers are P·R rows, the worst case, which
// is what the memory plan sizes (rows past the received ones stay zero and
// the grouped matmul skips them). The all-to-all moves P·R rows per rank,
// P times what balanced routing needs, in exchange for shapes that never
// change (a CUDA graph, a static memory plan). Under a capacity factor the
// model already packs each expert's first `capacity` rows into one slot
// (models/MixtureOfExperts.cpp); that chain becomes the P-slot exchange,
// each slot min(R, E/P · capacity) rows.
//
// A generation step (`sharedTokens`) holds the whole batch on every rank
// of the axis: nothing needs to travel to compute an expert's rows. Each
// rank takes its own slot of the pack (dist.all_slice, no communication)
// where the exchange would receive, computes its experts, places their
// rows back in its slot of a zero buffer (llm.pad at a rank-dependent
// offset) so the unpack finds every other expert's rows zero, and an
// all-reduce over the axis adds the ranks' partial moe_combine results —
// N·C numbers per layer, where the all-to-alls would move P·N·k·C.
//
// Autodiff then derives the backward: each op's transpose (all_to_all's
// is itself; pack/unpack and regroup/ungroup are each other's). A rank's
// expert gradients sum the contributions of every peer's tokens; the
// optimizer averages them over the batch axes the experts are not split
// over and scales by 1/P (passes/Optimizer.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/lib/ExpertParallel.h"
#include "dialects/Annotations/Annotations.h"
#include "passes/lib/Layout.h"
#include "passes/lib/ShardAttr.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace llmc {
namespace {

class ExpertParallel {
public:
  ExpertParallel(func::FuncOp forward, StringRef axis, int64_t parts, bool sharedTokens)
      : func(forward), builder(forward.getContext()), axis(axis.str()), parts(parts),
        sharedTokens(sharedTokens) {}

  LogicalResult run() {
    SmallVector<llm::MoEDispatchOp> dispatches;
    func.walk([&](llm::MoEDispatchOp d) { dispatches.push_back(d); });
    if (dispatches.empty())
      return func.emitError() << "shard: expert parallelism (" << axis
                              << ") needs a mixture-of-experts model; @forward has no "
                                 "llm.moe_dispatch";
    for (llm::MoEDispatchOp dispatch : dispatches)
      if (failed(spreadLayer(dispatch)))
        return failure();
    func.setFunctionType(FunctionType::get(
        func.getContext(), func.getBody().front().getArgumentTypes(), func.getResultTypes()));
    return success();
  }

private:
  /// One layer: the exchange around its experts, their weights split.
  LogicalResult spreadLayer(llm::MoEDispatchOp dispatch) {
    Value xs = dispatch.getResult();
    if (xs.hasOneUse())
      if (auto pack = dyn_cast<llm::MoEPackOp>(*xs.getUsers().begin()))
        return spreadPackedLayer(pack);
    SmallVector<llm::GroupedMatmulOp> experts;
    for (Operation *user : xs.getUsers()) {
      auto grouped = dyn_cast<llm::GroupedMatmulOp>(user);
      if (!grouped || grouped.getX() != xs)
        return user->emitOpError("expert parallelism: the dispatched rows must feed the experts' "
                                 "grouped matmuls only");
      experts.push_back(grouped);
    }
    if (experts.empty())
      return dispatch.emitOpError("expert parallelism: the dispatched rows reach no experts");
    Value offsets = experts.front().getOffsets();
    const int64_t numExperts = cast<RankedTensorType>(offsets.getType()).getDimSize(0) - 1;
    if (failed(checkExperts(dispatch, numExperts)))
      return failure();
    for (llm::GroupedMatmulOp grouped : experts)
      if (grouped.getOffsets() != offsets)
        return grouped.emitOpError("expert parallelism: the experts of one layer must share "
                                   "their routing offsets");

    // Dropless: a slot holds all of a rank's rows.
    builder.setInsertionPointAfter(dispatch);
    const int64_t rows = cast<RankedTensorType>(xs.getType()).getDimSize(0);
    Operation *pack =
        createPack(dispatch.getLoc(), SmallVector<Value>{xs, offsets}, {}, numExperts, rows);
    Exchange exchange = sendAndRegroup(pack);
    for (llm::GroupedMatmulOp grouped : experts) {
      grouped.getXMutable().assign(exchange.grouped);
      grouped.getOffsetsMutable().assign(exchange.localOffsets);
    }
    Operation *end = retypeExpertRows(exchange, offsets, [](Operation *op, const auto &received) {
      auto combine = dyn_cast<llm::MoECombineOp>(op);
      return combine && received.contains(combine.getYs());
    });
    if (!end)
      return failure();
    auto combine = cast<llm::MoECombineOp>(end);
    builder.setInsertionPoint(combine);
    Value back =
        llm::MoEUngroupOp::create(builder, combine.getLoc(), combine.getYs(), exchange.counts);
    Value home = sendHome(back, combine.getLoc());
    combine.getYsMutable().assign(llm::MoEUnpackOp::create(builder, combine.getLoc(), xs.getType(),
                                                           home, offsets, exchange.kept));
    if (sharedTokens)
      addPartialOutputs(combine);
    return success();
  }

  /// A layer with a capacity factor: its one-slot pack, regroup, ungroup
  /// and unpack (models/MixtureOfExperts.cpp) become the P-slot exchange,
  /// each slot holding up to the capacity of each of the peer's experts.
  LogicalResult spreadPackedLayer(llm::MoEPackOp single) {
    const int64_t numExperts = single.getKept().getType().getDimSize(1);
    auto regroup = dyn_cast<llm::MoERegroupOp>(*single.getPacked().getUsers().begin());
    if (single.getKept().getType().getDimSize(0) != 1 || !single.getPacked().hasOneUse() ||
        !regroup)
      return single.emitOpError("expert parallelism: expected one slot, regrouped");
    if (failed(checkExperts(single, numExperts)))
      return failure();
    const int64_t rows = single.getXs().getType().getDimSize(0),
                  capacity = static_cast<int64_t>(single.getCapacity());
    builder.setInsertionPoint(single);
    Operation *pack = createPack(single.getLoc(), single->getOperands(), single->getAttrs(),
                                 numExperts, capacitySlotRows(rows, numExperts / parts, capacity));
    Exchange exchange = sendAndRegroup(pack);
    regroup->replaceAllUsesWith(ValueRange{exchange.grouped, exchange.localOffsets});
    regroup->erase();
    Operation *end = retypeExpertRows(exchange, Value(), [](Operation *op, const auto &received) {
      auto ungroup = dyn_cast<llm::MoEUngroupOp>(op);
      return ungroup && received.contains(ungroup.getGrouped());
    });
    if (!end)
      return failure();
    auto ungroup = cast<llm::MoEUngroupOp>(end);
    ungroup.getCountsMutable().assign(exchange.counts);
    ungroup.getResult().setType(ungroup.getGrouped().getType());
    builder.setInsertionPointAfter(ungroup);
    Value home = sendHome(ungroup.getResult(), ungroup.getLoc());
    ungroup.getResult().replaceAllUsesExcept(home, home.getDefiningOp());
    single.getKept().replaceAllUsesWith(exchange.kept);
    single.erase();
    if (!sharedTokens)
      return success();
    auto unpack = home.hasOneUse() ? dyn_cast<llm::MoEUnpackOp>(*home.getUsers().begin())
                                   : llm::MoEUnpackOp();
    auto combine = unpack && unpack.getResult().hasOneUse()
                       ? dyn_cast<llm::MoECombineOp>(*unpack.getResult().getUsers().begin())
                       : llm::MoECombineOp();
    if (!combine)
      return ungroup.emitOpError("expert parallelism: expected the experts' rows to reach one "
                                 "llm.moe_unpack and llm.moe_combine");
    addPartialOutputs(combine);
    return success();
  }

  LogicalResult checkExperts(Operation *op, int64_t numExperts) {
    if (numExperts % parts == 0)
      return success();
    return op->emitOpError("expert parallelism: ")
           << numExperts << " experts do not split evenly over " << parts << " ranks of " << axis;
  }

  /// llm.moe_pack of `operands` (xs, offsets[, group counts]) into one
  /// slot of `slot` rows per rank of `axis`.
  Operation *createPack(Location loc, ValueRange operands, ArrayRef<NamedAttribute> attrs,
                        int64_t numExperts, int64_t slot) {
    auto xs = cast<RankedTensorType>(operands[0].getType());
    OperationState state(loc, llm::MoEPackOp::getOperationName());
    state.addOperands(operands);
    state.addAttributes(attrs);
    if (!state.attributes.get("capacity"))
      state.addAttribute("capacity", builder.getI64IntegerAttr(0));
    state.addTypes({RankedTensorType::get({parts * slot, xs.getDimSize(1)}, xs.getElementType()),
                    RankedTensorType::get({parts, numExperts / parts}, builder.getI32Type())});
    return builder.create(state);
  }

  /// What the forward exchange made, for the way back.
  struct Exchange {
    Value kept, counts, grouped, localOffsets;
  };

  /// The pack's slots and counts to their ranks (with shared tokens, this
  /// rank's own), regrouped by local expert.
  Exchange sendAndRegroup(Operation *pack) {
    Location loc = pack->getLoc();
    Value kept = pack->getResult(1);
    Value counts = sharedTokens ? ownSlot(kept, loc) : allToAll(kept, loc);
    Value received =
        sharedTokens ? ownSlot(pack->getResult(0), loc) : allToAll(pack->getResult(0), loc);
    auto regroup = llm::MoERegroupOp::create(builder, loc, received, counts);
    return {kept, counts, regroup.getGrouped(), regroup.getLocalOffsets()};
  }

  /// Chunk i of dimension 0 to rank i of `axis`, chunk j from rank j.
  Value allToAll(Value v, Location loc) {
    return dist::AllToAllOp::create(builder, loc, v.getType(), v, kMeshName,
                                    builder.getStrArrayAttr({axis}), 0, 0);
  }

  /// This rank's chunk of dimension 0 over `axis`.
  Value ownSlot(Value v, Location loc) {
    return dist::AllSliceOp::create(builder, loc, slice(v.getType()), v, kMeshName,
                                    builder.getStrArrayAttr({axis}), 0);
  }

  /// The experts' rows of every slot back to the ranks that sent them, or
  /// with shared tokens this rank's slot placed among zero slots.
  Value sendHome(Value slots, Location loc) {
    if (!sharedTokens)
      return allToAll(slots, loc);
    auto type = cast<RankedTensorType>(slots.getType());
    SmallVector<int64_t> shape(type.getShape());
    const int64_t slot = shape[0];
    shape[0] *= parts;
    auto pad = llm::PadOp::create(builder, loc, RankedTensorType::get(shape, type.getElementType()),
                                  slots, builder.getDenseI64ArrayAttr({0, 0}));
    addRankOffset(pad, "offsets", 0, builder.getStrArrayAttr({axis}), slot);
    return pad;
  }

  /// With shared tokens each rank's moe_combine sums its own experts'
  /// rows only: an all-reduce over `axis` completes the layer's output.
  void addPartialOutputs(llm::MoECombineOp combine) {
    builder.setInsertionPointAfter(combine);
    Value partial = combine.getResult();
    auto sum =
        dist::AllReduceOp::create(builder, combine.getLoc(), partial.getType(), partial, kMeshName,
                                  builder.getStrArrayAttr({axis}), builder.getStringAttr("sum"));
    if (Attribute name = combine->getAttr(kBlockNameAttr))
      sum->setAttr(kBlockNameAttr, name);
    partial.replaceAllUsesExcept(sum, sum);
  }

  /// The values from the exchange to the op `isEnd` accepts hold the
  /// received rows now: the experts' weights lose all but this rank's
  /// slice (and read `offsets` by the local experts' groups), every op's
  /// result is inferred again. Returns the end, or null after an error.
  template <typename IsEnd>
  Operation *retypeExpertRows(const Exchange &exchange, Value offsets, IsEnd isEnd) {
    llvm::DenseSet<Value> received{exchange.grouped};
    Operation *end = nullptr;
    WalkResult result = func.walk([&](Operation *op) {
      if (end || llvm::none_of(op->getOperands(), [&](Value v) { return received.contains(v); }))
        return WalkResult::advance();
      if (isEnd(op, received)) {
        end = op;
        return WalkResult::advance();
      }
      if (auto grouped = dyn_cast<llm::GroupedMatmulOp>(op)) {
        if (offsets && grouped.getOffsets() == offsets)
          grouped.getOffsetsMutable().assign(exchange.localOffsets);
        if (failed(splitWeights(grouped)))
          return WalkResult::interrupt();
      }
      if (failed(inferAgain(op)))
        return WalkResult::interrupt();
      for (Value r : op->getResults()) received.insert(r);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return nullptr;
    if (!end)
      emitError(exchange.grouped.getLoc(),
                "expert parallelism: the experts' rows never return to their tokens");
    return end;
  }

  LogicalResult inferAgain(Operation *op) {
    auto infer = dyn_cast<InferTypeOpInterface>(op);
    SmallVector<Type> types;
    if (!infer || isa<llm::YieldOp>(op) ||
        failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                      op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                      op->getRegions(), types)))
      return op->emitOpError("expert parallelism: cannot run on the rows an expert receives "
                             "(between llm.moe_dispatch and llm.moe_combine only row-wise ops "
                             "may stand)");
    for (auto [r, t] : llvm::zip(op->getResults(), types)) r.setType(t);
    return success();
  }

  /// The stacked weights of `grouped` keep this rank's experts: dimension
  /// 0 split over `axis` (through the cast mixed precision reads them by).
  LogicalResult splitWeights(llm::GroupedMatmulOp grouped) {
    Value weights = grouped.getWeights();
    SmallVector<Operation *> casts;
    while (auto cast = weights.getDefiningOp<llm::CastOp>()) {
      if (!cast->hasOneUse())
        return grouped.emitOpError("expert parallelism: the cast of the experts' weights has "
                                   "other uses");
      casts.push_back(cast);
      weights = cast.getX();
    }
    auto arg = dyn_cast<BlockArgument>(weights);
    if (!arg || !llm::getParamAttr(func, arg.getArgNumber()))
      return grouped.emitOpError("expert parallelism: expected the experts' stacked weights to "
                                 "be a parameter");
    if (!done.insert(arg).second)
      return grouped.emitOpError("expert parallelism: the experts' weights feed two layers");
    auto type = cast<RankedTensorType>(arg.getType());
    func.setArgAttr(
        arg.getArgNumber(), kShardAttr,
        addShardLevel(func.getContext(),
                      func.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(), kShardAttr), type,
                      builder.getStrArrayAttr({axis}), 0));
    arg.setType(slice(type));
    for (Operation *cast : llvm::reverse(casts))
      cast->getResult(0).setType(slice(cast->getResult(0).getType()));
    return success();
  }

  RankedTensorType slice(Type t) const {
    auto tensor = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape(tensor.getShape());
    shape[0] /= parts;
    return RankedTensorType::get(shape, tensor.getElementType());
  }

  func::FuncOp func;
  OpBuilder builder;
  std::string axis;
  int64_t parts;
  bool sharedTokens; ///< every rank holds the whole batch (a generation step)
  llvm::DenseSet<Value> done; ///< weights already split
};

} // namespace

LogicalResult applyExpertParallel(func::FuncOp forward, StringRef axis, int64_t parts,
                                  bool sharedTokens) {
  return ExpertParallel(forward, axis, parts, sharedTokens).run();
}

} // namespace llmc
