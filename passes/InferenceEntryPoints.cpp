//===- InferenceEntryPoints.cpp - @logits from @forward -------------------===//
//
// Generation and sampling need the model's logits, not its loss. Rather
// than asking model authors for a second function, derive it: the logits are
// whatever feeds the loss's cross_entropy, without a padded vocabulary's
// padding. Both @forward (evaluation) and @logits use fake-quantization
// observers frozen at their trained ranges.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "dialects/QAT/QATDialect.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/Inlining.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"

namespace llmc {
#define GEN_PASS_DEF_INFERENCEENTRYPOINTS
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// Erases side-effect-free ops whose results are unused, last to first.
void eraseDeadOps(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (!op.hasTrait<OpTrait::IsTerminator>() && op.use_empty() && isPure(&op))
      op.erase();
}

struct InferenceEntryPointsPass
    : llmc::impl::InferenceEntryPointsBase<InferenceEntryPointsPass> {
  /// @calibrate: @forward with its EMA observers live, returning the loss
  /// and every updated observer state (tied to the state it overwrites) —
  /// post-training calibration of activation ranges, no training.
  void addCalibrate(ModuleOp module, func::FuncOp forward) {
    bool observes = false;
    forward.walk([&](qat::EmaOp) { observes = true; });
    if (!observes || lookupFunc(module, "calibrate"))
      return;
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(forward);
    auto calibrate = cast<func::FuncOp>(b.clone(*forward));
    calibrate.setSymName("calibrate");
    flattenBlocks(calibrate);
    Block &body = calibrate.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    SmallVector<Value> results(ret.getOperands());
    SmallVector<unsigned> tiedTo;
    calibrate.walk([&](qat::EmaOp ema) {
      results.push_back(ema.getResult());
      tiedTo.push_back(cast<BlockArgument>(ema.getState()).getArgNumber());
    });
    b.setInsertionPoint(ret);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    calibrate.setFunctionType(b.getFunctionType(calibrate.getArgumentTypes(), types));
    calibrate.setResultAttr(0, kRoleAttr, b.getStringAttr("output"));
    calibrate.setResultAttr(0, kNameAttr, b.getStringAttr("loss"));
    for (auto [i, arg] : llvm::enumerate(tiedTo))
      calibrate.setResultAttr(1 + i, kTiedToAttr, b.getI64IntegerAttr(arg));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp forward = lookupFunc(module, "forward");
    if (!forward) {
      module.emitError("inference-entry-points: no @forward");
      return signalPassFailure();
    }
    addCalibrate(module, forward);
    // Evaluation and generation read the trained observer ranges without
    // moving them (momentum 1: the state, or the current range while the
    // state has never observed anything).
    forward.walk([&](qat::EmaOp ema) {
      ema.setMomentumAttr(FloatAttr::get(Float64Type::get(&getContext()), 1.0));
    });
    // Delayed fp8 scaling's histories likewise: quantize with the trained
    // range, record nothing.
    forward.walk([&](qat::AmaxHistoryOp update) {
      if (update->use_empty())
        update->erase();
    });
    if (lookupFunc(module, "logits"))
      return;
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(forward);
    auto logits = cast<func::FuncOp>(b.clone(*forward));
    logits.setSymName("logits");
    flattenBlocks(logits);

    // The loss: a cross_entropy, or the shard of one that tensor parallelism
    // built (whose logits are this rank's vocabulary columns).
    SmallVector<Operation *> losses;
    logits.walk([&](Operation *op) {
      if (isa<llm::CrossEntropyOp, llm::CrossEntropyPartialOp>(op))
        losses.push_back(op);
    });
    if (losses.size() != 1) {
      forward.emitError() << "inference-entry-points: expected exactly one "
                             "llm.cross_entropy in @forward, found "
                          << losses.size();
      logits.erase();
      return signalPassFailure();
    }
    Block &body = logits.getBody().front();
    Operation *ret = body.getTerminator();
    Value result = losses[0]->getOperand(0);
    b.setInsertionPoint(ret);
    if (auto terms = losses[0]->getAttrOfType<ArrayAttr>(dist::DistDialect::kRankOffsetsAttrName))
      for (auto term : terms.getAsRange<dist::RankOffsetAttr>()) {
        // Gather the vocabulary shards back into whole rows.
        auto local = cast<RankedTensorType>(result.getType());
        SmallVector<int64_t> shape(local.getShape());
        int64_t parts = 1;
        for (StringRef axis : term.getAxes().getAsValueRange<StringAttr>())
          parts *= module.lookupSymbol<dist::MeshOp>(term.getMesh().getValue()).axisSize(axis);
        shape.back() *= parts;
        result = dist::AllGatherOp::create(
            b, losses[0]->getLoc(), RankedTensorType::get(shape, local.getElementType()), result,
            term.getMesh(), term.getAxes(), b.getI64IntegerAttr(local.getRank() - 1));
      }
    // A padded vocabulary (llmc-pad-vocab, or tensor parallelism over a
    // vocabulary tp does not divide) has more columns than classes: cut the
    // padding off, so sampling never sees it.
    int64_t classes = 0;
    if (auto partial = dyn_cast<llm::CrossEntropyPartialOp>(losses[0]))
      classes = partial.getNumClasses();
    else
      classes = cast<llm::CrossEntropyOp>(losses[0]).getNumClasses();
    if (classes > 0) {
      auto gathered = cast<RankedTensorType>(result.getType());
      if (gathered.getShape().back() > classes) {
        SmallVector<int64_t> shape(gathered.getShape());
        shape.back() = classes;
        result = llm::SliceOp::create(b, losses[0]->getLoc(),
                                      RankedTensorType::get(shape, gathered.getElementType()),
                                      result, SmallVector<int64_t>(shape.size(), 0));
      }
    }
    func::ReturnOp::create(b, ret->getLoc(), result);
    ret->erase();
    eraseDeadOps(body);

    // Drop arguments nothing reads any more (the targets).
    llvm::BitVector unused(logits.getNumArguments());
    for (BlockArgument arg : logits.getArguments())
      if (arg.use_empty() && !llm::getParamAttr(logits, arg.getArgNumber()))
        unused.set(arg.getArgNumber());
    if (failed(logits.eraseArguments(unused)))
      return signalPassFailure();
    logits.setFunctionType(
        b.getFunctionType(logits.getArgumentTypes(), {result.getType()}));
    logits.setResultAttr(0, kRoleAttr, b.getStringAttr("output"));
    logits.setResultAttr(0, kNameAttr, b.getStringAttr("logits"));
  }
};

} // namespace
