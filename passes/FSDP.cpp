//===- FSDP.cpp - ZeRO-3: parameters stored as shards ---------------------===//
//
// After the optimizer pass built a ZeRO-2 step (sharded gradients and
// optimizer state, each rank updating its shard of a replicated parameter),
// this pass removes the replicated parameter: each rank keeps only its shard
// between steps, the update writes the shard in place, and every use of the
// full parameter reads an all_gather placed
//
//  - once per microbatch, llm.block and phase (forward, backward): the
//    gathered block is freed (by liveness) as soon as its last use is done,
//    and re-gathered for backward unless reshard-after-forward is off, in
//    which case the forward's gather stays alive for the backward;
//  - `prefetch` groups ahead of its first use, so the gather of the next
//    block is issued before the current block computes. That also bounds
//    how many gathered blocks are alive at once: 1 + prefetch;
//  - or, with keep-gathered, once per block for the whole step, the
//    gathered block alive across every microbatch (fewer gathers, the
//    memory of the stage's full parameters).
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/Inlining.h"
#include "passes/lib/Layout.h"
#include "passes/lib/ShardAttr.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

#include <map>
#include <tuple>

namespace llmc {
#define GEN_PASS_DEF_FSDP
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

struct FSDPPass : llmc::impl::FSDPBase<FSDPPass> {
  using FSDPBase::FSDPBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Layout> layout = readLayout(module);
    func::FuncOp step = lookupFunc(module, "train_step");
    if (!layout || layout->zero != 3 || !step)
      return; // nothing to do: parameters stay replicated
    if (prefetch < 0) {
      module.emitError() << "fsdp: prefetch must be >= 0, got " << static_cast<int64_t>(prefetch);
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    ArrayAttr axes = layout->axesAttr(b.getContext(), layout->zeroAxes);

    // In @train_step a parameter is sharded when its new value is an
    // all_gather of shards the optimizer computed (of the parameter itself,
    // cut by an all_slice, or of a master copy's rounding). Keep the shard
    // instead: the argument becomes the shard, updated in place.
    llvm::StringMap<DictionaryAttr> shardedParams;
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    SmallVector<Operation *> updates;
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
      auto tied = step.getResultAttrOfType<IntegerAttr>(index, kTiedToAttr);
      // The optimizer gathers each updated shard (and cuts the padding off
      // a tensor the ranks do not divide).
      auto cut = value.getDefiningOp<llm::SliceOp>();
      auto regather = (cut ? cut.getX() : value).getDefiningOp<dist::AllGatherOp>();
      if (!tied || !regather)
        continue;
      BlockArgument param = step.getArgument(tied.getInt());
      llm::ParamAttr p = llm::getParamAttr(step, param.getArgNumber());
      if (!p)
        continue;
      auto fullType = cast<RankedTensorType>(param.getType());
      param.setType(regather.getInput().getType());
      for (Operation *user : llvm::make_early_inc_range(param.getUsers()))
        if (auto slice = dyn_cast<dist::AllSliceOp>(user)) {
          for (Operation *sliceUser : slice->getUsers())
            updates.push_back(sliceUser);
          slice.replaceAllUsesWith(Value(param));
          slice.erase();
        }
      ret->setOperand(index, regather.getInput());
      if (cut)
        cut.erase();
      regather.erase();
      DictionaryAttr shard = addShardLevel(
          b.getContext(), step.getArgAttrOfType<DictionaryAttr>(param.getArgNumber(), kShardAttr),
          fullType, axes, 0);
      step.setArgAttr(param.getArgNumber(), kShardAttr, shard);
      shardedParams[p.getName()] = shard;
      gatheredTypes[p.getName()] = fullType;
    }
    gatherUses(step, shardedParams, axes, updates);
    step.setFunctionType(b.getFunctionType(body.getArgumentTypes(),
                                           body.getTerminator()->getOperandTypes()));

    // Every other entry point reads the same stored shards.
    for (const EntryPoint &entry : kEntryPoints)
      if (func::FuncOp f = lookupFunc(module, entry.function); f && f != step) {
        // Gathers are placed by program order: straight-line code, like
        // @train_step's.
        flattenBlocks(f);
        gatherUses(f, shardedParams, axes, {});
        f.setFunctionType(b.getFunctionType(f.getBody().front().getArgumentTypes(),
                                            f.getResultTypes()));
      }
  }

  using Unit = std::tuple<int64_t, bool, std::string>; // microbatch, backward, block

  /// Makes each sharded parameter argument of `func` a shard and feeds its
  /// uses (except `skip`) from all_gathers, one per unit, `prefetch` units
  /// ahead of the unit's first op.
  void gatherUses(func::FuncOp func, const llvm::StringMap<DictionaryAttr> &sharded,
                  ArrayAttr axes, ArrayRef<Operation *> skip) {
    OpBuilder b(func.getContext());
    auto mesh = FlatSymbolRefAttr::get(b.getContext(), kMeshName);
    Block &body = func.getBody().front();
    llvm::DenseMap<Operation *, int64_t> order;
    int64_t position = 0;
    for (Operation &op : body)
      order[&op] = position++;

    struct Gather {
      Value param;
      RankedTensorType fullType;
      SmallVector<OpOperand *> uses;
    };
    std::map<std::pair<unsigned, Unit>, Gather> gathers;
    std::map<Unit, Operation *> unitFirst;
    for (BlockArgument param : func.getArguments()) {
      llm::ParamAttr p = llm::getParamAttr(func, param.getArgNumber());
      if (!p || !sharded.count(p.getName()))
        continue;
      DictionaryAttr shard = sharded.lookup(p.getName());
      RankedTensorType fullType = gatheredTypes.lookup(p.getName());
      for (OpOperand &use : param.getUses()) {
        Operation *user = use.getOwner();
        if (llvm::is_contained(skip, user))
          continue;
        auto mb = user->getAttrOfType<IntegerAttr>(kMicrobatchAttr);
        auto block = user->getAttrOfType<StringAttr>(kBlockNameAttr);
        bool backward = reshardAfterForward && !keepGathered && user->hasAttr(kBackwardAttr);
        int64_t microbatch = mb && !keepGathered ? mb.getInt() : 0;
        Unit unit{microbatch, backward, block ? block.getValue().str() : ""};
        Gather &g = gathers[{param.getArgNumber(), unit}];
        g.param = param;
        g.fullType = fullType;
        g.uses.push_back(&use);
        Operation *&first = unitFirst[unit];
        if (!first || order[user] < order[first])
          first = user;
      }
      func.setArgAttr(param.getArgNumber(), kShardAttr, shard);
    }
    // Shard types for the arguments (in @train_step already done).
    for (auto &[key, g] : gathers) {
      auto t = cast<RankedTensorType>(g.param.getType());
      if (t == g.fullType) {
        SmallVector<int64_t> shape(t.getShape());
        int64_t parts = 1;
        for (Attribute a : axes)
          parts *= lookupMesh(func).axisSize(cast<StringAttr>(a).getValue());
        shape[0] = (shape[0] + parts - 1) / parts; // padded where parts do not divide
        g.param.setType(RankedTensorType::get(shape, t.getElementType()));
      }
    }
    SmallVector<Unit> units;
    for (auto &[unit, first] : unitFirst)
      units.push_back(unit);
    llvm::sort(units, [&](const Unit &x, const Unit &y) {
      return order[unitFirst[x]] < order[unitFirst[y]];
    });
    for (auto &[key, g] : gathers) {
      int64_t index = llvm::find(units, key.second) - units.begin();
      Operation *anchor = unitFirst[units[std::max<int64_t>(0, index - prefetch)]];
      b.setInsertionPoint(anchor);
      // The pieces of a padded split gather to a multiple of the ranks;
      // the padding is cut off.
      auto piece = cast<RankedTensorType>(g.param.getType());
      SmallVector<int64_t> gatheredShape(g.fullType.getShape());
      int64_t parts = 1;
      for (Attribute a : axes)
        parts *= lookupMesh(func).axisSize(cast<StringAttr>(a).getValue());
      gatheredShape[0] = piece.getDimSize(0) * parts;
      auto gatheredType = RankedTensorType::get(gatheredShape, g.fullType.getElementType());
      Location loc = unitFirst[key.second]->getLoc();
      Value full = dist::AllGatherOp::create(b, loc, gatheredType, g.param, mesh, axes,
                                             b.getI64IntegerAttr(0));
      if (gatheredType != g.fullType)
        full = llm::SliceOp::create(b, loc, g.fullType, full,
                                    SmallVector<int64_t>(gatheredShape.size(), 0));
      for (OpOperand *use : g.uses)
        use->set(full);
    }
  }

  llvm::StringMap<RankedTensorType> gatheredTypes; // per parameter, before ZeRO

  dist::MeshOp lookupMesh(func::FuncOp func) {
    return func->getParentOfType<ModuleOp>().lookupSymbol<dist::MeshOp>(kMeshName);
  }
};

} // namespace
