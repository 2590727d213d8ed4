//===- TensorParallel.cpp - Megatron tensor parallelism on @forward -------===//
//
// Within each llm.block the attention heads and the MLP's inner dimension
// are split over the tensor-parallel axis, found from the graph's structure
// rather than from parameter names:
//
//  - every llm.attention splits its heads (kv heads too: GQA/MQA need
//    kv_heads % tp == 0; packed rows' segment ids and rope positions are
//    per token, the same on every rank). Walking back from q, k, v through
//    rope, reshape, per-head norms (Qwen3's and Gemma 3's q_norm and
//    k_norm: replicated weights whose gradients the f operator sums over
//    the ranks' heads), the QKV split (a slice of a fused projection, whose
//    columns become blocks split per rank), bias adds, reaches the
//    projection matmuls: column-parallel, their weight (and bias) split
//    along the output dimension;
//  - every activation (gelu, silu, swiglu) fed by such matmuls splits the
//    MLP's inner dimension, back to its (column-parallel) up-projections;
//    a mixture of experts' (llm.grouped_matmul) splits every expert's inner
//    dimension the same way, routing and dispatch replicated on every rank;
//  - the matmul consuming the split heads or activation is row-parallel: its
//    weight is split along the contraction dimension and its result is a
//    partial sum, completed by an all_reduce (Megatron's g) — for experts
//    where their rows reach the moe_combine, past expert parallelism's way
//    home (and in a generation step past the combine itself);
//  - the replicated input of the column-parallel matmuls goes through one
//    dist.replicate per block half (Megatron's f), whose backward all-reduces
//    the input gradient.
//
// So each layer communicates 2 all-reduces of b·s·h forward and 2 backward.
//
// The vocabulary is split too when it divides by tp (Megatron's
// vocabulary-parallel embedding and loss): the token embedding looks up only
// its rows (others give zeros) and an all_reduce sums the shards; the
// output head is column-parallel over the vocabulary, and the loss is built
// from per-row statistics — a max, then Σ exp and the target's logit —
// combined by three all-reduces of b·s numbers, so no rank ever holds a
// whole row of logits. A tied embedding/head weight is split once for both.
// A vocabulary padded by llmc-pad-vocab is split padded (its shards cut the
// padded rows), and the loss's statistics keep its real classes.
//
// Split parameters record their split as a `llmc.shard` level so the runtime
// initialises and checkpoints exactly the global tensor's pieces. Weights
// may reach their matmul through llm.cast (mixed precision).
//
//===----------------------------------------------------------------------===//

#include "passes/lib/TensorParallel.h"

#include "dialects/Annotations/Annotations.h"
#include "passes/lib/ExpertParallel.h"
#include "passes/lib/ShardAttr.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace llmc {
namespace {

/// How a value is split: along `dim`, which consists of `blocks` equal
/// blocks each split over the tensor-parallel ranks.
struct Split {
  int64_t dim;
  int64_t blocks;
  bool operator==(const Split &o) const { return dim == o.dim && blocks == o.blocks; }
};

class TensorParallel {
public:
  TensorParallel(func::FuncOp func, StringRef axis, int64_t tp, bool forwardOnly)
      : func(func), builder(func.getContext()), axis(axis.str()), tp(tp), forwardOnly(forwardOnly) {
  }

  LogicalResult run();

private:
  LogicalResult shardBlock(llm::BlockOp block);
  /// `v` must become split as `split`: walk back to column-parallel matmuls.
  LogicalResult splitProducer(Value v, Split split);
  /// The row-parallel consumer of split value `v` (through reshapes).
  LogicalResult rowParallel(Value v);
  /// A mixture of experts' down projections as row-parallel matmuls.
  LogicalResult rowParallelExperts(llm::GroupedMatmulOp grouped);
  /// The moe_combine the experts' output `rows` reach through ops linear in
  /// them alone, or null.
  llm::MoECombineOp combineOfExperts(Value rows);
  /// With `pad`, a dimension tp does not divide is padded to a multiple of it.
  LogicalResult splitParam(Value param, Split split, Operation *user, bool pad = false);
  /// Megatron's vocabulary-parallel embedding and cross-entropy.
  LogicalResult splitVocabulary();
  LogicalResult vocabParallelEmbedding(llm::EmbeddingOp embedding);
  LogicalResult vocabParallelLoss(llm::CrossEntropyOp loss);
  /// Every use of a split parameter must be one this pass rewrote.
  LogicalResult checkParamUses();
  RankedTensorType localType(Type t, Split split);
  Value replicated(Value h, Operation *before);
  /// A sum over the tensor-parallel ranks, inserted after `value`'s producer.
  Value allReduce(Value value, StringRef reduction, Location loc);
  LogicalResult retype();

  func::FuncOp func;
  OpBuilder builder;
  std::string axis;
  int64_t tp;
  bool forwardOnly; ///< a generation step: nothing differentiates the program
  llvm::DenseMap<Value, Split> split;          // values (and params) now local
  llvm::DenseMap<Operation *, Type> explicitTypes; // reshapes / slices
  llvm::DenseMap<Value, Value> replicas;       // f operator per replicated input
  llvm::DenseSet<Operation *> rowDone;
  llvm::DenseSet<Operation *> handled;         // ops that read a split parameter
};

RankedTensorType TensorParallel::localType(Type t, Split s) {
  auto tensor = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(tensor.getShape());
  shape[s.dim] = (shape[s.dim] + tp - 1) / tp; // padded where tp does not divide (vocabulary)
  return RankedTensorType::get(shape, tensor.getElementType());
}

Value TensorParallel::replicated(Value h, Operation *before) {
  Value &r = replicas[h];
  if (r)
    return r;
  OpBuilder::InsertionGuard guard(builder);
  if (Operation *def = h.getDefiningOp())
    builder.setInsertionPointAfter(def);
  else
    builder.setInsertionPoint(before);
  auto op = dist::ReplicateOp::create(builder, before->getLoc(), h.getType(), h,
                                      FlatSymbolRefAttr::get(builder.getContext(), "mesh"),
                                      builder.getStrArrayAttr({axis}));
  if (auto name = before->getAttr(kBlockNameAttr))
    op->setAttr(kBlockNameAttr, name);
  r = op;
  return r;
}

LogicalResult TensorParallel::splitParam(Value param, Split s, Operation *user, bool pad) {
  // Mixed precision reads the fp32 master weight through a cast.
  handled.insert(user);
  while (auto cast = param.getDefiningOp<llm::CastOp>()) {
    if (!cast->hasOneUse())
      return user->emitOpError("tensor parallelism: the cast of this weight has other uses");
    handled.insert(cast);
    param = cast.getX();
  }
  auto arg = dyn_cast<BlockArgument>(param);
  if (!arg || !llm::getParamAttr(func, arg.getArgNumber()))
    return user->emitOpError("tensor parallelism: expected a parameter as the weight");
  auto type = cast<RankedTensorType>(param.getType());
  if (type.getDimSize(s.dim) % (s.blocks * tp) != 0 && !(pad && s.blocks == 1))
    return user->emitOpError("tensor parallelism: dimension ")
           << s.dim << " of parameter '" << llm::getParamAttr(func, arg.getArgNumber()).getName()
           << "' (" << type.getDimSize(s.dim) << ") is not divisible into " << s.blocks
           << " block(s) over " << tp << " ranks";
  if (auto it = split.find(param); it != split.end()) {
    if (!(it->second == s))
      return user->emitOpError("tensor parallelism: parameter '")
             << llm::getParamAttr(func, arg.getArgNumber()).getName()
             << "' would be split two different ways";
    return success();
  }
  split[param] = s;
  func.setArgAttr(
      arg.getArgNumber(), kShardAttr,
      addShardLevel(func.getContext(),
                    func.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(), kShardAttr), type,
                    builder.getStrArrayAttr({axis}), s.dim, s.blocks));
  arg.setType(localType(type, s));
  return success();
}

LogicalResult TensorParallel::splitProducer(Value v, Split s) {
  if (auto it = split.find(v); it != split.end()) {
    if (!(it->second == s))
      return emitError(v.getLoc(), "tensor parallelism: a value would be split two ways");
    return success();
  }
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getDimSize(s.dim) % (s.blocks * tp) != 0)
    return emitError(v.getLoc(), "tensor parallelism: dimension ")
           << s.dim << " (" << type.getDimSize(s.dim) << ") does not split into " << s.blocks
           << " block(s) over " << tp << " ranks";
  split[v] = s;
  Operation *def = v.getDefiningOp();
  if (!def)
    return emitError(v.getLoc(), "tensor parallelism: cannot split a function argument");
  int64_t last = type.getRank() - 1;
  if (auto rope = dyn_cast<llm::RopeOp>(def))
    return splitProducer(rope.getX(), s);
  if (auto norm = dyn_cast<llm::RMSNormOp>(def)) {
    // A norm of each head (Qwen3's and Gemma 3's q_norm, k_norm): the heads
    // split, each whole. Its weight stays replicated and enters through the
    // f operator, whose backward sums the ranks' partial gradients.
    if (s.dim == last)
      return def->emitOpError("tensor parallelism: cannot split the dimension a norm reduces");
    norm.getGammaMutable().assign(replicated(norm.getGamma(), def));
    return splitProducer(norm.getX(), s);
  }
  if (auto reshape = dyn_cast<llm::ReshapeOp>(def)) {
    // [B, T, H·D] -> [B, T, H, D] split on heads: the input's last dim.
    auto in = reshape.getX().getType();
    if (!(s.dim == 2 && type.getRank() == 4 && in.getRank() == 3 && s.blocks == 1))
      return def->emitOpError("tensor parallelism: cannot split through this reshape");
    explicitTypes[def] = localType(type, s);
    return splitProducer(reshape.getX(), Split{2, 1});
  }
  if (auto slice = dyn_cast<llm::SliceOp>(def)) {
    // One of equal parts of a fused projection along the last dim.
    auto in = slice.getX().getType();
    int64_t size = type.getDimSize(last), full = in.getDimSize(last);
    ArrayRef<int64_t> offsets = slice.getOffsets();
    if (s.dim != last || s.blocks != 1 || full % size != 0 || offsets[last] % size != 0 ||
        in.getShape().drop_back() != type.getShape().drop_back())
      return def->emitOpError("tensor parallelism: only equal splits of a fused projection "
                              "along the last dimension can be parallelised");
    SmallVector<int64_t> local(offsets);
    local[last] /= tp;
    slice.setOffsets(local);
    explicitTypes[def] = localType(type, s);
    return splitProducer(slice.getX(), Split{last, full / size});
  }
  if (auto add = dyn_cast<llm::AddOp>(def)) {
    if (failed(splitProducer(add.getLhs(), s)))
      return failure();
    auto rhs = cast<RankedTensorType>(add.getRhs().getType());
    if (rhs.getRank() != 1 || s.dim != last)
      return def->emitOpError("tensor parallelism: expected a bias add");
    return splitParam(add.getRhs(), Split{0, s.blocks}, def);
  }
  if (auto matmul = dyn_cast<llm::MatmulOp>(def)) {
    auto w = cast<RankedTensorType>(matmul.getB().getType());
    if (s.dim != last || matmul.getTransposeA() || w.getRank() != 2)
      return def->emitOpError("tensor parallelism: expected a projection x·W");
    // Column-parallel: W split along its output dimension; the input stays
    // replicated and enters through the f operator.
    if (failed(splitParam(matmul.getB(), Split{matmul.getTransposeB() ? 0 : 1, s.blocks}, def)))
      return failure();
    matmul.getAMutable().assign(replicated(matmul.getA(), def));
    return success();
  }
  if (auto grouped = dyn_cast<llm::GroupedMatmulOp>(def)) {
    // Every expert column-parallel: the stacked weights [E, F, K] (or
    // [E, K, F]) split along the output dimension; the dispatched copies
    // stay replicated (the f operator).
    if (s.dim != last)
      return def->emitOpError("tensor parallelism: expected the experts' projections x·W");
    if (failed(splitParam(grouped.getWeights(), Split{grouped.getTransposeB() ? 1 : 2, s.blocks},
                          def)))
      return failure();
    grouped.getXMutable().assign(replicated(grouped.getX(), def));
    return success();
  }
  return def->emitOpError("tensor parallelism: cannot split the value this op produces");
}

LogicalResult TensorParallel::rowParallelExperts(llm::GroupedMatmulOp grouped) {
  if (!rowDone.insert(grouped).second)
    return success();
  // Each expert row-parallel: the stacked weights split along the
  // contraction; the partial sums of all experts' rows are completed by
  // one all-reduce where the rows reach the layer's moe_combine through
  // linear ops alone: on the combine's rows (expert parallelism's way home
  // ends there: its P·k·N rows become k·N), or in a generation step on
  // the combined N tokens, merged with expert parallelism's own sum of
  // the partial outputs. (The combine's backward reads its rows for the
  // routing weights' gradient, so a differentiated program sums them
  // before it.)
  if (failed(splitParam(grouped.getWeights(), Split{grouped.getTransposeB() ? 2 : 1, 1}, grouped)))
    return failure();
  llm::MoECombineOp combine = combineOfExperts(grouped.getResult());
  if (combine && !forwardOnly) {
    Value rows = combine.getYs();
    Value reduced = allReduce(rows, "sum", combine.getLoc());
    combine.getYsMutable().assign(reduced);
    return success();
  }
  if (combine) {
    Value out = combine.getResult();
    auto epSum = out.hasOneUse() ? dyn_cast<dist::AllReduceOp>(*out.getUsers().begin())
                                 : dist::AllReduceOp();
    if (epSum && epSum.getReduction() == "sum") {
      SmallVector<Attribute> axes(epSum.getAxes().begin(), epSum.getAxes().end());
      axes.push_back(builder.getStringAttr(axis));
      epSum.setAxesAttr(builder.getArrayAttr(axes));
      return success();
    }
    Value reduced = allReduce(out, "sum", combine.getLoc());
    out.replaceAllUsesExcept(reduced, reduced.getDefiningOp());
    return success();
  }
  Value reduced = allReduce(grouped.getResult(), "sum", grouped.getLoc());
  grouped.getResult().replaceAllUsesExcept(reduced, reduced.getDefiningOp());
  return success();
}

llm::MoECombineOp TensorParallel::combineOfExperts(Value rows) {
  // The way home of expert parallelism moves, pads and reorders rows: a
  // sum over tp commutes with it.
  while (rows.hasOneUse()) {
    Operation *user = *rows.getUsers().begin();
    if (auto combine = dyn_cast<llm::MoECombineOp>(user))
      return combine.getYs() == rows ? combine : llm::MoECombineOp();
    if (!movesExpertRows(user, rows))
      return {};
    rows = user->getResult(0);
  }
  return {};
}

LogicalResult TensorParallel::rowParallel(Value v) {
  for (Operation *user : llvm::make_early_inc_range(v.getUsers())) {
    if (auto reshape = dyn_cast<llm::ReshapeOp>(user)) {
      // [B, T, H, D] -> [B, T, H·D]: the split moves to the last dim.
      auto out = reshape.getType();
      split[reshape.getResult()] = Split{out.getRank() - 1, 1};
      explicitTypes[user] = localType(out, Split{out.getRank() - 1, 1});
      if (failed(rowParallel(reshape.getResult())))
        return failure();
      continue;
    }
    if (auto grouped = dyn_cast<llm::GroupedMatmulOp>(user); grouped && grouped.getX() == v) {
      if (failed(rowParallelExperts(grouped)))
        return failure();
      continue;
    }
    auto matmul = dyn_cast<llm::MatmulOp>(user);
    auto w = matmul ? dyn_cast<RankedTensorType>(matmul.getB().getType()) : RankedTensorType();
    if (!matmul || matmul.getA() != v || matmul.getTransposeA() || w.getRank() != 2)
      return user->emitOpError("tensor parallelism: uses the split result of '")
             << (v.getDefiningOp() ? v.getDefiningOp()->getName().getStringRef() : "an argument")
             << "', which must feed a projection (row-parallel matmul)";
    if (!rowDone.insert(user).second)
      continue;
    // Row-parallel: W split along the contraction; partial sums all-reduced.
    if (failed(splitParam(matmul.getB(), Split{matmul.getTransposeB() ? 1 : 0, 1}, user)))
      return failure();
    Value reduced = allReduce(matmul.getResult(), "sum", user->getLoc());
    matmul.getResult().replaceAllUsesExcept(reduced, reduced.getDefiningOp());
  }
  return success();
}

LogicalResult TensorParallel::shardBlock(llm::BlockOp block) {
  SmallVector<Operation *> seeds;
  block.walk([&](Operation *op) {
    // Attention (split by heads) and what the op definitions mark as the
    // interior of a column/row-parallel pair (MLP activations).
    if (isa<llm::AttentionOp>(op) || op->hasTrait<llmc::trait::ColumnParallelInterior>())
      seeds.push_back(op);
  });
  for (Operation *op : seeds) {
    if (auto att = dyn_cast<llm::AttentionOp>(op)) {
      int64_t heads = att.getQ().getType().getDimSize(2);
      int64_t kv = att.getK().getType().getDimSize(2);
      if (heads % tp != 0 || kv % tp != 0)
        return op->emitOpError("tensor parallelism: ")
               << heads << " query and " << kv << " key/value heads do not split over " << tp
               << " ranks";
      for (Value x : {att.getQ(), att.getK(), att.getV()})
        if (failed(splitProducer(x, Split{2, 1})))
          return failure();
      split[att.getOut()] = Split{2, 1};
      if (failed(rowParallel(att.getOut())))
        return failure();
      continue;
    }
    // An MLP activation, unless it is already inside a parallel region.
    if (split.count(op->getResult(0)))
      continue;
    int64_t last = cast<RankedTensorType>(op->getResult(0).getType()).getRank() - 1;
    for (Value x : op->getOperands())
      if (failed(splitProducer(x, Split{last, 1})))
        return failure();
    split[op->getResult(0)] = Split{last, 1};
    if (failed(rowParallel(op->getResult(0))))
      return failure();
  }
  return success();
}

LogicalResult TensorParallel::retype() {
  // Local shapes, in program order: explicit for reshapes and slices,
  // inferred for everything else.
  WalkResult result = func.walk<WalkOrder::PostOrder>([&](Operation *op) {
    if (auto block = dyn_cast<llm::BlockOp>(op)) {
      auto yield = cast<llm::YieldOp>(block.getBody().front().getTerminator());
      for (auto [r, v] : llvm::zip(block.getResults(), yield.getValues())) r.setType(v.getType());
      return WalkResult::advance();
    }
    if (auto it = explicitTypes.find(op); it != explicitTypes.end()) {
      op->getResult(0).setType(it->second);
      return WalkResult::advance();
    }
    if (auto cast = dyn_cast<llm::CastOp>(op)) {
      cast.getResult().setType(
          RankedTensorType::get(cast.getX().getType().getShape(), cast.getType().getElementType()));
      return WalkResult::advance();
    }
    auto infer = dyn_cast<InferTypeOpInterface>(op);
    if (!infer)
      return WalkResult::advance();
    SmallVector<Type> types;
    if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                      op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                      op->getRegions(), types))) {
      op->emitOpError("tensor parallelism: cannot infer the local shape");
      return WalkResult::interrupt();
    }
    for (auto [r, t] : llvm::zip(op->getResults(), types)) r.setType(t);
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  func.setFunctionType(FunctionType::get(
      func.getContext(), func.getBody().front().getArgumentTypes(), func.getResultTypes()));
  return success();
}

LogicalResult TensorParallel::run() {
  SmallVector<llm::BlockOp> blocks;
  func.walk([&](llm::BlockOp b) { blocks.push_back(b); });
  if (blocks.empty())
    return func.emitError("tensor parallelism: @forward has no llm.block to parallelise");
  for (llm::BlockOp b : blocks)
    if (failed(shardBlock(b)))
      return failure();
  if (failed(splitVocabulary()) || failed(checkParamUses()))
    return failure();
  return retype();
}

Value TensorParallel::allReduce(Value value, StringRef reduction, Location loc) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointAfterValue(value);
  auto op = dist::AllReduceOp::create(
      builder, loc, value.getType(), value, FlatSymbolRefAttr::get(builder.getContext(), "mesh"),
      builder.getStrArrayAttr({axis}), builder.getStringAttr(reduction));
  if (Operation *def = value.getDefiningOp())
    if (auto name = def->getAttr(kBlockNameAttr))
      op->setAttr(kBlockNameAttr, name);
  return op;
}

LogicalResult TensorParallel::splitVocabulary() {
  SmallVector<llm::EmbeddingOp> embeddings;
  SmallVector<llm::CrossEntropyOp> losses;
  func.walk([&](llm::EmbeddingOp e) { embeddings.push_back(e); });
  func.walk([&](llm::CrossEntropyOp l) { losses.push_back(l); });
  for (llm::EmbeddingOp e : embeddings)
    if (failed(vocabParallelEmbedding(e)))
      return failure();
  for (llm::CrossEntropyOp l : losses)
    if (failed(vocabParallelLoss(l)))
      return failure();
  return success();
}

/// A table of whole-vocabulary rows split over tp: each rank looks up its
/// rows (zeros for the others') and an all_reduce sums the pieces.
LogicalResult TensorParallel::vocabParallelEmbedding(llm::EmbeddingOp embedding) {
  auto table = dyn_cast<BlockArgument>(embedding.getTable());
  int64_t vocab = embedding.getTable().getType().getDimSize(0);
  // Not a parameter or already a shard: stays replicated. A vocabulary tp
  // does not divide (GPT-2's 50257) is padded to a multiple of tp: the last
  // ranks' tails are rows no token id reaches.
  if (!table || !llm::getParamAttr(func, table.getArgNumber()) || embedding.getVocabSize() != 0)
    return success();
  if (failed(splitParam(table, Split{0, 1}, embedding, /*pad=*/true)))
    return failure();
  embedding.setRowOffset(0);
  embedding.setVocabSize(vocab);
  addRankOffset(embedding, "row_offset", 0, builder.getStrArrayAttr({axis}), (vocab + tp - 1) / tp);
  Value sum = allReduce(embedding.getResult(), "sum", embedding.getLoc());
  embedding.getResult().replaceAllUsesExcept(sum, sum.getDefiningOp());
  return success();
}

/// logits = x·Wᵀ with W [V, C] (or x·W, W [C, V]) becomes column-parallel
/// over the vocabulary, and the loss is assembled from per-row statistics.
/// A soft-cap between the head and the loss (Gemma 2) is elementwise: it
/// runs on each rank's columns.
LogicalResult TensorParallel::vocabParallelLoss(llm::CrossEntropyOp loss) {
  auto cap = loss.getLogits().getDefiningOp<llm::SoftcapOp>();
  if (cap && !cap->hasOneUse())
    return success();
  auto head = (cap ? cap.getX() : loss.getLogits()).getDefiningOp<llm::MatmulOp>();
  if (!head || head.getTransposeA() || cast<RankedTensorType>(head.getB().getType()).getRank() != 2)
    return success(); // not a projection: the loss stays replicated
  auto logitsType = cast<RankedTensorType>(head.getType());
  int64_t width = logitsType.getShape().back(), last = logitsType.getRank() - 1;
  if (!head->hasOneUse())
    return success();
  // The shards split the columns, a padded vocabulary's padding included
  // (llmc-pad-vocab); a width tp does not divide is padded further. Either
  // padding (logits of zero weights) is masked out of the max, the sum and
  // the gradient: the classes are the loss's num_classes.
  if (failed(splitParam(head.getB(), Split{head.getTransposeB() ? 0 : 1, 1}, head, /*pad=*/true)))
    return failure();
  int64_t shard = (width + tp - 1) / tp;
  int64_t vocab = loss.getNumClasses() ? loss.getNumClasses() : width;
  head.getAMutable().assign(replicated(head.getA(), head));
  auto local = localType(logitsType, Split{last, 1});
  head.getResult().setType(local);
  explicitTypes[head] = local;

  // max → (all-reduce max) → shift; Σ exp(x − shift) and the target's logit
  // per shard → (all-reduce sums) → the loss. The shift only keeps exp in
  // range: the loss does not depend on it, so no gradient flows through it.
  Location loc = loss.getLoc();
  builder.setInsertionPoint(loss);
  Value logits = head.getResult();
  if (cap) {
    cap.getResult().setType(local);
    explicitTypes[cap] = local;
    logits = cap.getResult();
  }
  auto max = llm::ReduceMaxOp::create(builder, loc, logits, /*class_offset=*/0, vocab);
  addRankOffset(max, "class_offset", 0, builder.getStrArrayAttr({axis}), shard);
  Value shift = llm::StopGradientOp::create(builder, loc, allReduce(max, "max", loc));
  auto partial =
      llm::CrossEntropyPartialOp::create(builder, loc, logits, loss.getTargets(), shift,
                                         /*class_offset=*/0, vocab, loss.getIgnoreIndex());
  partial.setClassOffset(0);
  addRankOffset(partial, "class_offset", 0, builder.getStrArrayAttr({axis}), shard);
  Value sumexp = allReduce(partial.getSumexp(), "sum", loc);
  Value target = allReduce(partial.getTargetLogit(), "sum", loc);
  auto finish = llm::CrossEntropyFinishOp::create(builder, loc, sumexp, shift, target,
                                                  loss.getTargets(), loss.getIgnoreIndex());
  loss.getResult().replaceAllUsesWith(finish.getResult());
  loss.erase();
  return success();
}

LogicalResult TensorParallel::checkParamUses() {
  for (auto &[value, s] : split) {
    auto arg = dyn_cast<BlockArgument>(value);
    if (!arg || !llm::getParamAttr(func, arg.getArgNumber()))
      continue;
    for (Operation *user : arg.getUsers())
      if (!handled.contains(user))
        return user->emitOpError("tensor parallelism: parameter '")
               << llm::getParamAttr(func, arg.getArgNumber()).getName()
               << "' is split for its parallel layer but also used here";
  }
  return success();
}

} // namespace

LogicalResult applyTensorParallel(func::FuncOp forward, StringRef axis, int64_t tp,
                                  bool forwardOnly) {
  return TensorParallel(forward, axis, tp, forwardOnly).run();
}

} // namespace llmc
