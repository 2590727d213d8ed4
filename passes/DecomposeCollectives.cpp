//===- DecomposeCollectives.cpp - collectives along dimension 0 only ------===//
//
// The runtime's gathers concatenate whole per-rank buffers and its scatters
// hand out consecutive chunks, so every collective that cuts a dimension
// d > 0 is rewritten here to cut dimension 0 of a view whose outermost
// dimension is the ranks' chunk index, with one transpose to move that
// index where the tensor has it. See Passes.td for the shapes.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace llmc {
#define GEN_PASS_DEF_DECOMPOSECOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

RankedTensorType shaped(ArrayRef<int64_t> shape, RankedTensorType like) {
  return RankedTensorType::get(shape, like.getElementType());
}

Value reshape(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto type = shaped(shape, cast<RankedTensorType>(v.getType()));
  if (type == v.getType())
    return v;
  return llm::ReshapeOp::create(b, loc, type, v);
}

/// Moves dimension `from` of `v` to position `to`.
Value moveDim(OpBuilder &b, Location loc, Value v, int64_t from, int64_t to) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (i != from)
      perm.push_back(i);
  perm.insert(perm.begin() + to, from);
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  return llm::TransposeOp::create(b, loc, shaped(shape, type), v, perm);
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// all_gather along `dim`: gather [1, local...] along 0, then put the rank
/// index just before `dim` and merge the two.
void decomposeGather(dist::AllGatherOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto local = cast<RankedTensorType>(op.getInput().getType());
  auto global = cast<RankedTensorType>(op.getType());
  int64_t dim = op.getDim(), parts = global.getDimSize(dim) / local.getDimSize(dim);
  ArrayRef<int64_t> l = local.getShape();
  Value result;
  if (product(l.take_front(dim)) == 1) {
    // Chunks are already contiguous in the global layout.
    Value flat = reshape(b, loc, op.getInput(), l.drop_front(dim));
    SmallVector<int64_t> gathered(l.drop_front(dim));
    gathered[0] *= parts;
    Value g = dist::AllGatherOp::create(b, loc, shaped(gathered, local), flat, op.getMeshAttr(),
                                        op.getAxes(), b.getI64IntegerAttr(0));
    result = reshape(b, loc, g, global.getShape());
  } else {
    SmallVector<int64_t> one{1};
    one.append(l.begin(), l.end());
    SmallVector<int64_t> gathered(one);
    gathered[0] = parts;
    Value g = dist::AllGatherOp::create(b, loc, shaped(gathered, local),
                                        reshape(b, loc, op.getInput(), one), op.getMeshAttr(),
                                        op.getAxes(), b.getI64IntegerAttr(0));
    result = reshape(b, loc, moveDim(b, loc, g, 0, dim), global.getShape());
  }
  op.replaceAllUsesWith(result);
  op.erase();
}

/// reduce_scatter / all_slice along `dim`: split `dim` into (ranks, chunk),
/// move the rank index outermost, cut along 0, drop the unit dimension.
template <typename OpT> void decomposeScatter(OpT op, function_ref<Value(OpBuilder &, Value, RankedTensorType)> cut) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto global = cast<RankedTensorType>(op.getInput().getType());
  auto local = cast<RankedTensorType>(op.getType());
  int64_t dim = op.getDim(), parts = global.getDimSize(dim) / local.getDimSize(dim);
  ArrayRef<int64_t> g = global.getShape();
  Value result;
  if (product(g.take_front(dim)) == 1) {
    Value flat = reshape(b, loc, op.getInput(), g.drop_front(dim));
    SmallVector<int64_t> chunk(g.drop_front(dim));
    chunk[0] /= parts;
    result = reshape(b, loc, cut(b, flat, shaped(chunk, local)), local.getShape());
  } else {
    SmallVector<int64_t> split(g.take_front(dim));
    split.push_back(parts);
    split.push_back(g[dim] / parts);
    split.append(g.begin() + dim + 1, g.end());
    Value outer = moveDim(b, loc, reshape(b, loc, op.getInput(), split), dim, 0);
    SmallVector<int64_t> chunk(cast<RankedTensorType>(outer.getType()).getShape());
    chunk[0] = 1;
    result = reshape(b, loc, cut(b, outer, shaped(chunk, local)), local.getShape());
  }
  op.replaceAllUsesWith(result);
  op.erase();
}

struct DecomposeCollectivesPass
    : llmc::impl::DecomposeCollectivesBase<DecomposeCollectivesPass> {
  void runOnOperation() override {
    SmallVector<Operation *> todo;
    getOperation().walk([&](Operation *op) {
      if (auto g = dyn_cast<dist::AllGatherOp>(op); g && g.getDim() != 0)
        todo.push_back(op);
      if (auto r = dyn_cast<dist::ReduceScatterOp>(op); r && r.getDim() != 0)
        todo.push_back(op);
      if (auto s = dyn_cast<dist::AllSliceOp>(op); s && s.getDim() != 0)
        todo.push_back(op);
    });
    for (Operation *op : todo) {
      // The replacement ops inherit the collective's annotations (layer,
      // microbatch, forward/backward, pipeline action): the memory plan,
      // trace and schedule read them.
      Operation *before = op->getPrevNode();
      Block *block = op->getBlock();
      DictionaryAttr annotations = op->getDiscardableAttrDictionary();
      Operation *after = op->getNextNode();
      if (auto g = dyn_cast<dist::AllGatherOp>(op)) {
        decomposeGather(g);
      } else if (auto r = dyn_cast<dist::ReduceScatterOp>(op)) {
        decomposeScatter(r, [&](OpBuilder &b, Value v, RankedTensorType t) -> Value {
          return dist::ReduceScatterOp::create(b, r.getLoc(), t, v, r.getMeshAttr(), r.getAxes(),
                                               b.getI64IntegerAttr(0), r.getReductionAttr());
        });
      } else {
        auto s = cast<dist::AllSliceOp>(op);
        decomposeScatter(s, [&](OpBuilder &b, Value v, RankedTensorType t) -> Value {
          return dist::AllSliceOp::create(b, s.getLoc(), t, v, s.getMeshAttr(), s.getAxes(),
                                          b.getI64IntegerAttr(0));
        });
      }
      auto it = before ? std::next(before->getIterator()) : block->begin();
      for (; it != (after ? after->getIterator() : block->end()); ++it)
        for (NamedAttribute annotation : annotations)
          it->setDiscardableAttr(annotation.getName(), annotation.getValue());
    }
  }
};

} // namespace
