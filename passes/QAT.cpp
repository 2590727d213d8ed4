//===- QAT.cpp - fake-quantize the chosen weights and activations ---------===//
//
// Quantization-aware training as a rewrite of @forward: every chosen
// operand x of a chosen op becomes fake_quant(x, range(x)). Autodiff then
// derives the straight-through backward, and every later pass (sharding of
// the optimizer, recomputation, pipelining, lowering) treats the new ops
// like any other.
//
// The pass runs on each rank's piece of the graph (after llmc-shard), so a
// quantization group may be split over ranks: an activation's rows over the
// batch axes, a weight's rows or columns over tp. Ranges are [−min, max]
// pairs, so one elementwise-max all-reduce over exactly the axes that cut a
// group gives every rank the range one rank would see on the whole tensor;
// axes that only split *between* groups (a column-parallel weight quantized
// per output channel) need nothing.
//
// Outlier columns (`activations=int8:outlier6`, LLM.int8()) follow the same
// rule twice: the per-column ranges that decide which columns stay in high
// precision are combined over the axes that split the rows, so every rank
// keeps the columns one rank would; the quantization range is then observed
// over the remaining columns and combined like any other.
//
// A mixture of experts' llm.grouped_matmul is a matmul site too, its
// routed rows the input. Its stacked experts' weight [G, A, B] is G
// weights, as `llmc quantize` stores it (":stacked"): a per-tensor scheme
// takes one range per expert, a per-channel one a range per expert and
// channel, each observed on a 2-D view of the stack whose rows are the
// groups (ep, which splits the experts, then combines nothing; tp only
// where it splits a group). Blocks never cross an expert's row. Under a
// minmax or delayed per-tensor scheme the routed rows and dY are quantized
// expert by expert as well (passes/lib/RowGroupQuant.h): a range per
// group of rows, combined over the axes that split a group's rows but ep,
// whose ranks hold other experts. A delayed scheme keeps an amax history
// per expert for each of the three, as Transformer Engine keeps one per
// GEMM of a grouped linear layer: [local experts, history + 1], sharded
// over ep like the experts. Its router's matmul can
// be left alone (skip=router; keep-routers for --precision fp8).
//
// Delayed scaling (an fp8 scheme with the `delayed` observer, Transformer
// Engine's DelayedScaling) keeps one amax history per tensor as persistent
// state (`qat_state`, tensor<(history+1)xf32>): the tensor is quantized
// with the range qat.delayed_range reads from the history, and
// qat.amax_history records this step's range, combined over the ranks like
// a current range is, so every rank holds the same history. A weight's or
// input's history is updated in the forward, dY's in the backward.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/Layout.h"
#include "passes/lib/Parameters.h"
#include "passes/lib/QATScheme.h"
#include "passes/lib/QuantRanges.h"
#include "passes/lib/RowGroupQuant.h"
#include "passes/lib/ShardAttr.h"
#include "passes/lib/WeightSites.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <map>

namespace llmc {
#define GEN_PASS_DEF_QAT
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

struct QATPass : llmc::impl::QATBase<QATPass> {
  using QATBase::QATBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string error;
    std::optional<QATSpec> parsed = parseQATSpec(spec, error);
    if (!parsed) {
      module.emitError() << "qat: " << error;
      return signalPassFailure();
    }
    qatSpec = *parsed;
    forward = lookupFunc(module, "forward");
    if (!forward) {
      module.emitError("qat: no @forward");
      return signalPassFailure();
    }
    // Routers in llm.block bodies too.
    bool routers = false;
    forward.walk([&](llm::MoERouteOp) { routers = true; });
    if (keepRouters && routers && !llvm::is_contained(qatSpec.skip, "router"))
      qatSpec.skip.push_back("router");
    layout = readLayout(module);
    markBatchDerived();

    bool matmuls = llvm::is_contained(qatSpec.ops, "matmul"),
         embeddings = llvm::is_contained(qatSpec.ops, "embedding");
    for (const WeightSite &site : findWeightSites(forward))
      if (site.embedding ? embeddings : matmuls)
        if (failed(quantizeSite(site)))
          return signalPassFailure();
    // A mixture of experts' grouped products are matmuls too.
    SmallVector<llm::GroupedMatmulOp> experts;
    forward.walk([&](llm::GroupedMatmulOp g) { experts.push_back(g); });
    if (matmuls)
      for (llm::GroupedMatmulOp g : experts)
        if (failed(quantizeExperts(g)))
          return signalPassFailure();
    for (const std::string &entry : qatSpec.skip)
      if (!matchedSkips.contains(entry)) {
        module.emitError() << "qat: skip '" << entry
                           << "' matches no layer, parameter, head or embedding of @forward";
        return signalPassFailure();
      }
  }

  /// Values computed from the batch (non-parameter arguments).
  void markBatchDerived() {
    for (BlockArgument arg : forward.getArguments())
      if (!llm::getParamAttr(forward, arg.getArgNumber()))
        batchDerived.insert(arg);
    // Post-order: a block's body (and its yield) before the block.
    forward.walk([&](Operation *op) {
      Operation *from = op;
      if (auto block = dyn_cast<llm::BlockOp>(op))
        from = block.getBody().front().getTerminator();
      if (llvm::any_of(from->getOperands(), [&](Value v) { return batchDerived.contains(v); }))
        for (Value r : op->getResults())
          batchDerived.insert(r);
    });
  }

  StringRef paramName(BlockArgument arg) {
    return llm::getParamAttr(forward, arg.getArgNumber()).getName();
  }

  /// Whether `op` is excluded by `skip=`, recording the entries that match.
  bool skipped(Operation *op, BlockArgument weight) {
    return skipMatches(forward, op, weight, qatSpec.skip, matchedSkips);
  }

  /// How each dimension of parameter `arg` is split (from its llmc.shard).
  SmallVector<ShardSplit> paramSplits(BlockArgument arg) {
    return shardSplits(forward.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(), kShardAttr));
  }

  LogicalResult quantizeSite(const WeightSite &site) {
    Operation *op = site.op;
    if (site.embedding) {
      BlockArgument table = site.weight;
      if (!qatSpec.weights || skipped(op, table))
        return success();
      if (!table)
        return op->emitOpError("qat: the embedding table is not a parameter");
      // Per channel: one range per vocabulary row.
      return quantizeOperand(op, 0, qatSpec.weights->attr(&getContext(), 0), paramSplits(table),
                             table, paramName(table).str() + ".lookup");
    }
    auto matmul = cast<llm::MatmulOp>(op);
    BlockArgument weight = site.weight;
    if (skipped(op, weight))
      return success();
    auto a = cast<RankedTensorType>(matmul.getA().getType());
    if (weight && qatSpec.gradients && failed(quantizeOutputGrad(matmul, matmul.getA(), weight)))
      return failure();
    if (weight && qatSpec.weights) {
      // A weight's output channel: the dimension not contracted.
      if (failed(quantizeOperand(op, 1, qatSpec.weights->attr(&getContext(), site.outputAxis),
                                 paramSplits(weight), weight, paramName(weight).str())))
        return failure();
    } else if (!weight && qatSpec.activations) {
      auto b = cast<RankedTensorType>(matmul.getB().getType());
      if (failed(quantizeOperand(op, 1, qatSpec.activations->attr(&getContext(), b.getRank() - 1),
                                 activationSplits(matmul.getB(), {}), nullptr,
                                 siteName(op) + ".rhs")))
        return failure();
    }
    if (!qatSpec.activations)
      return success();
    // A row-parallel matmul's input is split along its last dimension like
    // the weight's contraction dimension.
    SmallVector<ShardSplit> extra;
    if (weight) {
      int64_t contraction = matmul.getTransposeB() ? 1 : 0;
      for (ShardSplit s : paramSplits(weight))
        if (s.dim == contraction) {
          s.dim = a.getRank() - 1;
          extra.push_back(s);
        }
    }
    return quantizeOperand(op, 0, qatSpec.activations->attr(&getContext(), a.getRank() - 1),
                           activationSplits(matmul.getA(), extra), nullptr,
                           (weight ? paramName(weight).str() : siteName(op)) + ".input");
  }

  /// An llm.grouped_matmul of a mixture of experts, like a weight's matmul:
  /// the stacked experts' weight [G, K, F] (or [G, F, K]) quantized expert
  /// by expert (quantizeExpertWeights), the routed rows [M, K] as an
  /// activation (rows past the groups are zero and leave the range alone),
  /// and dY.
  LogicalResult quantizeExperts(llm::GroupedMatmulOp experts) {
    Operation *op = experts;
    BlockArgument weight = parameterRead(forward, experts.getWeights());
    if (!weight)
      return op->emitOpError("qat: the experts' weights are not a parameter");
    if (skipped(op, weight))
      return success();
    if (qatSpec.gradients &&
        failed(quantizeOutputGrad(op, experts.getX(), weight, experts.getOffsets())))
      return failure();
    int64_t outputAxis = experts.getTransposeB() ? 1 : 2, contraction = 3 - outputAxis;
    if (qatSpec.weights) {
      // A channel axis names a dimension of each expert's matrix, as
      // `llmc quantize` reads it; left out, the expert's output channel.
      QATSchemeSpec spec = *qatSpec.weights;
      if (spec.granularity == "channel" && spec.axis && *spec.axis > 1)
        return op->emitOpError("qat: channel axis ")
               << *spec.axis << " of each expert's matrix of '" << paramName(weight)
               << "' (0 or 1)";
      spec.axis = spec.axis ? *spec.axis + 1 : outputAxis;
      if (failed(quantizeExpertWeights(experts, spec.attr(&getContext(), outputAxis), weight)))
        return failure();
    }
    if (!qatSpec.activations)
      return success();
    // Weights split along their contraction dimension (row-parallel
    // experts) split the rows' last dimension alike.
    SmallVector<ShardSplit> extra;
    for (ShardSplit s : paramSplits(weight))
      if (s.dim == contraction) {
        s.dim = 1;
        extra.push_back(s);
      }
    qat::SchemeAttr scheme = qatSpec.activations->attr(&getContext(), 1);
    if (quantizesRowGroups(scheme))
      return quantizeRowGroups(experts, scheme, activationSplits(experts.getX(), extra), weight);
    return quantizeOperand(op, 0, scheme, activationSplits(experts.getX(), extra), nullptr,
                           paramName(weight).str() + ".input");
  }

  /// The routed rows of `experts` through fake quantization expert by
  /// expert: a range per group of rows, combined over the axes that split
  /// a group's rows or columns — not ep, whose ranks hold other experts'
  /// rows (each rank's rows of its experts come from every ep rank's
  /// tokens). A delayed scheme keeps an amax history per expert.
  LogicalResult quantizeRowGroups(llm::GroupedMatmulOp experts, qat::SchemeAttr scheme,
                                  ArrayRef<ShardSplit> splits, BlockArgument weight) {
    Operation *op = experts;
    Value x = experts.getX();
    QuantizedKey key = keyOf(op, x, scheme);
    if (auto it = quantized.find(key); it != quantized.end()) {
      experts.getXMutable().assign(it->second);
      return success();
    }
    FailureOr<SmallVector<std::string>> axes =
        reductionAxes(op, scheme, cast<RankedTensorType>(x.getType()), splits);
    if (failed(axes))
      return failure();
    FailureOr<Value> state =
        expertHistories(op, scheme, weight, paramName(weight).str() + ".input");
    if (failed(state))
      return failure();
    OpBuilder b(op);
    Value q = fakeQuantRowGroups(b, op->getLoc(), x, experts.getOffsets(), scheme,
                                 axesAttr(withoutExpertAxis(*axes)), *state);
    quantized[key] = q;
    experts.getXMutable().assign(q);
    return success();
  }

  /// `axes` without ep (the expert axis).
  static SmallVector<std::string> withoutExpertAxis(ArrayRef<std::string> axes) {
    SmallVector<std::string> kept;
    for (const std::string &axis : axes)
      if (axis != "ep")
        kept.push_back(axis);
    return kept;
  }

  ArrayAttr axesAttr(ArrayRef<std::string> axes) {
    SmallVector<StringRef> names(axes.begin(), axes.end());
    return OpBuilder(&getContext()).getStrArrayAttr(names);
  }

  /// The stacked weights of `experts` [G, A, B] through fake quantization
  /// one expert at a time: a per-tensor range per expert on the view
  /// [G, A·B], a per-channel one per expert and row on [G·A, B] or per
  /// expert and column on the transposed [G·B, A] — the view's rows, the
  /// channel axis 0 — and back. The stack's splits move to the view's
  /// dimensions, so a split of the groups combines nothing.
  LogicalResult quantizeExpertWeights(llm::GroupedMatmulOp experts, qat::SchemeAttr scheme,
                                      BlockArgument weight) {
    Operation *op = experts;
    const std::string site = paramName(weight).str();
    StringRef granularity = scheme.getGranularity();
    if (granularity == "block")
      return quantizeOperand(op, 2, scheme, paramSplits(weight), weight, site);
    auto stack = cast<RankedTensorType>(experts.getWeights().getType());
    ArrayRef<int64_t> g = stack.getShape();
    // Which view dimension each stack dimension lands in.
    const bool columns = granularity == "channel" && scheme.getAxis() == 2;
    std::array<int64_t, 3> viewDim = {0, 1, 1};
    SmallVector<int64_t> view = {g[0], g[1] * g[2]};
    if (granularity == "channel") {
      viewDim = columns ? std::array<int64_t, 3>{0, 1, 0} : std::array<int64_t, 3>{0, 0, 1};
      view = columns ? SmallVector<int64_t>{g[0] * g[2], g[1]}
                     : SmallVector<int64_t>{g[0] * g[1], g[2]};
    }
    SmallVector<ShardSplit> splits = paramSplits(weight);
    for (ShardSplit &s : splits) {
      s.dim = viewDim[s.dim];
      s.globalSize = 0;
    }
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value w = experts.getWeights();
    Type element = stack.getElementType();
    auto permute = [&](Value v) -> Value {
      auto t = cast<RankedTensorType>(v.getType());
      return llm::TransposeOp::create(
          b, loc,
          RankedTensorType::get({t.getDimSize(0), t.getDimSize(2), t.getDimSize(1)}, element), v,
          b.getDenseI64ArrayAttr({0, 2, 1}));
    };
    Value stacked = columns ? permute(w) : w;
    auto stackedType = cast<RankedTensorType>(stacked.getType());
    Value flat = llm::ReshapeOp::create(b, loc, RankedTensorType::get(view, element), stacked);
    auto back = llm::ReshapeOp::create(b, loc, stackedType, flat);
    experts.getWeightsMutable().assign(columns ? permute(back) : back.getResult());
    return quantizeOperand(back, 0, perRowScheme(scheme), splits, weight, site);
  }

  /// Routes the output of `op` (a matmul reading `input` and `weight`)
  /// through qat.quantize_grad, so both backward matmuls read the quantized
  /// dY. Its range is per tensor: combined over every axis that splits the
  /// input's rows or the weight (an axis over which dY is replicated
  /// combines equal ranges, which changes nothing). A mixture of experts'
  /// product (`offsets`, its row groups) takes a range per group of rows
  /// under a minmax scheme, combined over the same axes but ep.
  LogicalResult quantizeOutputGrad(Operation *op, Value input, BlockArgument weight,
                                   Value offsets = {}) {
    SmallVector<std::string> axes;
    auto add = [&](ArrayRef<ShardSplit> splits) {
      for (const ShardSplit &s : splits)
        for (const std::string &axis : s.axes)
          if (!llvm::is_contained(axes, axis))
            axes.push_back(axis);
    };
    add(activationSplits(input, {}));
    add(paramSplits(weight));
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    Value y = op->getResult(0);
    qat::SchemeAttr scheme = qatSpec.gradients->attr(&getContext(), 0);
    Value groups = offsets && quantizesRowGroups(scheme) ? offsets : Value();
    if (groups)
      axes = withoutExpertAxis(axes);
    std::string site = paramName(weight).str() + ".output_grad";
    FailureOr<Value> state = groups ? expertHistories(op, scheme, weight, site)
                                    : historyState(op, scheme, nullptr, {}, site);
    if (failed(state))
      return failure();
    // Each rank's dY is of its share of the batch's mean loss: the batch
    // ranks' count times one rank's.
    int64_t batchRanks = *state && layout ? layout->batchSize() : 1;
    auto q = qat::QuantizeGradOp::create(b, op->getLoc(), y, *state, groups, scheme, axesAttr(axes),
                                         b.getI64IntegerAttr(batchRanks));
    y.replaceAllUsesExcept(q.getResult(), q);
    if (batchDerived.contains(y))
      batchDerived.insert(q.getResult());
    return success();
  }

  SmallVector<ShardSplit> activationSplits(Value v, ArrayRef<ShardSplit> extra) {
    SmallVector<ShardSplit> splits(extra.begin(), extra.end());
    if (layout && batchDerived.contains(v) && layout->batchSize() > 1) {
      ShardSplit batch;
      batch.dim = 0;
      batch.axes.assign(layout->batchAxes.begin(), layout->batchAxes.end());
      splits.push_back(batch);
    }
    return splits;
  }

  /// The mesh axes whose pieces must be combined for every group to see
  /// all its elements; errors when a block straddles two pieces.
  FailureOr<SmallVector<std::string>> reductionAxes(Operation *op, qat::SchemeAttr scheme,
                                                    RankedTensorType type,
                                                    ArrayRef<ShardSplit> splits) {
    SmallVector<std::string> axes;
    auto add = [&](ArrayRef<std::string> more) {
      for (const std::string &axis : more)
        if (!llvm::is_contained(axes, axis))
          axes.push_back(axis);
    };
    int64_t last = type.getRank() - 1;
    for (const ShardSplit &s : splits) {
      if (scheme.getGranularity() == "tensor") {
        add(s.axes);
      } else if (scheme.getGranularity() == "channel") {
        if (s.dim != scheme.getAxis())
          add(s.axes);
      } else if (s.dim == last && s.globalSize > 0) {
        // Blocks run along the last dimension: each rank's pieces of it
        // must hold whole blocks.
        int64_t ranks = layout ? layout->size(s.axes) : 1;
        int64_t piece = s.globalSize / s.blocks / std::max<int64_t>(ranks, 1);
        if (piece % scheme.getBlock() != 0)
          return op->emitOpError("qat: blocks of ")
                 << scheme.getBlock() << " do not fit the " << piece
                 << "-element pieces this layout splits the last dimension into";
      }
    }
    return axes;
  }

  /// A stable name for a matmul without a weight parameter: its layer and
  /// position among the matmuls of @forward.
  std::string siteName(Operation *op) {
    int64_t index = 0;
    bool found = false;
    forward.walk([&](llm::MatmulOp m) {
      if (m.getOperation() == op)
        found = true;
      else if (!found)
        ++index;
    });
    auto block = op->getParentOfType<llm::BlockOp>();
    return (block ? block.getName().str() + "." : std::string()) + "matmul" +
           std::to_string(index);
  }

  /// The persistent EMA state of a site: one [−min, max] pair per local
  /// group, sharded like the dimension that indexes the groups.
  FailureOr<Value> emaState(Operation *op, qat::SchemeAttr scheme, RankedTensorType type,
                            ArrayRef<ShardSplit> splits, bool isWeight, const std::string &site) {
    if (scheme.getGranularity() == "block")
      return op->emitOpError("qat: an ema observer needs tensor or channel granularity (block "
                             "ranges are per position; use minmax)");
    if (!isWeight && scheme.getGranularity() == "channel" && scheme.getAxis() == 0)
      return op->emitOpError("qat: an ema observer of an activation's dimension 0 (its rows) "
                             "is not supported; use the default (last) channel axis");
    if (!sitesNamed.insert(site).second)
      return op->emitOpError("qat: two observers would share the state '") << site << "'";
    return groupState(op, scheme, scheme.groupCount(type.getShape()), 2, splits, site);
  }

  /// A new persistent state argument of @forward, `site`: [groups, width]
  /// f32, a row per local group of `scheme`, sharded like the dimension
  /// that indexes the groups (its splits among `splits`).
  FailureOr<Value> groupState(Operation *op, qat::SchemeAttr scheme, int64_t groups, int64_t width,
                              ArrayRef<ShardSplit> splits, const std::string &site) {
    auto stateType = RankedTensorType::get({groups, width}, Float32Type::get(&getContext()));
    DictionaryAttr shard;
    for (const ShardSplit &s : splits)
      if (scheme.getGranularity() == "channel" && s.dim == scheme.getAxis() && s.pads()) {
        // A padded vocabulary's channels: the state of the real ones, padded.
        if (shard)
          return op->emitOpError("qat: an observer's channels are padded after a split");
        shard = addPadLevel(
            &getContext(), nullptr,
            RankedTensorType::get({s.globalSize, width}, stateType.getElementType()), 0, s.padTo);
      } else if (scheme.getGranularity() == "channel" && s.dim == scheme.getAxis()) {
        if (llvm::any_of(shardSplits(shard), [](const ShardSplit &o) { return !o.pads(); }))
          return op->emitOpError("qat: an observer's channels are split twice");
        auto global = RankedTensorType::get({groups * (layout ? layout->size(s.axes) : 1), width},
                                            stateType.getElementType());
        SmallVector<StringRef> axes(s.axes.begin(), s.axes.end());
        OpBuilder b(&getContext());
        shard = addShardLevel(&getContext(), shard, global, b.getStrArrayAttr(axes), 0,
                              s.blocks);
      }
    OpBuilder b(&getContext());
    SmallVector<NamedAttribute> attrs{b.getNamedAttr(kRoleAttr, b.getStringAttr(kQatStateRole)),
                                      b.getNamedAttr(kNameAttr, b.getStringAttr(site))};
    if (shard)
      attrs.push_back(b.getNamedAttr(kShardAttr, shard));
    unsigned index = forward.getNumArguments();
    if (failed(forward.insertArgument(index, stateType, b.getDictionaryAttr(attrs), op->getLoc())))
      return op->emitOpError("qat: cannot add the observer state argument");
    return Value(forward.getArgument(index));
  }

  /// A delayed scheme's amax history (common/DelayedScaling.h: the range,
  /// then `history` amaxes), a new persistent state argument of @forward;
  /// null for any other scheme. Per tensor it is one history, replicated:
  /// the ranks that hold pieces of the tensor combine their ranges before
  /// recording them, and other ranks hold other tensors. Per slice of
  /// dimension 0 (`type`'s: a stack's experts) it is one history per
  /// local slice, sharded like them.
  FailureOr<Value> historyState(Operation *op, qat::SchemeAttr scheme, RankedTensorType type,
                                ArrayRef<ShardSplit> splits, const std::string &site) {
    if (scheme.getObserver() != "delayed")
      return Value();
    if (!sitesNamed.insert(site).second)
      return op->emitOpError("qat: two amax histories would share the state '") << site << "'";
    if (scheme.getGranularity() != "tensor")
      return groupState(op, scheme, scheme.groupCount(type.getShape()), scheme.getHistory() + 1,
                        splits, site);
    OpBuilder b(&getContext());
    auto stateType = RankedTensorType::get({scheme.getHistory() + 1}, b.getF32Type());
    SmallVector<NamedAttribute> attrs{b.getNamedAttr(kRoleAttr, b.getStringAttr(kQatStateRole)),
                                      b.getNamedAttr(kNameAttr, b.getStringAttr(site))};
    unsigned index = forward.getNumArguments();
    (void)forward.insertArgument(index, stateType, b.getDictionaryAttr(attrs), op->getLoc());
    return Value(forward.getArgument(index));
  }

  /// Under a delayed scheme, one amax history per expert of `op` (a grouped
  /// product) for its rows or dY: [local experts, history + 1], sharded
  /// like the stacked weight's experts (over ep). Null for other schemes.
  FailureOr<Value> expertHistories(Operation *op, qat::SchemeAttr scheme, BlockArgument weight,
                                   const std::string &site) {
    auto stack = cast<RankedTensorType>(weight.getType());
    return historyState(op, perRowScheme(scheme), stack, paramSplits(weight), site);
  }

  LogicalResult quantizeOperand(Operation *op, unsigned index, qat::SchemeAttr scheme,
                                ArrayRef<ShardSplit> splits, BlockArgument weight,
                                const std::string &site) {
    Value x = op->getOperand(index);
    auto type = cast<RankedTensorType>(x.getType());
    if (scheme.getGranularity() == "block" &&
        (type.getRank() < 1 || type.getShape().back() % scheme.getBlock() != 0))
      return op->emitOpError("qat: blocks of ")
             << scheme.getBlock() << " do not divide the last dimension of "
             << (weight ? ("'" + paramName(weight) + "' ").str() : std::string("the input "))
             << type;
    if (scheme.getGranularity() == "channel" && scheme.getAxis() >= type.getRank())
      return op->emitOpError("qat: channel axis ")
             << scheme.getAxis() << " is out of range for " << type;
    FailureOr<SmallVector<std::string>> axes = reductionAxes(op, scheme, type, splits);
    if (failed(axes))
      return failure();
    QuantizedKey key = keyOf(op, x, scheme);
    if (auto it = quantized.find(key); it != quantized.end()) {
      op->setOperand(index, it->second);
      return success();
    }
    OpBuilder b(op);
    Location loc = op->getLoc();
    FailureOr<Value> columns = outlierColumns(op, b, x, scheme, splits);
    if (failed(columns))
      return failure();
    Value range;
    if (*columns && isLastAxisChannel(scheme, type)) {
      // Per column already: the kept columns' ranges are their own, and
      // outlier columns' ranges go unused.
      range = *columns;
    } else {
      range = rangeOverAxes(b, loc, qat::ObserveOp::create(b, loc, x, *columns, scheme),
                            axesAttr(*axes));
    }
    if (scheme.getObserver() == "delayed") {
      FailureOr<Value> state = historyState(op, scheme, type, splits, site);
      if (failed(state))
        return failure();
      range = delayedRange(b, loc, *state, range, scheme);
    } else if (scheme.getObserver() == "ema") {
      FailureOr<Value> state = emaState(op, scheme, type, splits, static_cast<bool>(weight), site);
      if (failed(state))
        return failure();
      range = qat::EmaOp::create(b, loc, *state, range,
                                 b.getF64FloatAttr(scheme.getMomentum().convertToDouble()));
    }
    Value q = qat::FakeQuantOp::create(b, loc, x, range, *columns, scheme);
    quantized[key] = q;
    op->setOperand(index, q);
    return success();
  }

  static bool isLastAxisChannel(qat::SchemeAttr scheme, RankedTensorType type) {
    return scheme.getGranularity() == "channel" && scheme.getAxis() == type.getRank() - 1;
  }

  /// For a scheme with an outlier threshold: the per-column ranges of x
  /// (a per-channel observe of its last axis), combined over the axes that
  /// split its rows. Null without a threshold.
  FailureOr<Value> outlierColumns(Operation *op, OpBuilder &b, Value x, qat::SchemeAttr scheme,
                                  ArrayRef<ShardSplit> splits) {
    if (scheme.getOutlier().convertToDouble() <= 0)
      return Value();
    auto type = cast<RankedTensorType>(x.getType());
    auto perColumn = qat::SchemeAttr::get(&getContext(), scheme.getFormat(), "channel",
                                          type.getRank() - 1, 0, scheme.getSymmetric(), "minmax",
                                          scheme.getMomentum(), APFloat(0.0), 0, 0, "max");
    FailureOr<SmallVector<std::string>> axes = reductionAxes(op, perColumn, type, splits);
    if (failed(axes))
      return failure();
    Value local = qat::ObserveOp::create(b, op->getLoc(), x, Value(), perColumn);
    return rangeOverAxes(b, op->getLoc(), local, axesAttr(*axes));
  }

  QATSpec qatSpec;
  func::FuncOp forward;
  std::optional<Layout> layout;
  llvm::DenseSet<Value> batchDerived;
  llvm::StringSet<> matchedSkips;
  llvm::StringSet<> sitesNamed;
  /// One quantized copy per (value, scheme, region): Q, K and V
  /// projections reading one normalised input share it, so do an MoE
  /// layer's gate and up products.
  using QuantizedKey = std::tuple<const void *, const void *, const void *>;
  static QuantizedKey keyOf(Operation *op, Value x, qat::SchemeAttr scheme) {
    return {x.getAsOpaquePointer(), scheme.getAsOpaquePointer(),
            static_cast<const void *>(op->getBlock())};
  }
  std::map<QuantizedKey, Value> quantized;
};

} // namespace
