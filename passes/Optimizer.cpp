//===- Optimizer.cpp - @train_step: accumulation, clipping, AdamW ---------===//
//
// The training step is ordinary tensor IR, so later passes (sharding, ZeRO,
// lowering) see the optimizer like any other op. The microbatch loop is
// unrolled: the step is static, and lowering reuses activation memory across
// microbatches through liveness alone.
//
//===----------------------------------------------------------------------===//

#include "common/Adam8bit.h"
#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/Layout.h"
#include "passes/lib/ShardAttr.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <map>

namespace llmc {
#define GEN_PASS_DEF_OPTIMIZER
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// How a parameter is used, for the no-decay rule. Casts (mixed precision)
/// and dist.replicate (sharding) pass the parameter on unchanged.
bool usedAs(Value param, StringRef kind) {
  for (OpOperand &use : param.getUses()) {
    Operation *user = use.getOwner();
    if (isa<llm::CastOp, dist::ReplicateOp>(user)) {
      if (usedAs(user->getResult(0), kind))
        return true;
      continue;
    }
    if (kind == "norm" && isa<llm::LayerNormOp, llm::RMSNormOp>(user) &&
        use.getOperandNumber() > 0)
      return true;
    if (kind == "bias" && isa<llm::AddOp>(user) && use.getOperandNumber() == 1 &&
        cast<RankedTensorType>(param.getType()).getRank() == 1)
      return true;
    if (kind == "embedding" && isa<llm::EmbeddingOp>(user) && use.getOperandNumber() == 0)
      return true;
  }
  return false;
}

/// The collectives a layout needs around the optimizer (none on one rank).
class Sync {
public:
  Sync(OpBuilder &b, const std::optional<Layout> &layout) : b(b), layout(layout) {
    if (!layout)
      return;
    for (const std::string &axis : layout->batchAxes)
      if (!llvm::is_contained(layout->zeroAxes, axis))
        otherAxes.push_back(axis);
  }

  int64_t zero() const { return layout ? layout->zero : 0; }
  /// ZeRO-2/3 reduce-scatter each microbatch's gradient as backward makes
  /// it, so only shards accumulate. Under pipeline stages the microbatches'
  /// backwards are spread over the step, so a stage sums whole gradients
  /// and reduce-scatters once, after its last microbatch (as ZeRO-1 does,
  /// and as torchtitan's FSDP syncs only on a step's last microbatch):
  /// one reduce-scatter per step instead of one per microbatch.
  bool scatterPerMicrobatch() const {
    dist::MeshOp mesh = layout ? layout->mesh : dist::MeshOp(); // MeshOp's accessors are not const
    return zero() >= 2 && !(mesh && mesh.axisSize("pp") > 1);
  }

  /// ZeRO shards a parameter's state along dimension 0; where the ranks do
  /// not divide it, the tensor is padded at the end to a multiple of them
  /// (as FSDP pads) and the padding, zero, stays zero through AdamW.
  bool canShard(Type type) const {
    if (zero() == 0)
      return false;
    return cast<RankedTensorType>(type).getRank() >= 1;
  }
  int64_t parts() const { return layout->size(layout->zeroAxes); }
  /// One rank's piece: ceil(dim 0 / N) rows.
  RankedTensorType shardType(Type type) const {
    auto t = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape(t.getShape());
    shape[0] = (shape[0] + parts() - 1) / parts();
    return RankedTensorType::get(shape, t.getElementType());
  }
  /// N pieces: dimension 0 padded to a multiple of N.
  RankedTensorType paddedType(Type type) const {
    auto t = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape(t.getShape());
    shape[0] = shardType(type).getDimSize(0) * parts();
    return RankedTensorType::get(shape, t.getElementType());
  }
  Value padded(Value v, Location loc) {
    RankedTensorType type = paddedType(v.getType());
    if (type == v.getType())
      return v;
    return llm::PadOp::create(b, loc, type, v,
                              SmallVector<int64_t>(type.getRank(), 0));
  }

  /// Mean over all batch axes (all_reduce, or reduce + broadcast for the
  /// parameter-server option).
  Value average(Value v, Location loc) { return averageOver(v, layout ? layout->batchAxes : std::vector<std::string>{}, loc); }

  /// A gradient's mean over the batch axes (those outside ZeRO's, for a
  /// ZeRO-sharded one) when its parameter is split over `paramAxes`. A
  /// batch axis that also splits the parameter (ep: each rank keeps its
  /// experts) holds different pieces, each already the sum of every rank's
  /// contribution (the tokens came to it): it is left out of the mean, and
  /// the piece divided by its size instead.
  Value averageGradient(Value v, ArrayRef<std::string> paramAxes, bool zeroSharded, Location loc) {
    if (!layout)
      return v;
    std::vector<std::string> axes = zeroSharded ? otherAxes : layout->batchAxes;
    std::vector<std::string> splitting;
    for (const std::string &axis : paramAxes)
      if (llvm::is_contained(layout->batchAxes, axis))
        splitting.push_back(axis);
    if (splitting.empty())
      return averageOver(v, axes, loc);
    llvm::erase_if(axes, [&](const std::string &a) { return llvm::is_contained(splitting, a); });
    Value piece = llm::ScaleOp::create(b, loc, v,
                                       APFloat(1.0 / static_cast<double>(layout->size(splitting))));
    return averageOver(piece, axes, loc);
  }

  /// The sharding of a ZeRO-sharded state tensor: whatever sharding the
  /// parameter had (tensor parallelism), then dim 0 over the ZeRO axes.
  DictionaryAttr shardAttr(DictionaryAttr paramShard, Type localType) {
    return addShardLevel(b.getContext(), paramShard, cast<RankedTensorType>(localType),
                         zeroAxes(), 0);
  }

  Value reduceScatter(Value v, Location loc) {
    return dist::ReduceScatterOp::create(b, loc, shardType(v.getType()), padded(v, loc), meshRef(),
                                         zeroAxes(), b.getI64IntegerAttr(0),
                                         b.getStringAttr("mean"));
  }
  Value slice(Value v, Location loc) {
    return dist::AllSliceOp::create(b, loc, shardType(v.getType()), padded(v, loc), meshRef(), zeroAxes(),
                                    b.getI64IntegerAttr(0));
  }
  /// The whole tensor of type `full` from every rank's piece (the
  /// padding cut off).
  Value gather(Value shard, RankedTensorType full, Location loc) {
    RankedTensorType all = paddedType(full);
    Value whole = dist::AllGatherOp::create(b, loc, all, shard, meshRef(), zeroAxes(),
                                            b.getI64IntegerAttr(0));
    if (all == full)
      return whole;
    return llm::SliceOp::create(b, loc, full, whole, SmallVector<int64_t>(full.getRank(), 0));
  }

  /// √(Σ over gradients of ‖g‖², each sharded gradient's squares summed
  /// over the ranks holding its pieces). `axes[i]` are the mesh axes
  /// gradient i is split over (empty: replicated).
  Value globalNorm(ArrayRef<Value> grads, ArrayRef<SmallVector<std::string>> axes,
                   Location loc) {
    std::map<SmallVector<std::string>, SmallVector<Value>> groups;
    for (auto [g, a] : llvm::zip(grads, axes))
      groups[a].push_back(g);
    if (groups.size() == 1 && groups.begin()->first.empty())
      return llm::GlobalNormOp::create(b, loc, ValueRange(grads), false);
    Value total;
    for (auto &[group, values] : groups) {
      Value sq = llm::GlobalNormOp::create(b, loc, ValueRange(values), /*squared=*/true);
      if (!group.empty()) {
        SmallVector<StringRef> names(group.begin(), group.end());
        sq = dist::AllReduceOp::create(b, loc, sq.getType(), sq, meshRef(),
                                       b.getStrArrayAttr(names), b.getStringAttr("sum"));
      }
      total = total ? llm::AddOp::create(b, loc, total, sq).getResult() : sq;
    }
    return llm::SqrtOp::create(b, loc, total);
  }

private:
  Value averageOver(Value v, const std::vector<std::string> &axes, Location loc) {
    if (!layout || layout->size(axes) == 1)
      return v;
    ArrayAttr group = layout->axesAttr(b.getContext(), axes);
    if (layout->gradSync == "ps") {
      Value reduced = dist::ReduceOp::create(b, loc, v.getType(), v, meshRef(), group,
                                             b.getI64IntegerAttr(0), b.getStringAttr("mean"));
      return dist::BroadcastOp::create(b, loc, v.getType(), reduced, meshRef(), group,
                                       b.getI64IntegerAttr(0));
    }
    return dist::AllReduceOp::create(b, loc, v.getType(), v, meshRef(), group,
                                     b.getStringAttr("mean"));
  }
  FlatSymbolRefAttr meshRef() { return FlatSymbolRefAttr::get(b.getContext(), kMeshName); }
  ArrayAttr zeroAxes() { return layout->axesAttr(b.getContext(), layout->zeroAxes); }

  OpBuilder &b;
  const std::optional<Layout> &layout;
  std::vector<std::string> otherAxes;
};

/// The per-block absmax of an 8-bit moment whose codes are `codes` (this
/// rank's piece, sharded as `codesShard`). Blocks are cut from the local
/// piece (a padded vocabulary's padding included), so the global tensor is
/// the concatenation of every piece's blocks, split over all axes that
/// split the moment: `pieces` ranks.
std::pair<RankedTensorType, DictionaryAttr> absmaxState(OpBuilder &b, RankedTensorType codes,
                                                        DictionaryAttr codesShard,
                                                        const std::optional<Layout> &layout) {
  int64_t blocks = adam8bit::blockCount(codes.getNumElements());
  auto local = RankedTensorType::get({blocks}, b.getF32Type());
  SmallVector<std::string> axisNames = shardAxes(codesShard);
  if (axisNames.empty())
    return {local, nullptr}; // one piece: whole
  SmallVector<StringRef> axes(axisNames.begin(), axisNames.end());
  int64_t pieces = layout ? layout->size(axisNames) : 1;
  auto globalType = RankedTensorType::get({blocks * pieces}, b.getF32Type());
  return {local, addShardLevel(b.getContext(), nullptr, globalType, b.getStrArrayAttr(axes), 0)};
}

/// `g` in fp32, widened below the all-reduces that end its backward (the
/// tensor- or sequence-parallel sums of a replicated weight's partial
/// gradients), so those sums run on fp32 as well.
Value widen(OpBuilder &b, Value g) {
  auto f32 = [](Type type) {
    auto t = cast<RankedTensorType>(type);
    return RankedTensorType::get(t.getShape(), Float32Type::get(t.getContext()));
  };
  auto reduce = g.getDefiningOp<dist::AllReduceOp>();
  if (!reduce || !g.use_empty() || !reduce.getInput().hasOneUse())
    return llm::CastOp::create(b, g.getLoc(), f32(g.getType()), g);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(reduce);
  auto input = llm::CastOp::create(b, reduce.getLoc(), f32(reduce.getInput().getType()),
                                   reduce.getInput());
  // The widening belongs to the same backward step as the sum.
  input->setDiscardableAttrs(reduce->getDiscardableAttrDictionary());
  auto wide = dist::AllReduceOp::create(b, reduce.getLoc(), f32(g.getType()), input,
                                        reduce.getMeshAttr(), reduce.getAxes(),
                                        reduce.getReductionAttr());
  wide->setDiscardableAttrs(reduce->getDiscardableAttrDictionary());
  reduce.erase();
  return wide;
}

/// The choices of llmc-optimizer that shape @train_step.
struct StepSettings {
  int64_t microbatches = 1;
  bool eightBit = false, lossScaling = false, fp32Gradients = true;
  double beta1 = 0.9, beta2 = 0.95, epsilon = 1e-8, weightDecay = 0.1, maxGradNorm = 1.0;
  llvm::StringSet<> noDecayKinds;
};

/// Builds @train_step from @grad (and @forward, which says how each
/// parameter is used), one named step at a time: build() runs them in
/// order, each leaving in the members what the next ones read.
class TrainStepBuilder {
public:
  TrainStepBuilder(ModuleOp module, func::FuncOp forward, func::FuncOp grad,
                   const StepSettings &settings)
      : module(module), forward(forward), grad(grad), settings(settings), ctx(module.getContext()),
        b(ctx), loc(grad.getLoc()), scalar(RankedTensorType::get({}, Float32Type::get(ctx))),
        M(settings.microbatches), layout(readLayout(module)), sync(b, layout) {}

  LogicalResult build() {
    if (failed(classifyArguments()))
      return failure();
    planOptimizerState();
    declareArguments();
    createStep();
    if (failed(findLossSeed()))
      return failure();
    accumulateMicrobatches();
    takeGlobalNorm();
    SmallVector<Value> results = applyUpdates();
    finishStep(results);
    return success();
  }

private:
  /// Sorts @grad's arguments into parameters (trainable or frozen), batch
  /// inputs and observer states, and finds the result updating each state.
  LogicalResult classifyArguments() {
    for (unsigned i = 0; i < grad.getNumArguments(); ++i) {
      llm::ParamAttr p = llm::getParamAttr(grad, i);
      auto role = grad.getArgAttrOfType<StringAttr>(i, kRoleAttr);
      if (role && role.getValue() == kQatStateRole) {
        stateArgs.push_back(i);
        continue;
      }
      if (!p) {
        batchArgs.push_back(i);
        continue;
      }
      paramArgs.push_back(i);
      if (p.getTrainable())
        trainableArgs.push_back(i);
    }
    if (grad.getNumResults() != trainableArgs.size() + 1 + stateArgs.size())
      return grad.emitError("optimizer: @grad must return the loss, one gradient per "
                            "trainable parameter and one update per observer state");
    nParams = paramArgs.size();
    nTrain = trainableArgs.size();
    nStates = stateArgs.size();
    stateResult.assign(nStates, 0);
    for (unsigned r = 1 + nTrain; r < grad.getNumResults(); ++r) {
      auto tied = grad.getResultAttrOfType<IntegerAttr>(r, kTiedToAttr);
      auto it = tied ? llvm::find(stateArgs, tied.getInt()) : stateArgs.end();
      if (it == stateArgs.end())
        return grad.emitError() << "optimizer: @grad result " << r
                                << " must update an observer state (llmc.tied_to)";
      stateResult[it - stateArgs.begin()] = r;
    }
    return success();
  }

  /// Which parameters' optimizer state (and gradients) ZeRO shards, which
  /// get an fp32 master copy, and AdamW's moment slots.
  void planOptimizerState() {
    sharded.assign(nTrain, false);
    for (size_t t = 0; t < nTrain; ++t)
      sharded[t] = sync.canShard(grad.getArgument(trainableArgs[t]).getType());
    // Mixed precision: a parameter stored in a low-precision type gets an
    // fp32 master copy, kept (and sharded) with the optimizer state; the
    // update runs on the master and the parameter is its rounded copy.
    masterOf.assign(nTrain, -1);
    for (size_t t = 0; t < nTrain; ++t)
      if (!cast<RankedTensorType>(grad.getArgument(trainableArgs[t]).getType())
               .getElementType()
               .isF32())
        masterOf[t] = nParams + nMasters++;
    // AdamW's moments, one slot (m, v; 8-bit: codes and block absmax of
    // each) per trainable parameter, each slot's tensors consecutive.
    slots = settings.eightBit
                ? SmallVector<StringRef>{"adam_m", "adam_m_absmax", "adam_v", "adam_v_absmax"}
                : SmallVector<StringRef>{"adam_m", "adam_v"};
  }

  RankedTensorType f32Like(Type type) const {
    auto t = cast<RankedTensorType>(type);
    return RankedTensorType::get(t.getShape(), Float32Type::get(ctx));
  }
  DictionaryAttr argAttrs(StringRef role, StringRef name, Attribute param = {},
                          Attribute shard = {}) {
    SmallVector<NamedAttribute> list{b.getNamedAttr(kRoleAttr, b.getStringAttr(role)),
                                     b.getNamedAttr(kNameAttr, b.getStringAttr(name))};
    if (param)
      list.push_back(b.getNamedAttr(llm::kParamAttrName, param));
    if (shard)
      list.push_back(b.getNamedAttr(kShardAttr, shard));
    return b.getDictionaryAttr(list);
  }
  DictionaryAttr paramShard(unsigned arg) {
    return grad.getArgAttrOfType<DictionaryAttr>(arg, kShardAttr);
  }
  StringRef paramName(unsigned arg) { return llm::getParamAttr(grad, arg).getName(); }
  void addArgument(Type type, DictionaryAttr attrs) {
    argTypes.push_back(type);
    argAttributes.push_back(attrs);
  }

  /// @train_step's arguments: parameters, masters, moment slots, observer
  /// states, the batch (microbatches stacked), lr, step and the loss scale.
  void declareArguments() {
    for (unsigned i : paramArgs)
      addArgument(grad.getArgument(i).getType(),
                  argAttrs("param", paramName(i), llm::getParamAttr(grad, i), paramShard(i)));
    for (size_t t = 0; t < nTrain; ++t) {
      if (masterOf[t] < 0)
        continue;
      Type type = f32Like(grad.getArgument(trainableArgs[t]).getType());
      DictionaryAttr shard = paramShard(trainableArgs[t]);
      if (sharded[t])
        shard = sync.shardAttr(shard, type);
      addArgument(sharded[t] ? sync.shardType(type) : type,
                  argAttrs("master", paramName(trainableArgs[t]), {}, shard));
    }
    for (StringRef role : slots)
      for (size_t t = 0; t < nTrain; ++t) declareSlot(role, t);
    for (unsigned i : stateArgs)
      addArgument(grad.getArgument(i).getType(),
                  argAttrs(kQatStateRole, grad.getArgAttrOfType<StringAttr>(i, kNameAttr), {},
                           paramShard(i)));
    for (unsigned i : batchArgs) {
      auto t = cast<RankedTensorType>(grad.getArgument(i).getType());
      SmallVector<int64_t> shape{M};
      shape.append(t.getShape().begin(), t.getShape().end());
      auto name = grad.getArgAttrOfType<StringAttr>(i, kNameAttr);
      addArgument(RankedTensorType::get(shape, t.getElementType()),
                  argAttrs("input", name ? name.getValue() : ("batch" + Twine(i)).str()));
    }
    addArgument(scalar, argAttrs("input", "lr"));
    addArgument(scalar, argAttrs("input", "step"));
    if (settings.lossScaling)
      addArgument(scalar, argAttrs("input", "loss_scale"));
  }

  /// The argument of moment slot `role` of trainable parameter `t`.
  void declareSlot(StringRef role, size_t t) {
    Type type = f32Like(grad.getArgument(trainableArgs[t]).getType());
    DictionaryAttr shard = paramShard(trainableArgs[t]);
    if (sharded[t]) {
      shard = sync.shardAttr(shard, type);
      type = sync.shardType(type);
    }
    if (settings.eightBit && role.ends_with("_absmax")) {
      std::tie(type, shard) = absmaxState(b, cast<RankedTensorType>(type), shard, layout);
    } else if (settings.eightBit) {
      auto t8 = cast<RankedTensorType>(type);
      type = RankedTensorType::get(t8.getShape(), b.getI8Type());
    }
    addArgument(type, argAttrs(role, paramName(trainableArgs[t]), {}, shard));
  }

  /// @train_step itself, its body's insertion point, and where each kind of
  /// argument starts.
  void createStep() {
    b.setInsertionPointToEnd(module.getBody());
    step = func::FuncOp::create(b, loc, "train_step", b.getFunctionType(argTypes, {}));
    step.setAllArgAttrs(argAttributes);
    body = step.addEntryBlock();
    b.setInsertionPointToStart(body);
    slotBase = nParams + nMasters;
    stateBase = slotBase + slots.size() * nTrain;
    batchBase = stateBase + nStates;
    // Observer states, updated microbatch after microbatch.
    for (size_t k = 0; k < nStates; ++k)
      states.push_back(stepArg(stateBase + k));
    lr = stepArg(batchBase + batchArgs.size());
    stepNo = stepArg(batchBase + batchArgs.size() + 1);
    lossScale = settings.lossScaling ? stepArg(batchBase + batchArgs.size() + 2) : Value();
  }
  Value stepArg(size_t i) const { return body->getArgument(i); }
  Value slotArg(size_t slot, size_t t) const { return stepArg(slotBase + slot * nTrain + t); }

  /// Loss scaling seeds the backward with the scale: the op autodiff
  /// marked as the seed.
  LogicalResult findLossSeed() {
    if (!settings.lossScaling)
      return success();
    for (Operation &op : grad.getBody().front())
      if (op.hasAttr(kLossSeedAttr))
        seed = &op;
    if (!seed)
      return grad.emitError("optimizer: loss scaling needs the backward's seed (an op "
                            "marked llmc.loss_seed, from llmc-autodiff)");
    return success();
  }

  /// Microbatches: slice the batch, inline @grad, sum loss and gradients.
  /// Each gradient is finished (averaged over microbatches, synchronised
  /// over the batch axes) right where the last microbatch's backward
  /// produces it, so its communication can overlap the rest of backward.
  void accumulateMicrobatches() {
    gradSums.assign(nTrain, Value());
    finalGrads.assign(nTrain, Value());
    Block &gradBody = grad.getBody().front();
    for (int64_t mb = 0; mb < M; ++mb) {
      IRMapping mapping = mapMicrobatchInputs(mb);
      for (Operation &op : gradBody.without_terminator()) {
        if (&op == seed)
          continue;
        Operation *clone = b.clone(op, mapping);
        clone->setAttr(kMicrobatchAttr, b.getI64IntegerAttr(mb));
        // A different dropout mask per microbatch.
        if (auto dropout = dyn_cast<llm::DropoutOp>(clone); dropout && mb > 0)
          dropout.setSeed(dropout.getSeed() ^
                          static_cast<int64_t>((mb + 1) * 0x9E3779B97F4A7C15ull));
      }
      auto ret = cast<func::ReturnOp>(gradBody.getTerminator());
      accumulate(lossSum, mapping.lookup(ret.getOperand(0)));
      for (size_t k = 0; k < nStates; ++k)
        states[k] = mapping.lookup(ret.getOperand(stateResult[k]));
      for (size_t t = 0; t < nTrain; ++t)
        accumulateGradient(t, mapping.lookup(ret.getOperand(t + 1)), mb == M - 1);
    }
    loss = lossSum;
    if (M > 1)
      loss = llm::ScaleOp::create(b, loc, lossSum, inverseM());
    loss = sync.average(loss, loc);
  }

  APFloat inverseM() const { return APFloat(1.0 / static_cast<double>(M)); }
  void accumulate(Value &sum, Value v) {
    sum = sum ? llm::AddOp::create(b, loc, sum, v).getResult() : v;
  }

  /// What @grad's arguments are in microbatch `mb`: the step's parameters
  /// and observer states, and the microbatch's slice of each batch input
  /// (and the loss scale for the seed).
  IRMapping mapMicrobatchInputs(int64_t mb) {
    IRMapping mapping;
    for (auto [k, i] : llvm::enumerate(paramArgs)) mapping.map(grad.getArgument(i), stepArg(k));
    for (auto [k, i] : llvm::enumerate(stateArgs)) mapping.map(grad.getArgument(i), states[k]);
    for (auto [k, i] : llvm::enumerate(batchArgs)) {
      Value whole = stepArg(batchBase + k);
      auto wholeType = cast<RankedTensorType>(whole.getType());
      auto t = cast<RankedTensorType>(grad.getArgument(i).getType());
      SmallVector<int64_t> one(wholeType.getShape());
      one[0] = 1;
      SmallVector<int64_t> offsets(wholeType.getRank(), 0);
      offsets[0] = mb;
      Value part = whole;
      if (M > 1)
        part = llm::SliceOp::create(b, loc, RankedTensorType::get(one, t.getElementType()), whole,
                                    offsets);
      mapping.map(grad.getArgument(i), llm::ReshapeOp::create(b, loc, t, part));
    }
    // Loss scaling: d(scale·loss)/d loss = scale seeds the backward.
    if (seed)
      mapping.map(seed->getResult(0), lossScale);
    return mapping;
  }

  /// Folds microbatch gradient `g` of trainable parameter `t` into its
  /// running sum right where backward produces it (or, ZeRO-2, scatters it
  /// first), so at most one unreduced gradient is alive; after the `last`
  /// microbatch, averages and synchronises the sum.
  void accumulateGradient(size_t t, Value g, bool last) {
    OpBuilder::InsertionGuard guard(b);
    if (g.getDefiningOp())
      b.setInsertionPointAfter(g.getDefiningOp());
    // fp32 gradients: widened at once, so the low-precision one dies
    // here and the sum over microbatches, the reduction over ranks, the
    // norm and the update all see fp32 (bf16's 8-bit mantissa would
    // round away small contributions to a large sum).
    if (settings.fp32Gradients && masterOf[t] >= 0)
      g = widen(b, g);
    // ZeRO-2 keeps only a shard of each microbatch's gradient.
    if (sharded[t] && sync.scatterPerMicrobatch())
      g = sync.reduceScatter(g, g.getLoc());
    accumulate(gradSums[t], g);
    if (!last)
      return;
    Value f = gradSums[t];
    if (M > 1)
      f = llm::ScaleOp::create(b, f.getLoc(), f, inverseM());
    if (sharded[t] && sync.zero() >= 1 && !sync.scatterPerMicrobatch())
      f = sync.reduceScatter(f, f.getLoc());
    finalGrads[t] =
        sync.averageGradient(f, shardAxes(paramShard(trainableArgs[t])), sharded[t], f.getLoc());
    if (Operation *syncOp = finalGrads[t].getDefiningOp(); syncOp && syncOp != f.getDefiningOp())
      syncOp->setAttr(kGradientSyncAttr, b.getUnitAttr());
  }

  /// The global norm is always reported; it clips only when enabled. With
  /// sharded gradients each rank's sum of squares over its shards is
  /// completed by a sum over the ZeRO axes.
  ///
  /// The norm is also every update's verdict: a non-finite one (an
  /// overflow or NaN in any rank's gradients, or a non-finite loss, whose
  /// backward makes them so) leaves parameters and state unchanged. The
  /// norm is the same on every rank (it is taken after the gradients are
  /// synchronised, or summed over the ranks holding their pieces), so all
  /// ranks skip together.
  void takeGlobalNorm() {
    if (nTrain == 0)
      return;
    SmallVector<SmallVector<std::string>> axes(nTrain);
    for (size_t t = 0; t < nTrain; ++t) {
      axes[t] = shardAxes(paramShard(trainableArgs[t]));
      if (sharded[t])
        for (const std::string &axis : layout->zeroAxes) axes[t].push_back(axis);
      llvm::sort(axes[t]);
    }
    norm = sync.globalNorm(finalGrads, axes, loc);
  }

  size_t paramIndexOf(unsigned arg) const { return llvm::find(paramArgs, arg) - paramArgs.begin(); }

  /// One AdamW update per trainable parameter; returns @train_step's
  /// results: the loss, the parameters, the masters, the moment slots, the
  /// observer states and the norm.
  SmallVector<Value> applyUpdates() {
    SmallVector<Value> results{loss}, newParams, newMasters;
    SmallVector<SmallVector<Value>> newSlots(slots.size());
    for (size_t t = 0; t < nTrain; ++t) {
      Operation *update = createUpdate(t);
      Value newParam = update->getResult(0);
      Location ploc = grad.getArgument(trainableArgs[t]).getLoc();
      size_t paramIndex = paramIndexOf(trainableArgs[t]);
      if (masterOf[t] >= 0) {
        newMasters.push_back(newParam);
        auto low = cast<RankedTensorType>(stepArg(paramIndex).getType()).getElementType();
        auto shape = cast<RankedTensorType>(newParam.getType()).getShape();
        newParam = llm::CastOp::create(b, ploc, RankedTensorType::get(shape, low), newParam);
      }
      // ZeRO: the updated shards are gathered into the replicated parameter.
      if (sharded[t])
        newParam = sync.gather(newParam, cast<RankedTensorType>(stepArg(paramIndex).getType()),
                               ploc);
      newParams.push_back(newParam);
      for (size_t slot = 0; slot < slots.size(); ++slot)
        newSlots[slot].push_back(update->getResult(1 + slot));
    }
    results.append(newParams);
    results.append(newMasters);
    for (const SmallVector<Value> &slot : newSlots)
      results.append(slot);
    commitHistories();
    results.append(states);
    if (norm)
      results.push_back(norm);
    return results;
  }

  /// An amax history (delayed fp8 scaling) keeps a step's update only if
  /// the step is applied: a skipped step's ranges, inf or NaN among them,
  /// must not steer the next steps' scales.
  void commitHistories() {
    if (!norm)
      return;
    for (size_t k = 0; k < nStates; ++k)
      if (states[k].getDefiningOp<qat::AmaxHistoryOp>())
        states[k] = qat::CommitStateOp::create(b, loc, stepArg(stateBase + k), states[k], norm);
  }

  /// The AdamW (or 8-bit AdamW) update of trainable parameter `t`.
  Operation *createUpdate(size_t t) {
    unsigned arg = trainableArgs[t];
    Location ploc = grad.getArgument(arg).getLoc();
    bool decay = llvm::none_of(settings.noDecayKinds.keys(), [&](StringRef kind) {
      return usedAs(forward.getArgument(arg), kind);
    });
    size_t paramIndex = paramIndexOf(arg);
    // The fp32 values the update works on: the master copy (already this
    // rank's shard under ZeRO), or the parameter itself (ZeRO: this
    // rank's shard of it).
    Value p = masterOf[t] >= 0 ? stepArg(masterOf[t]) : stepArg(paramIndex);
    if (masterOf[t] < 0 && sharded[t])
      p = sync.slice(p, ploc);
    Value g = finalGrads[t];
    if (!cast<RankedTensorType>(g.getType()).getElementType().isF32())
      g = llm::CastOp::create(b, ploc, f32Like(g.getType()), g);
    APFloat b1(settings.beta1), b2(settings.beta2), eps(settings.epsilon),
        wd(decay ? settings.weightDecay : 0.0), clip(settings.maxGradNorm);
    if (settings.eightBit)
      return llm::AdamW8bitOp::create(b, ploc, p, g, slotArg(0, t), slotArg(1, t), slotArg(2, t),
                                      slotArg(3, t), lr, stepNo, norm, lossScale, b1, b2, eps, wd,
                                      clip);
    return llm::AdamWOp::create(b, ploc, p, g, slotArg(0, t), slotArg(1, t), lr, stepNo, norm,
                                lossScale, b1, b2, eps, wd, clip);
  }

  /// Returns `results`, completes the signature, names the loss and the
  /// norm, and ties each updated value to the argument it overwrites.
  void finishStep(ArrayRef<Value> results) {
    func::ReturnOp::create(b, loc, results);
    SmallVector<Type> resultTypes;
    for (Value v : results)
      resultTypes.push_back(v.getType());
    step.setFunctionType(b.getFunctionType(argTypes, resultTypes));
    step.setResultAttr(0, kRoleAttr, b.getStringAttr("output"));
    step.setResultAttr(0, kNameAttr, b.getStringAttr("loss"));
    if (norm) {
      step.setResultAttr(results.size() - 1, kRoleAttr, b.getStringAttr("output"));
      step.setResultAttr(results.size() - 1, kNameAttr, b.getStringAttr("grad_norm"));
    }
    // Results after the loss: parameters, masters, the moment slots — each
    // tied to the argument it overwrites.
    auto tie = [&](size_t result, int64_t arg) {
      step.setResultAttr(result, kTiedToAttr, b.getI64IntegerAttr(arg));
    };
    for (size_t t = 0, master = 0; t < nTrain; ++t) {
      tie(1 + t, paramIndexOf(trainableArgs[t]));
      if (masterOf[t] >= 0)
        tie(1 + nTrain + master++, masterOf[t]);
      for (size_t slot = 0; slot < slots.size(); ++slot)
        tie(1 + nTrain + nMasters + slot * nTrain + t, slotBase + slot * nTrain + t);
    }
    size_t firstState = 1 + nTrain + nMasters + slots.size() * nTrain;
    for (size_t k = 0; k < nStates; ++k)
      tie(firstState + k, stateBase + k);
  }

  ModuleOp module;
  func::FuncOp forward, grad;
  const StepSettings &settings;
  MLIRContext *ctx;
  OpBuilder b;
  Location loc;
  RankedTensorType scalar;
  int64_t M; ///< microbatches
  std::optional<Layout> layout;
  Sync sync;

  // classifyArguments: @grad's arguments by kind, and the result that
  // updates each observer state.
  SmallVector<unsigned> paramArgs, trainableArgs, batchArgs, stateArgs, stateResult;
  size_t nParams = 0, nTrain = 0, nStates = 0;
  // planOptimizerState.
  SmallVector<bool> sharded;
  SmallVector<int64_t> masterOf; ///< the master's argument, or -1
  size_t nMasters = 0;
  SmallVector<StringRef> slots;
  // declareArguments.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttributes;
  // createStep.
  func::FuncOp step;
  Block *body = nullptr;
  size_t slotBase = 0, stateBase = 0, batchBase = 0;
  SmallVector<Value> states;
  Value lr, stepNo, lossScale;
  Operation *seed = nullptr;
  // accumulateMicrobatches, takeGlobalNorm.
  Value lossSum, loss, norm;
  SmallVector<Value> gradSums, finalGrads;
};

struct OptimizerPass : llmc::impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp grad = lookupFunc(module, "grad");
    func::FuncOp forward = lookupFunc(module, "forward");
    if (!grad || !forward) {
      module.emitError("optimizer: needs @forward and @grad (run llmc-autodiff first)");
      return signalPassFailure();
    }
    FailureOr<StepSettings> settings = readSettings(module);
    if (failed(settings) || failed(TrainStepBuilder(module, forward, grad, *settings).build()))
      return signalPassFailure();
  }

  /// The pass's options, checked; fails after an error on `module`.
  FailureOr<StepSettings> readSettings(ModuleOp module) {
    if (optimizer != "adamw" && optimizer != "adamw8bit")
      return module.emitError() << "optimizer: unknown optimizer '" << optimizer
                                << "' (expected adamw or adamw8bit)";
    if (microbatches < 1)
      return module.emitError() << "optimizer: microbatches must be >= 1, got "
                                << static_cast<int64_t>(microbatches);
    StepSettings s;
    for (StringRef kind : llvm::split(StringRef(noDecay), ',')) {
      kind = kind.trim();
      if (kind.empty() || kind == "none")
        continue;
      if (kind != "norm" && kind != "bias" && kind != "embedding")
        return module.emitError() << "optimizer: unknown no-decay kind '" << kind
                                  << "' (expected norm, bias, embedding or none)";
      s.noDecayKinds.insert(kind);
    }
    s.microbatches = microbatches;
    s.eightBit = optimizer == "adamw8bit";
    s.lossScaling = lossScaling;
    s.fp32Gradients = fp32Gradients;
    s.beta1 = beta1;
    s.beta2 = beta2;
    s.epsilon = epsilon;
    s.weightDecay = weightDecay;
    s.maxGradNorm = maxGradNorm;
    return s;
  }
};

} // namespace
