//===- BucketGradients.cpp - fewer, larger gradient all-reduces -----------===//
//
// A collective costs a latency plus bytes over bandwidth; per-tensor
// gradient all-reduces of a model with hundreds of small tensors pay the
// latency hundreds of times. Buckets keep the overlap with backward (a
// bucket is reduced as soon as its last gradient exists) and pay it once per
// bucket. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"

#include "mlir/IR/Builders.h"

namespace llmc {
#define GEN_PASS_DEF_BUCKETGRADIENTS
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

int64_t bytesOf(RankedTensorType t) {
  return t.getNumElements() * std::max<int64_t>(1, t.getElementTypeBitWidth() / 8);
}

/// Two all-reduces can share a bucket when they run over the same group,
/// with the same reduction, on the same element type.
bool compatible(dist::AllReduceOp a, dist::AllReduceOp b) {
  return a.getAxes() == b.getAxes() && a.getReduction() == b.getReduction() &&
         a.getInput().getType().getElementType() == b.getInput().getType().getElementType();
}

struct BucketGradientsPass : llmc::impl::BucketGradientsBase<BucketGradientsPass> {
  using BucketGradientsBase::BucketGradientsBase;

  void runOnOperation() override {
    if (bucketBytes < 0) {
      getOperation().emitError() << "bucket-gradients: bucket-bytes must be >= 0, got "
                                 << static_cast<int64_t>(bucketBytes);
      return signalPassFailure();
    }
    if (bucketBytes == 0)
      return;
    for (ModuleOp module : programModules(getOperation()))
      if (func::FuncOp step = lookupFunc(module, "train_step"))
        bucket(step);
  }

  void bucket(func::FuncOp step) {
    Block &body = step.getBody().front();
    llvm::DenseMap<Operation *, int64_t> order;
    int64_t position = 0;
    for (Operation &op : body)
      order[&op] = position++;
    auto firstUse = [&](Operation *op) {
      int64_t first = INT64_MAX;
      for (Operation *user : op->getUsers())
        first = std::min(first, order.lookup(user));
      return first;
    };

    SmallVector<dist::AllReduceOp> syncs;
    for (Operation &op : body)
      if (auto reduce = dyn_cast<dist::AllReduceOp>(op); reduce && op.hasAttr(kGradientSyncAttr))
        syncs.push_back(reduce);

    // Greedy, in backward order: a bucket closes when it is full, when the
    // next gradient cannot share it, or when moving its reduction later
    // would pass a use of one of its members.
    SmallVector<dist::AllReduceOp> bucket;
    int64_t bytes = 0, deadline = INT64_MAX;
    auto flush = [&]() {
      if (bucket.size() > 1)
        fuse(bucket);
      bucket.clear();
      bytes = 0;
      deadline = INT64_MAX;
    };
    for (dist::AllReduceOp reduce : syncs) {
      if (!bucket.empty() &&
          (!compatible(bucket.front(), reduce) || order.lookup(reduce) >= deadline))
        flush();
      bucket.push_back(reduce);
      bytes += bytesOf(reduce.getInput().getType());
      deadline = std::min(deadline, firstUse(reduce));
      if (bytes >= bucketBytes)
        flush();
    }
    flush();
  }

  /// One all-reduce over the concatenation of `members`, at the last one.
  void fuse(ArrayRef<dist::AllReduceOp> members) {
    dist::AllReduceOp last = members.back();
    OpBuilder b(last);
    Location loc = last.getLoc();
    SmallVector<Value> flat;
    int64_t total = 0;
    for (dist::AllReduceOp m : members) {
      RankedTensorType t = m.getInput().getType();
      auto oneD = RankedTensorType::get({t.getNumElements()}, t.getElementType());
      flat.push_back(t == oneD ? m.getInput()
                               : llm::ReshapeOp::create(b, m.getLoc(), oneD, m.getInput()).getResult());
      total += t.getNumElements();
    }
    auto bucketType = RankedTensorType::get({total}, last.getInput().getType().getElementType());
    Value joined = llm::ConcatOp::create(b, loc, bucketType, flat, b.getI64IntegerAttr(0));
    auto reduced = dist::AllReduceOp::create(b, loc, bucketType, joined, last.getMeshAttr(),
                                             last.getAxes(), last.getReductionAttr());
    reduced->setAttr(kGradientSyncAttr, b.getUnitAttr());
    int64_t offset = 0;
    for (dist::AllReduceOp m : members) {
      RankedTensorType t = m.getInput().getType();
      auto oneD = RankedTensorType::get({t.getNumElements()}, t.getElementType());
      Value piece = llm::SliceOp::create(b, m.getLoc(), oneD, reduced, ArrayRef<int64_t>{offset});
      if (t != oneD)
        piece = llm::ReshapeOp::create(b, m.getLoc(), t, piece);
      offset += t.getNumElements();
      m.getResult().replaceAllUsesWith(piece);
      m.erase();
    }
  }
};

} // namespace
