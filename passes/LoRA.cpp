//===- LoRA.cpp - low-rank adapters beside the chosen matmuls -------------===//
//
// LoRA (Hu et al., 2021) as a rewrite of @forward: every chosen matmul
// y = x·W gains a trainable low-rank branch, y' = y + (α/r)·(x·A)·B, and
// every parameter of the base model is frozen (llm.param trainable = false),
// so autodiff derives gradients for the adapters only and the optimizer
// keeps state for them only. A is initialised uniform in ±1/√K (PyTorch's
// default for a K-input linear layer), B with zeros, so training starts
// from exactly the base model.
//
// Adapters follow their weight's orientation: W [K, N] gets A [K, r] and
// B [r, N]; a transposed W [N, K] gets A [r, K] and B [N, r] (the layout
// of Hugging Face PEFT's lora_A / lora_B), so merging is W + (α/r)·A·B
// (or B·A).
//
// A mixture of experts' routed experts (llm.grouped_matmul over stacked
// weights W [G, K, N], or [G, N, K]) are `mlp` matmuls too: each expert
// gets its own adapters, as PEFT gives each of Mixtral's expert Linears
// theirs, stacked A [G, K, r] and B [G, r, N] (or [G, r, K] and [G, N, r])
// and read by grouped matmuls over the same rows and offsets:
// y' = y + (α/r)·grouped(grouped(x, A), B). Expert parallelism splits the
// adapters by expert with their experts.
//
// The pass runs after llmc-shard, on each rank's piece. Under tensor
// parallelism the branch is split like its weight:
//  - column-parallel W (output dimension split): B is split the same way,
//    A is whole and read through dist.replicate, whose backward sums the
//    ranks' partial gradients of A;
//  - row-parallel W (contraction dimension split): A is split the same
//    way; x·A is a partial sum completed by a copy of the collective that
//    completes x·W (all_reduce, or reduce_scatter under sequence
//    parallelism), and the branch joins after it (row-parallel experts'
//    sum, which expert parallelism's way home defers, moves back to the
//    experts: B's gradient needs x·A whole). B is whole; under sequence
//    parallelism it is read through dist.replicate, as each rank then sees
//    only its rows.
//
// QLoRA (`qlora`) stores each adapted weight in NF4 (its absmax levels
// int8, or E4M3 with qlora-double-quant=fp8) and expands it right before
// it is read; under tensor parallelism the storage is split with
// the weight (passes/lib/QuantizedStorage.h). A tied head's table, which the
// embedding lookup reads too, is stored once: both read its expansion, and
// the adapter joins the head's product only (as PEFT's on a tied lm_head).
//
//===----------------------------------------------------------------------===//

#include "common/QuantScheme.h"
#include "dialects/Annotations/Annotations.h"
#include "dialects/QAT/QATDialect.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/ExpertParallel.h"
#include "passes/lib/Layout.h"
#include "passes/lib/LoRASpec.h"
#include "passes/lib/Parameters.h"
#include "passes/lib/QATScheme.h"
#include "passes/lib/QuantizedStorage.h"
#include "passes/lib/ShardAttr.h"
#include "passes/lib/WeightSites.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace llmc {
#define GEN_PASS_DEF_LORA
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

/// Parses "rank=8,alpha=16,targets=qkv,proj,mlp": items without '=' extend
/// the previous key's list.
std::optional<LoRASpec> llmc::parseLoRASpec(StringRef text, std::string &error) {
  LoRASpec spec;
  StringRef key;
  for (StringRef item : llvm::split(text, ',')) {
    item = item.trim();
    if (item.empty())
      continue;
    StringRef value = item;
    if (item.contains('=')) {
      std::tie(key, value) = item.split('=');
      key = key.trim();
      value = value.trim();
    } else if (key != "targets") {
      error = ("'" + item + "' has no key (expected rank=, alpha= or targets=)").str();
      return std::nullopt;
    }
    if (key == "rank") {
      if (value.getAsInteger(10, spec.rank) || spec.rank < 1) {
        error = ("rank must be a positive integer, got '" + value + "'").str();
        return std::nullopt;
      }
    } else if (key == "alpha") {
      if (value.getAsDouble(spec.alpha) || !(spec.alpha > 0)) {
        error = ("alpha must be a positive number, got '" + value + "'").str();
        return std::nullopt;
      }
    } else if (key == "targets") {
      if (!spec.targetsGiven)
        spec.targets.clear();
      spec.targetsGiven = true;
      if (!value.empty())
        spec.targets.push_back(value.str());
    } else {
      error = ("unknown key '" + key + "' (expected rank, alpha or targets)").str();
      return std::nullopt;
    }
  }
  if (spec.targets.empty()) {
    error = "targets= names no matmul";
    return std::nullopt;
  }
  return spec;
}

namespace {

/// The structural kinds of matmul `targets=` can name.
constexpr llvm::StringLiteral kKinds[] = {"qkv", "proj", "mlp", "router", "head"};

/// A matmul x·W to adapt: an llm.matmul, or the llm.grouped_matmul of a
/// mixture of experts' stacked weights, whose adapters are stacked too (one
/// A and B per expert, read by the same rows and offsets).
struct Site {
  Operation *op;
  Value x, weight;
  Value offsets; ///< the experts' routing offsets; null for llm.matmul
  bool transposed;
};

struct LoRAPass : llmc::impl::LoRABase<LoRAPass> {
  using LoRABase::LoRABase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string error;
    std::optional<LoRASpec> parsed = parseLoRASpec(spec, error);
    if (!parsed) {
      module.emitError() << "lora: " << error;
      return signalPassFailure();
    }
    loraSpec = *parsed;
    std::optional<quant::AbsmaxFormat> format = parseDoubleQuant(qloraDoubleQuant, error);
    if (!format) {
      module.emitError() << "lora: bad qlora-double-quant " << error;
      return signalPassFailure();
    }
    absmaxFormat = *format;
    if (!qlora && absmaxFormat != quant::AbsmaxFormat::Int8) {
      module.emitError() << "lora: qlora-double-quant sets the absmax levels of QLoRA's NF4 "
                            "storage; it needs qlora";
      return signalPassFailure();
    }
    layout = readLayout(module);
    forward = lookupFunc(module, "forward");
    if (!forward) {
      module.emitError("lora: no @forward");
      return signalPassFailure();
    }
    SmallVector<Site> sites;
    for (const WeightSite &site : findWeightSites(forward))
      if (!site.embedding && site.weight) {
        auto m = cast<llm::MatmulOp>(site.op);
        if (chosen(kindOf(m), m, m.getB()))
          sites.push_back({m, m.getA(), m.getB(), Value(), m.getTransposeB()});
      }
    // A mixture of experts' routed experts are MLP matmuls, one per expert.
    forward.walk([&](llm::GroupedMatmulOp g) {
      if (paramOf(g.getWeights()) && chosen("mlp", g, g.getWeights()))
        sites.push_back({g, g.getX(), g.getWeights(), g.getOffsets(), g.getTransposeB()});
    });
    for (const std::string &target : loraSpec.targets)
      if (loraSpec.targetsGiven && !matchedTargets.contains(target)) {
        module.emitError() << "lora: target '" << target
                           << "' matches no matmul weight of @forward (kinds: qkv, proj, mlp, "
                              "router, head; or a layer or parameter name)";
        return signalPassFailure();
      }
    if (sites.empty()) {
      module.emitError() << "lora: the targets choose no matmul weight of @forward (kinds: qkv, "
                            "proj, mlp, router, head; or a layer or parameter name)";
      return signalPassFailure();
    }
    // Freeze the base model before adding the (trainable) adapters.
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (llm::ParamAttr p = llm::getParamAttr(forward, i))
        forward.setArgAttr(i, llm::kParamAttrName,
                           llm::ParamAttr::get(&getContext(), p.getName(), p.getInit(),
                                               p.getScale(), /*trainable=*/false));
    for (const Site &site : sites)
      if (failed(addAdapter(site)))
        return signalPassFailure();
  }

  BlockArgument paramOf(Value v) { return parameterRead(forward, v); }

  /// Does `v` flow (through value-preserving ops) into an operand of `T`?
  template <typename T> bool reaches(Value v, int depth = 0) {
    if (depth > 8)
      return false;
    for (Operation *user : v.getUsers()) {
      if (isa<T>(user))
        return true;
      if (isa<llm::ReshapeOp, llm::SliceOp, llm::AddOp, llm::CastOp, llm::RopeOp,
              llm::TransposeOp, dist::AllReduceOp>(user) &&
          reaches<T>(user->getResult(0), depth + 1))
        return true;
    }
    return false;
  }

  /// Is `v` (back through value-preserving ops) an attention output?
  bool fromAttention(Value v, int depth = 0) {
    Operation *def = v.getDefiningOp();
    if (!def || depth > 8)
      return false;
    if (isa<llm::AttentionOp>(def))
      return true;
    // QAT's fake quantization of an activation keeps what the value is.
    if (isa<llm::ReshapeOp, llm::CastOp, llm::TransposeOp, dist::AllGatherOp,
            dist::ReplicateOp, qat::FakeQuantOp>(def))
      return fromAttention(def->getOperand(0), depth + 1);
    return false;
  }

  /// The structural kind of a weight matmul: qkv, proj, mlp, router (a
  /// mixture of experts' router logits) or head.
  StringRef kindOf(llm::MatmulOp m) {
    if (!m->getParentOfType<llm::BlockOp>())
      return feedsLoss(m.getResult()) ? "head" : "";
    if (reaches<llm::AttentionOp>(m.getResult()))
      return "qkv";
    if (reaches<llm::MoERouteOp>(m.getResult()))
      return "router";
    if (fromAttention(m.getA()))
      return "proj";
    // A product of one column is a per-token gate (Qwen-MoE's
    // shared_expert_gate), not an MLP projection: no rank is below 1.
    if (cast<RankedTensorType>(m.getResult().getType()).getShape().back() == 1)
      return "";
    return "mlp";
  }

  /// Whether `targets=` chooses the matmul `op` of kind `kind` reading
  /// `weight`, recording the entries that match.
  bool chosen(StringRef kind, Operation *op, Value weight) {
    StringRef name = llm::getParamAttr(forward, paramOf(weight).getArgNumber()).getName();
    auto block = op->getParentOfType<llm::BlockOp>();
    bool hit = false;
    for (const std::string &target : loraSpec.targets) {
      StringRef t(target);
      bool kindTarget = llvm::is_contained(kKinds, t);
      bool named = (block && block.getName() == t) || namesParameter(name, t);
      if (kindTarget ? t == kind : named) {
        matchedTargets.insert(t);
        hit = true;
      }
    }
    return hit;
  }

  /// Adds an adapter parameter: `global` sharded by `splits` (already mapped
  /// onto its dimensions) to its local piece.
  Value addParam(Location loc, const std::string &name, ArrayRef<int64_t> global,
                 ArrayRef<ShardSplit> splits, Type element, StringRef init, double scale,
                 bool trainable = true) {
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    SmallVector<int64_t> shape(global);
    DictionaryAttr shard;
    for (const ShardSplit &s : splits) {
      auto current = RankedTensorType::get(shape, element);
      if (s.pads()) { // the padded vocabulary of a head's B
        shard = addPadLevel(ctx, shard, current, s.dim, s.padTo);
        shape[s.dim] = s.padTo;
        continue;
      }
      shard = addShardLevel(ctx, shard, current, axesAttr(s.axes), s.dim, s.blocks);
      // Padded where the ranks do not divide it (a vocabulary), as the weight.
      int64_t ranks = meshSize(s.axes);
      shape[s.dim] = (shape[s.dim] + ranks - 1) / ranks;
    }
    SmallVector<NamedAttribute> attrs{b.getNamedAttr(
        llm::kParamAttrName, llm::ParamAttr::get(ctx, name, init, APFloat(scale), trainable))};
    if (shard)
      attrs.push_back(b.getNamedAttr(kShardAttr, shard));
    // After the last parameter, so parameters stay together.
    unsigned index = 0;
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (llm::getParamAttr(forward, i))
        index = i + 1;
    (void)forward.insertArgument(index, RankedTensorType::get(shape, element),
                                 b.getDictionaryAttr(attrs), loc);
    return forward.getArgument(index);
  }

  /// The number of ranks over mesh `axes`.
  int64_t meshSize(ArrayRef<std::string> axes) {
    return layout ? layout->size(axes) : 1;
  }
  int64_t meshSize(ArrayAttr axes) {
    SmallVector<std::string> names;
    for (StringRef axis : axes.getAsValueRange<StringAttr>())
      names.push_back(axis.str());
    return meshSize(names);
  }
  ArrayAttr axesAttr(ArrayRef<std::string> axes) {
    SmallVector<StringRef> names(axes.begin(), axes.end());
    return OpBuilder(&getContext()).getStrArrayAttr(names);
  }

  /// Under expert parallelism tensor parallelism completes row-parallel
  /// experts' rows after their way home (passes/lib/TensorParallel.cpp);
  /// the adapter's B reads x·A whole, completed where the experts' rows
  /// are, so that sum moves back right after the experts' product `m`.
  static void completeAtTheExperts(Operation *m) {
    Value rows = m->getResult(0);
    while (rows.hasOneUse()) {
      Operation *user = *rows.getUsers().begin();
      if (auto sum = dyn_cast<dist::AllReduceOp>(user)) {
        if (rows == m->getResult(0))
          return; // already there
        sum.getResult().replaceAllUsesWith(rows);
        sum->moveAfter(m);
        sum->setOperand(0, m->getResult(0));
        m->getResult(0).replaceAllUsesExcept(sum.getResult(), sum);
        sum->getResult(0).setType(m->getResult(0).getType());
        return;
      }
      if (!movesExpertRows(user, rows))
        return;
      rows = user->getResult(0);
    }
  }

  /// x·W, or each expert's rows times its own W.
  static Value product(OpBuilder &b, Location loc, const Site &site, Value x, Value w) {
    if (site.offsets)
      return llm::GroupedMatmulOp::create(b, loc, x, site.offsets, w, site.transposed);
    return llm::MatmulOp::create(b, loc, x, w, false, site.transposed);
  }

  LogicalResult addAdapter(const Site &site) {
    Operation *m = site.op;
    BlockArgument weight = paramOf(site.weight);
    StringRef name = llm::getParamAttr(forward, weight.getArgNumber()).getName();
    bool transposed = site.transposed;
    // Stacked experts [G, K, N] lead with the expert dimension; each
    // expert's A and B are stacked the same way.
    const int64_t lead = site.offsets ? 1 : 0;
    int64_t contractDim = lead + (transposed ? 1 : 0), outputDim = lead + (transposed ? 0 : 1);
    auto weightShard = forward.getArgAttrOfType<DictionaryAttr>(weight.getArgNumber(), kShardAttr);
    SmallVector<int64_t> global =
        shardGlobalShape(weightShard, cast<RankedTensorType>(weight.getType()));
    SmallVector<ShardSplit> splits = shardSplits(weightShard);
    if (global.size() != static_cast<size_t>(2 + lead))
      return m->emitOpError("lora: weight '")
             << name << (lead ? "' is not a stack of matrices" : "' is not a matrix");
    int64_t K = global[contractDim], N = global[outputDim], r = loraSpec.rank;
    if (r >= std::min(K, N))
      return m->emitOpError("lora: rank ") << r << " is not below the smaller dimension of '"
                                           << name << "' (" << K << "x" << N << ")";
    // Which of W's dimensions tensor parallelism splits; a padded
    // vocabulary (the head's output dimension) pads B's as well, before
    // any split, as W's. A's contraction and B's output dimension stand
    // where W's do; expert parallelism splits the experts of both.
    std::optional<ShardSplit> column, row;
    SmallVector<ShardSplit> aSplits, bSplits;
    for (const ShardSplit &s : splits) {
      if (s.pads() && s.dim != outputDim)
        return m->emitOpError("lora: '") << name << "' is padded along its input dimension";
      if (s.dim < lead) {
        aSplits.push_back(s);
        bSplits.push_back(s);
        continue;
      }
      if (s.pads()) {
        bSplits.push_back(s);
        continue;
      }
      (s.dim == outputDim ? column : row) = s;
      (s.dim == outputDim ? bSplits : aSplits).push_back(s);
    }

    // A: [K, r] (transposed: [r, K]), B: [r, N] (transposed: [N, r]),
    // after the experts' dimension.
    SmallVector<int64_t> aShape(global.begin(), global.begin() + lead), bShape(aShape);
    aShape.append(transposed ? SmallVector<int64_t>{r, K} : SmallVector<int64_t>{K, r});
    bShape.append(transposed ? SmallVector<int64_t>{N, r} : SmallVector<int64_t>{r, N});
    Type element = cast<RankedTensorType>(weight.getType()).getElementType();
    Location loc = m->getLoc();
    Value a = addParam(loc, (name + ".lora_A").str(), aShape, aSplits, element, "uniform",
                       1.0 / std::sqrt(static_cast<double>(K)));
    Value bParam = addParam(loc, (name + ".lora_B").str(), bShape, bSplits, element, "zeros", 0);

    OpBuilder b(m);
    b.setInsertionPointAfter(m);
    auto computeType = cast<RankedTensorType>(site.x.getType()).getElementType();
    auto castTo = [&](Value v) -> Value {
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getElementType() == computeType)
        return v;
      return llm::CastOp::create(b, loc, RankedTensorType::get(t.getShape(), computeType), v);
    };
    auto mesh = FlatSymbolRefAttr::get(&getContext(), kMeshName);
    Value aUse = castTo(a), bUse = castTo(bParam);
    if (column)
      aUse = dist::ReplicateOp::create(b, loc, aUse.getType(), aUse, mesh, axesAttr(column->axes));

    // y: the value the branch joins — the matmul's result, or, for a
    // row-parallel weight, the collective that completes it.
    Value y = m->getResult(0);
    Operation *completion = nullptr;
    if (row) {
      if (lead == 1) {
        completeAtTheExperts(m);
        b.setInsertionPointAfter(m);
      }
      for (Operation *user : y.getUsers())
        if (isa<dist::AllReduceOp, dist::ReduceScatterOp>(user))
          completion = user;
      if (!completion || !y.hasOneUse())
        return m->emitOpError("lora: the row-parallel matmul of '")
               << name << "' is not completed by one all_reduce or reduce_scatter";
    }
    Value z = product(b, loc, site, site.x, aUse);
    if (completion) {
      b.setInsertionPointAfter(completion);
      auto zType = cast<RankedTensorType>(z.getType());
      SmallVector<int64_t> shape(zType.getShape());
      if (auto scatter = dyn_cast<dist::ReduceScatterOp>(completion))
        shape[scatter.getDim()] /= meshSize(scatter.getAxes());
      Operation *copy = b.clone(*completion);
      copy->setOperand(0, z);
      copy->getResult(0).setType(RankedTensorType::get(shape, zType.getElementType()));
      z = copy->getResult(0);
      if (isa<dist::ReduceScatterOp>(completion))
        bUse = dist::ReplicateOp::create(b, loc, bUse.getType(), bUse, mesh, axesAttr(row->axes));
      y = completion->getResult(0);
    }
    Value d = product(b, loc, site, z, bUse);
    d = llm::ScaleOp::create(b, loc, d, APFloat(loraSpec.scale()));
    auto sum = llm::AddOp::create(b, loc, y, d);
    y.replaceAllUsesExcept(sum.getResult(), sum);
    if (qlora)
      return storeNf4(m, weight, name, weightShard, /*stacked=*/lead == 1);
    return success();
  }

  /// QLoRA: frozen `weight` becomes NF4 storage (the layout of `llmc
  /// quantize --scheme nf4:block<N>`; split with the weight under tensor
  /// parallelism), expanded right before it is read. A `stacked` weight
  /// [G, A, B] (a mixture of experts', read by `m`, an llm.grouped_matmul)
  /// is stored as its 2-D view [G·A, B], expert after expert, as `llmc
  /// quantize` writes it; tensor and expert parallelism split that view.
  LogicalResult storeNf4(Operation *m, BlockArgument weight, StringRef name, DictionaryAttr shard,
                         bool stacked) {
    FailureOr<Operation *> firstRead = nf4Reads(m, weight, name);
    if (failed(firstRead))
      return failure();
    auto type = cast<RankedTensorType>(weight.getType());
    std::optional<StorageSplit> split;
    auto mesh = getOperation().lookupSymbol<dist::MeshOp>(kMeshName);
    FailureOr<Nf4StorageTypes> types =
        stacked ? stackNf4Storage(m, name, type, shard, mesh, split)
                : nf4StorageFor(m, "qlora", name, type, shard, mesh, qloraBlock, split);
    if (failed(types))
      return failure();
    Location loc = m->getLoc();
    OpBuilder b(&getContext());
    Nf4Storage storage = addNf4Storage(forward, loc, name, *types);
    b.setInsertionPoint(*firstRead);
    auto expanded = qat::DequantizeNf4Op::create(
        b, loc, type, storage.codes, storage.absmaxQ, storage.absmaxScale, storage.absmaxMean,
        b.getI64IntegerAttr(qloraBlock), DenseI64ArrayAttr(), DenseI64ArrayAttr(),
        DenseI64ArrayAttr(), DenseI64ArrayAttr(),
        b.getStringAttr(quant::absmaxFormatName(absmaxFormat)));
    if (split)
      setNf4Piece(expanded, *split);
    weight.replaceAllUsesWith(expanded.getResult());
    if (failed(forward.eraseArgument(weight.getArgNumber())))
      return m->emitOpError("qlora: cannot remove the full-precision '") << name << "'";
    return success();
  }

  /// The NF4 storage of the experts' stack `name` (this rank's piece
  /// `local`): whole when nothing splits it, else its 2-D view's piece.
  FailureOr<Nf4StorageTypes> stackNf4Storage(Operation *m, StringRef name, RankedTensorType local,
                                             DictionaryAttr shard, dist::MeshOp mesh,
                                             std::optional<StorageSplit> &split) {
    if (shardSplits(shard).empty())
      return nf4StorageFor(m, "qlora", name, local, shard, mesh, qloraBlock, split);
    RankedTensorType view;
    FailureOr<StorageSplit> read = readExpertSplit(m, "qlora", name, local, shard, mesh, view);
    if (failed(read))
      return failure();
    split = *read;
    return splitNf4Storage(m, "qlora", name, view, *split, qloraBlock);
  }

  /// The first of `weight`'s reads, each of which must be matmul `m`'s or,
  /// for a tied head, an embedding lookup's (directly or through a cast):
  /// the stored weight is what both read.
  FailureOr<Operation *> nf4Reads(Operation *m, BlockArgument weight, StringRef name) {
    auto reader = [&](Operation *op) { return op == m || isa<llm::EmbeddingOp>(op); };
    Operation *first = nullptr;
    for (Operation *user : weight.getUsers()) {
      bool allowed = reader(user) ||
                     (isa<llm::CastOp>(user) && llvm::all_of(user->getUsers(), reader));
      if (!allowed && isa<qat::ObserveOp, qat::FakeQuantOp>(user))
        return m->emitOpError("qlora: '")
               << name
               << "' is fake-quantized by --qat weights=; QLoRA already stores it "
                  "quantized (drop weights= from --qat, or --qlora)";
      if (!allowed)
        return m->emitOpError("qlora: '")
               << name << "' is also read by '" << user->getName()
               << "'; leave its matmul out of the targets, or drop --qlora";
      if (!first || user->isBeforeInBlock(first))
        first = user;
    }
    return first;
  }

  LoRASpec loraSpec;
  quant::AbsmaxFormat absmaxFormat = quant::AbsmaxFormat::Int8;
  std::optional<Layout> layout;
  func::FuncOp forward;
  llvm::StringSet<> matchedTargets;
};

} // namespace
