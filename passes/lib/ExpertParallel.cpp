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
// Routing is dropless, so a peer may receive all R = N·k rows of a rank:
// each slot holds S = R rows and the buffers are P·R rows, the worst case,
// which is what the memory plan sizes (rows past the received ones stay
// zero and the grouped matmul skips them). The all-to-all moves P·R rows
// per rank, P times what balanced routing needs, in exchange for shapes
// that never change (a CUDA graph, a static memory plan).
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
  ExpertParallel(func::FuncOp forward, StringRef axis, int64_t parts)
      : func(forward), builder(forward.getContext()), axis(axis.str()), parts(parts) {}

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
    auto offsetsType = cast<RankedTensorType>(offsets.getType());
    const int64_t numExperts = offsetsType.getDimSize(0) - 1;
    if (numExperts % parts != 0)
      return dispatch.emitOpError("expert parallelism: ")
             << numExperts << " experts do not split evenly over " << parts << " ranks of " << axis;
    for (llm::GroupedMatmulOp grouped : experts)
      if (grouped.getOffsets() != offsets)
        return grouped.emitOpError("expert parallelism: the experts of one layer must share "
                                   "their routing offsets");

    Exchange exchange = sendToExperts(dispatch, offsets, numExperts / parts);
    for (llm::GroupedMatmulOp grouped : experts) {
      grouped.getXMutable().assign(exchange.grouped);
      grouped.getOffsetsMutable().assign(exchange.localOffsets);
    }
    return retypeExpertRows(exchange, offsets);
  }

  /// What the forward exchange made, for the way back.
  struct Exchange {
    Value kept, counts, grouped, localOffsets;
  };

  Exchange sendToExperts(llm::MoEDispatchOp dispatch, Value offsets, int64_t localExperts) {
    Location loc = dispatch.getLoc();
    auto xs = cast<RankedTensorType>(dispatch.getResult().getType());
    const int64_t rows = xs.getDimSize(0); // a slot holds all of them: dropless
    builder.setInsertionPointAfter(dispatch);
    auto packedType = RankedTensorType::get({parts * rows, xs.getDimSize(1)}, xs.getElementType());
    auto countsType = RankedTensorType::get({parts, localExperts}, builder.getI32Type());
    auto pack = llm::MoEPackOp::create(builder, loc, packedType, countsType, dispatch.getResult(),
                                       offsets, builder.getI64IntegerAttr(0));
    Value counts = allToAll(pack.getKept(), loc);
    Value received = allToAll(pack.getPacked(), loc);
    auto regroup = llm::MoERegroupOp::create(builder, loc, received, counts);
    return {pack.getKept(), counts, regroup.getGrouped(), regroup.getLocalOffsets()};
  }

  /// Chunk i of dimension 0 to rank i of `axis`, chunk j from rank j.
  Value allToAll(Value v, Location loc) {
    return dist::AllToAllOp::create(builder, loc, v.getType(), v, kMeshName,
                                    builder.getStrArrayAttr({axis}), 0, 0);
  }

  /// The values between the exchange and llm.moe_combine hold the
  /// received rows now: the experts' weights lose all but this rank's
  /// slice, every op's result is inferred again, and the combine gets the
  /// rows back from their experts' ranks.
  LogicalResult retypeExpertRows(const Exchange &exchange, Value offsets) {
    llvm::DenseSet<Value> received{exchange.grouped};
    llm::MoECombineOp combine;
    WalkResult result = func.walk([&](Operation *op) {
      if (llvm::none_of(op->getOperands(), [&](Value v) { return received.contains(v); }))
        return WalkResult::advance();
      if (auto c = dyn_cast<llm::MoECombineOp>(op); c && received.contains(c.getYs())) {
        combine = c;
        return WalkResult::advance();
      }
      if (auto grouped = dyn_cast<llm::GroupedMatmulOp>(op)) {
        if (grouped.getOffsets() == offsets)
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
      return failure();
    if (!combine)
      return emitError(exchange.grouped.getLoc(),
                       "expert parallelism: the experts' rows reach no llm.moe_combine");
    returnToTokens(combine, exchange, offsets);
    return success();
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

  void returnToTokens(llm::MoECombineOp combine, const Exchange &exchange, Value offsets) {
    Location loc = combine.getLoc();
    builder.setInsertionPoint(combine);
    Value ys = combine.getYs();
    Value back = llm::MoEUngroupOp::create(builder, loc, ys, exchange.counts);
    Value home = allToAll(back, loc);
    auto tokenRows = cast<RankedTensorType>(
        combine.getYs().getType()); // [P·R, C]: R rows of this rank's own tokens
    auto type = RankedTensorType::get({tokenRows.getDimSize(0) / parts, tokenRows.getDimSize(1)},
                                      tokenRows.getElementType());
    Value unpacked = llm::MoEUnpackOp::create(builder, loc, type, home, offsets, exchange.kept);
    combine.getYsMutable().assign(unpacked);
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
  llvm::DenseSet<Value> done; ///< weights already split
};

} // namespace

LogicalResult applyExpertParallel(func::FuncOp forward, StringRef axis, int64_t parts) {
  return ExpertParallel(forward, axis, parts).run();
}

} // namespace llmc
