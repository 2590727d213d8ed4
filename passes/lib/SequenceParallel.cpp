//===- SequenceParallel.cpp - Megatron sequence parallelism on @forward ---===//
//
// After tensor parallelism, every rank of a tp group holds the whole
// residual stream and repeats the work done on it: layernorms, bias adds,
// dropout, residual adds. Sequence parallelism (Korthikanti et al.) splits
// that work, and its activations, along the sequence (dimension 1 of
// [B, T, ...]) over the same tp ranks:
//
//  - a row-parallel all_reduce (Megatron's g) becomes a reduce_scatter along
//    the sequence: each rank receives the completed sums of its positions;
//  - ops that treat each position on its own (norms, elementwise ops,
//    dropout) run on the local positions; their other operands are sliced
//    to the same positions when they have a sequence dimension, and
//    otherwise (weights, biases) enter through dist.replicate, whose VJP
//    sums the ranks' partial gradients;
//  - the tensor-parallel f operator (dist.replicate before a column-parallel
//    matmul) becomes an all_gather along the sequence, whose VJP is the
//    reduce_scatter of the partial input gradients;
//  - any other consumer of a split value (attention, a replicated matmul,
//    the loss) reads an all_gather marked replicated_grad: everything after
//    it is repeated identically on every rank.
//
// So each layer still moves the bytes of 2 all-reduces of b·s·h forward and
// 2 backward, as 2 all-gathers + 2 reduce-scatters each way, and keeps 1/tp
// of the residual-stream activations. Dropout masks stay those of one rank
// (global element indices through rank offsets).
//
//===----------------------------------------------------------------------===//

#include "passes/lib/TensorParallel.h"

#include "passes/lib/ShardAttr.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace llmc {
namespace {

class SequenceParallel {
public:
  SequenceParallel(func::FuncOp func, StringRef axis, int64_t tp)
      : func(func), builder(func.getContext()), axis(axis.str()), tp(tp) {}

  LogicalResult run();

private:
  LogicalResult visit(Block &block);
  LogicalResult visitOp(Operation *op);
  /// Splits captured sequence values at the entry of an llm.block whose
  /// uses of them are all position-wise, so the block starts split.
  void sliceBlockInputs(llm::BlockOp block);

  bool isSequence(Value v) const;
  /// The sequence dimension of `operand` when broadcast against a result of
  /// rank `rank` (-1 when it has none).
  int64_t sequenceDim(Value operand, int64_t rank) const;
  static bool isPositionwise(Operation *op);

  Value slice(Value v, int64_t dim);
  Value gatherReplicated(Value v);
  /// `v` entering split computation; for a cast weight the replicate goes
  /// before the cast so its gradient is summed in the master precision.
  void replicateOperand(OpOperand &operand);
  LogicalResult retype(Operation *op);

  RankedTensorType withSequence(RankedTensorType t, int64_t dim, int64_t size) const {
    SmallVector<int64_t> shape(t.getShape());
    shape[dim] = size;
    return RankedTensorType::get(shape, t.getElementType());
  }
  FlatSymbolRefAttr mesh() { return FlatSymbolRefAttr::get(builder.getContext(), "mesh"); }
  ArrayAttr axes() { return builder.getStrArrayAttr({axis}); }
  void setInsertionAfter(Value v) {
    if (Operation *def = v.getDefiningOp())
      builder.setInsertionPointAfter(def);
    else
      builder.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
  }

  func::FuncOp func;
  OpBuilder builder;
  std::string axis;
  int64_t tp;
  int64_t seqLen = 0;
  llvm::DenseSet<Value> split;
  llvm::DenseMap<std::pair<Value, int64_t>, Value> slices;
  llvm::DenseMap<Value, Value> gathers, replicas;
  llvm::DenseSet<Operation *> created;
};

bool SequenceParallel::isSequence(Value v) const {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() >= 3 && t.getDimSize(1) == seqLen && isa<FloatType>(t.getElementType());
}

int64_t SequenceParallel::sequenceDim(Value operand, int64_t rank) const {
  auto t = cast<RankedTensorType>(operand.getType());
  int64_t dim = 1 - (rank - t.getRank());
  return dim >= 0 && t.getDimSize(dim) == seqLen ? dim : -1;
}

bool SequenceParallel::isPositionwise(Operation *op) {
  return op->hasTrait<llmc::trait::Positionwise>();
}

Value SequenceParallel::slice(Value v, int64_t dim) {
  Value &s = slices[{v, dim}];
  if (s)
    return s;
  OpBuilder::InsertionGuard guard(builder);
  setInsertionAfter(v);
  auto t = cast<RankedTensorType>(v.getType());
  auto op =
      dist::AllSliceOp::create(builder, v.getLoc(), withSequence(t, dim, t.getDimSize(dim) / tp), v,
                               mesh(), axes(), builder.getI64IntegerAttr(dim));
  created.insert(op);
  s = op;
  return s;
}

Value SequenceParallel::gatherReplicated(Value v) {
  Value &g = gathers[v];
  if (g)
    return g;
  OpBuilder::InsertionGuard guard(builder);
  setInsertionAfter(v);
  auto t = cast<RankedTensorType>(v.getType());
  auto op = dist::AllGatherOp::create(builder, v.getLoc(), withSequence(t, 1, seqLen), v, mesh(),
                                      axes(), builder.getI64IntegerAttr(1));
  op.setReplicatedGrad(true);
  created.insert(op);
  g = op;
  return g;
}

void SequenceParallel::replicateOperand(OpOperand &operand) {
  Value v = operand.get();
  OpOperand *target = &operand;
  if (auto cast = v.getDefiningOp<llm::CastOp>(); cast && cast->hasOneUse()) {
    target = &cast->getOpOperand(0);
    v = cast.getX();
  }
  if (v.getDefiningOp<dist::ReplicateOp>())
    return;
  Value &r = replicas[v];
  if (!r) {
    OpBuilder::InsertionGuard guard(builder);
    setInsertionAfter(v);
    auto op = dist::ReplicateOp::create(builder, v.getLoc(), v.getType(), v, mesh(), axes());
    created.insert(op);
    r = op;
  }
  target->set(r);
}

LogicalResult SequenceParallel::retype(Operation *op) {
  if (auto cast = dyn_cast<llm::CastOp>(op)) {
    cast.getResult().setType(
        RankedTensorType::get(cast.getX().getType().getShape(), cast.getType().getElementType()));
    return success();
  }
  auto infer = dyn_cast<InferTypeOpInterface>(op);
  if (!infer)
    return op->emitOpError("sequence parallelism: cannot infer the local shape");
  SmallVector<Type> types;
  if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                    op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                    op->getRegions(), types)))
    return op->emitOpError("sequence parallelism: cannot infer the local shape");
  for (auto [r, t] : llvm::zip(op->getResults(), types)) r.setType(t);
  return success();
}

void SequenceParallel::sliceBlockInputs(llm::BlockOp block) {
  llvm::MapVector<Value, SmallVector<OpOperand *>> captured;
  block.walk([&](Operation *op) {
    for (OpOperand &use : op->getOpOperands()) {
      Value v = use.get();
      if (!split.contains(v) && isSequence(v) &&
          !block->isAncestor(v.getParentBlock()->getParentOp()))
        captured[v].push_back(&use);
    }
  });
  for (auto &[v, uses] : captured) {
    bool positionwise = llvm::all_of(uses, [&](OpOperand *use) {
      Operation *user = use->getOwner();
      return isPositionwise(user) || isa<dist::ReplicateOp>(user);
    });
    if (!positionwise)
      continue;
    Value s = slice(v, 1);
    split.insert(s);
    for (OpOperand *use : uses) use->set(s);
  }
}

LogicalResult SequenceParallel::visit(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block))
    if (!created.contains(&op) && failed(visitOp(&op)))
      return failure();
  return success();
}

LogicalResult SequenceParallel::visitOp(Operation *op) {
  if (auto block = dyn_cast<llm::BlockOp>(op)) {
    sliceBlockInputs(block);
    if (failed(visit(block.getBody().front())))
      return failure();
    auto yield = cast<llm::YieldOp>(block.getBody().front().getTerminator());
    for (auto [r, v] : llvm::zip(block.getResults(), yield.getValues())) {
      r.setType(v.getType());
      if (split.contains(v))
        split.insert(r);
    }
    return success();
  }
  if (isa<llm::YieldOp>(op))
    return success();
  bool anySplit = llvm::any_of(op->getOperands(), [&](Value v) { return split.contains(v); });

  // g: the row-parallel sum becomes a reduce-scatter along the sequence.
  if (auto reduce = dyn_cast<dist::AllReduceOp>(op)) {
    if (!anySplit && reduce.getReduction() == "sum" && reduce.getAxes() == axes() &&
        isSequence(reduce.getInput())) {
      builder.setInsertionPoint(op);
      auto t = cast<RankedTensorType>(reduce.getType());
      auto scatter =
          dist::ReduceScatterOp::create(builder, op->getLoc(), withSequence(t, 1, seqLen / tp),
                                        reduce.getInput(), reduce.getMeshAttr(), reduce.getAxes(),
                                        builder.getI64IntegerAttr(1), builder.getStringAttr("sum"));
      scatter->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      created.insert(scatter);
      reduce.getResult().replaceAllUsesWith(scatter.getResult());
      split.insert(scatter);
      op->erase();
      return success();
    }
  }
  if (!anySplit)
    return success();

  // f: the column-parallel input is gathered along the sequence.
  if (auto replicate = dyn_cast<dist::ReplicateOp>(op)) {
    if (replicate.getAxes() == axes()) {
      builder.setInsertionPoint(op);
      auto t = cast<RankedTensorType>(replicate.getInput().getType());
      auto gather = dist::AllGatherOp::create(builder, op->getLoc(), withSequence(t, 1, seqLen),
                                              replicate.getInput(), replicate.getMeshAttr(),
                                              replicate.getAxes(), builder.getI64IntegerAttr(1));
      gather->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      created.insert(gather);
      replicate.getResult().replaceAllUsesWith(gather.getResult());
      op->erase();
      return success();
    }
  }

  if (isPositionwise(op)) {
    int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
    auto before = cast<RankedTensorType>(op->getResult(0).getType());
    for (OpOperand &operand : op->getOpOperands()) {
      if (split.contains(operand.get()))
        continue;
      int64_t dim = sequenceDim(operand.get(), rank);
      if (dim >= 0)
        operand.set(slice(operand.get(), dim));
      else
        replicateOperand(operand);
    }
    if (isa<llm::DropoutOp>(op))
      markDropoutPiece(op, before, 1, axes(), tp);
    if (failed(retype(op)))
      return failure();
    for (Value r : op->getResults()) split.insert(r);
    return success();
  }

  // Anything else reads the whole sequence, identically on every rank.
  for (OpOperand &operand : op->getOpOperands())
    if (split.contains(operand.get()))
      operand.set(gatherReplicated(operand.get()));
  return success();
}

LogicalResult SequenceParallel::run() {
  for (BlockArgument arg : func.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!llm::getParamAttr(func, arg.getArgNumber()) && t && t.getRank() == 2 &&
        isa<IntegerType>(t.getElementType())) {
      seqLen = t.getDimSize(1);
      break;
    }
  }
  if (seqLen == 0)
    return func.emitError("sequence parallelism: @forward has no [batch, sequence] token input");
  if (seqLen % tp != 0)
    return func.emitError("sequence parallelism: sequence length ")
           << seqLen << " does not split over " << tp << " tensor-parallel ranks";
  if (failed(visit(func.getBody().front())))
    return failure();
  func.setFunctionType(FunctionType::get(
      func.getContext(), func.getBody().front().getArgumentTypes(), func.getResultTypes()));
  return success();
}

} // namespace

LogicalResult applySequenceParallel(func::FuncOp forward, StringRef axis, int64_t tp) {
  return SequenceParallel(forward, axis, tp).run();
}

} // namespace llmc
