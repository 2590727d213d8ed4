//===- Autodiff.cpp - reverse-mode differentiation of @forward ------------===//
//
// Clones @forward into @grad, flattens its blocks, and appends the backward
// pass: gradients flow from the loss (seeded with 1) through the ops in
// reverse order, one VJP rule per op (VJPRules.cpp), summed where a value has
// several uses. Activity analysis keeps the backward to what reaches a
// trainable parameter: frozen parameters and the batch get no gradient.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "dialects/QAT/QATDialect.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/Inlining.h"
#include "passes/lib/VJPRules.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace llmc {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// What reaches the loss from a trainable parameter: the parameters, the
/// values they vary, and the forward's ops in order.
struct Activity {
  SmallVector<BlockArgument> params;
  llvm::DenseSet<Value> varied;
  SmallVector<Operation *> forwardOps;
};

Activity activityOf(func::FuncOp func) {
  Activity a;
  for (BlockArgument arg : func.getArguments()) {
    llm::ParamAttr param = llm::getParamAttr(func, arg.getArgNumber());
    if (param && param.getTrainable()) {
      a.params.push_back(arg);
      a.varied.insert(arg);
    }
  }
  for (Operation &op : func.getBody().front().without_terminator()) {
    a.forwardOps.push_back(&op);
    // stop_gradient's result is a constant as far as the loss is concerned.
    if (isa<llm::StopGradientOp>(op))
      continue;
    if (llvm::any_of(op.getOperands(), [&](Value v) { return a.varied.contains(v); }))
      a.varied.insert(op.getResults().begin(), op.getResults().end());
  }
  return a;
}

/// Adds `operandGrad` to `slot` (a value's gradient so far). Summing a
/// value's gradient contributions is backward work of the layer that used
/// it.
void accumulate(OpBuilder &builder, Operation *user, Attribute blockName, Value &slot,
                Value operandGrad) {
  if (!slot) {
    slot = operandGrad;
    return;
  }
  auto sum = llm::AddOp::create(builder, user->getLoc(), slot, operandGrad);
  sum->setAttr(kBackwardAttr, builder.getUnitAttr());
  if (blockName)
    sum->setAttr(kBlockNameAttr, blockName);
  slot = sum;
}

/// Emits the backward before `ret`: from the loss (seeded with 1) through
/// the forward's ops in reverse, one VJP rule per op whose results have a
/// gradient and whose operands need one; `grads` maps each value to its
/// gradient.
LogicalResult backpropagate(OpBuilder &builder, func::ReturnOp ret, Value loss,
                            const Activity &activity, llvm::DenseMap<Value, Value> &grads) {
  grads[loss] = llm::FillOp::create(builder, loss.getLoc(), loss.getType(), APFloat(1.0));
  grads[loss].getDefiningOp()->setAttr(kBackwardAttr, builder.getUnitAttr());
  grads[loss].getDefiningOp()->setAttr(kLossSeedAttr, builder.getUnitAttr());
  for (Operation *op : llvm::reverse(activity.forwardOps)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(grads.lookup(result));
      any |= static_cast<bool>(resultGrads.back());
    }
    SmallVector<bool> needsGrad;
    for (Value operand : op->getOperands()) needsGrad.push_back(activity.varied.contains(operand));
    if (!any || llvm::none_of(needsGrad, [](bool b) { return b; }))
      continue;

    Operation *last = ret->getPrevNode();
    FailureOr<SmallVector<Value>> operandGrads = emitVJP(builder, op, resultGrads, needsGrad);
    if (failed(operandGrads))
      return failure();
    // Backward ops belong to the same layer as the op they differentiate.
    auto blockName = op->getAttr(kBlockNameAttr);
    for (Operation *it = last->getNextNode(); it != ret; it = it->getNextNode()) {
      if (blockName)
        it->setAttr(kBlockNameAttr, blockName);
      it->setAttr(kBackwardAttr, builder.getUnitAttr());
    }
    for (auto [operand, operandGrad, need] : llvm::zip(op->getOperands(), *operandGrads, needsGrad))
      if (need && operandGrad)
        accumulate(builder, op, blockName, grads[operand], operandGrad);
  }
  return success();
}

/// A delayed qat.quantize_grad is the identity forward, and only its
/// backward (emitted by its VJP) reads dY's history: dropped, no
/// microbatch's forward waits for the previous microbatch's backward
/// update of it.
void dropDelayedQuantizeGrads(func::FuncOp func) {
  func.walk([](qat::QuantizeGradOp q) {
    if (q.getState()) {
      q.getResult().replaceAllUsesWith(q.getX());
      q.erase();
    }
  });
}

/// Observer states (llmc.role = "qat_state") come back updated, each tied
/// to the argument it replaces: by its one qat.ema, or by its one
/// qat.amax_history (forward or backward), which qat.delayed_range may
/// read beside. `states`: (updated value, argument number) of each.
LogicalResult observerStateUpdates(func::FuncOp func,
                                   SmallVector<std::pair<Value, unsigned>> &states) {
  for (BlockArgument arg : func.getArguments()) {
    auto role = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kRoleAttr);
    if (!role || role.getValue() != kQatStateRole)
      continue;
    SmallVector<Operation *> updates, others;
    for (Operation *user : arg.getUsers())
      (isa<qat::EmaOp, qat::AmaxHistoryOp>(user) && user->getOperand(0) == arg ? updates : others)
          .push_back(user);
    bool readersOk = llvm::all_of(others, [&](Operation *user) {
      return isa<qat::DelayedRangeOp>(user) && !updates.empty() &&
             isa<qat::AmaxHistoryOp>(updates[0]);
    });
    if (updates.size() != 1 || !readersOk)
      return emitError(arg.getLoc())
             << "autodiff: observer state argument " << arg.getArgNumber()
             << " must be updated by exactly one qat.ema or qat.amax_history (and read "
                "otherwise only by qat.delayed_range)";
    states.push_back({updates[0]->getResult(0), arg.getArgNumber()});
  }
  return success();
}

struct AutodiffPass : llmc::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp forward = lookupFunc(module, forwardName);
    if (!forward) {
      module.emitError() << "autodiff: no function @" << forwardName << " to differentiate";
      return signalPassFailure();
    }
    if (lookupFunc(module, gradName)) {
      module.emitError() << "autodiff: @" << gradName << " already exists";
      return signalPassFailure();
    }
    auto resultTypes = forward.getFunctionType().getResults();
    auto scalar = resultTypes.size() == 1 ? dyn_cast<RankedTensorType>(resultTypes[0])
                                          : RankedTensorType();
    if (!scalar || scalar.getRank() != 0 || !scalar.getElementType().isF32()) {
      forward.emitError() << "autodiff: @" << forwardName
                          << " must return exactly one tensor<f32> loss";
      return signalPassFailure();
    }

    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(forward);
    auto grad = cast<func::FuncOp>(builder.clone(*forward));
    grad.setSymName(gradName);
    flattenBlocks(grad);
    if (failed(inlineCalls(module, grad)) || failed(differentiate(grad)))
      return signalPassFailure();
  }

  LogicalResult differentiate(func::FuncOp func) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(0);
    Activity activity = activityOf(func);
    OpBuilder builder(ret);
    llvm::DenseMap<Value, Value> grads;
    if (failed(backpropagate(builder, ret, loss, activity, grads)))
      return failure();

    SmallVector<Value> results{loss};
    for (BlockArgument param : activity.params) {
      Value g = grads.lookup(param);
      if (!g)
        g = llm::FillOp::create(builder, param.getLoc(), param.getType(), APFloat(0.0));
      results.push_back(g);
    }
    dropDelayedQuantizeGrads(func);
    SmallVector<std::pair<Value, unsigned>> states;
    if (failed(observerStateUpdates(func, states)))
      return failure();
    for (auto &[update, arg] : states) results.push_back(update);
    func::ReturnOp::create(builder, ret.getLoc(), results);
    ret.erase();

    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    func.setFunctionType(builder.getFunctionType(func.getArgumentTypes(), types));
    for (auto [i, param] : llvm::enumerate(activity.params))
      func.setResultAttr(i + 1, kGradOfAttr,
                         builder.getStringAttr(
                             llm::getParamAttr(func, param.getArgNumber()).getName()));
    for (auto [i, state] : llvm::enumerate(states))
      func.setResultAttr(1 + activity.params.size() + i, kTiedToAttr,
                         builder.getI64IntegerAttr(state.second));
    return success();
  }
};

} // namespace
