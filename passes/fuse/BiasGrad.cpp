//===- BiasGrad.cpp - weight and bias gradients as one op -----------------===//
//
// llmc-fuse's `bias-grad`. The same layer's weight and bias gradients,
//   %db = reduce_sum %dy                                 ([N])
//   %dw = matmul (reshape %x), (reshape %dy) {transpose_a} ([K, N])
// become one linear_weight_grad placed where the sum was (x, which the
// forward made, is there already), whose CUDA kernel sums dy's rows in the
// GEMM's epilogue. On the CPU that sum is no cheaper inside the GEMM, so
// `all` includes bias-grad only for target=cuda.
//
// Runs in llmc-fuse (passes/Fuse.cpp) on the finished graph, after every
// pass that rewrites llm ops. It matches exactly the ops the model
// builders, autodiff and the sharding passes produce and leaves anything
// else alone: a value some other op still reads keeps the op that makes it.
//
//===----------------------------------------------------------------------===//

#include "passes/fuse/Fusions.h"
#include "passes/lib/FuseMatch.h"
#include "passes/lib/FusePlace.h"

#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

namespace {

/// `value`, or what it reshapes when that only flattens leading dims.
Value rowsOf(Value value) {
  auto reshape = value.getDefiningOp<ReshapeOp>();
  if (!reshape)
    return value;
  auto from = cast<RankedTensorType>(reshape.getX().getType());
  auto to = cast<RankedTensorType>(reshape.getType());
  return from.getRank() >= 2 && to.getRank() == 2 && from.getShape().back() == to.getShape().back()
             ? reshape.getX()
             : value;
}

/// Fuses the bias gradient `sum` with the weight-gradient product reading
/// the same dy, if the pattern matches; true when it did.
bool fuseBiasGradOf(ReduceSumOp sum, DominanceInfo &dominance) {
  Value dy = sum.getX();
  auto dyType = cast<RankedTensorType>(dy.getType());
  if (dyType.getRank() < 2 ||
      cast<RankedTensorType>(sum.getType()).getShape() != dyType.getShape().take_back())
    return false;
  MatmulOp wgrad;
  for (Operation *user : dy.getUsers()) {
    SmallVector<Operation *> readers = {user};
    if (auto reshape = dyn_cast<ReshapeOp>(user); reshape && rowsOf(reshape) == dy)
      readers.assign(reshape->user_begin(), reshape->user_end());
    for (Operation *reader : readers)
      if (auto m = dyn_cast<MatmulOp>(reader); m && m.getTransposeA() && !m.getTransposeB() &&
                                               rowsOf(m.getB()) == dy && samePlace(m, sum)) {
        wgrad = m;
        break;
      }
    if (wgrad)
      break;
  }
  if (!wgrad)
    return false;
  Value x = rowsOf(wgrad.getA());
  auto xType = cast<RankedTensorType>(x.getType());
  auto dwType = cast<RankedTensorType>(wgrad.getType());
  if (xType.getElementType() != dyType.getElementType() || dwType.getRank() != 2 ||
      !dominance.properlyDominates(x, sum))
    return false;

  OpBuilder builder(sum);
  auto fused = LinearWeightGradOp::create(
      builder, builder.getFusedLoc({wgrad.getLoc(), sum.getLoc()}), x, dy);
  if (fused.getDw().getType() != wgrad.getType()) {
    fused->erase();
    return false;
  }
  copyPlace(sum, fused);
  wgrad.getResult().replaceAllUsesWith(fused.getDw());
  sum.getResult().replaceAllUsesWith(fused.getDb());
  Operation *xRows = wgrad.getA().getDefiningOp(), *dyRows = wgrad.getB().getDefiningOp();
  wgrad->erase();
  sum->erase();
  if (xRows != dyRows)
    eraseIfDead(xRows);
  eraseIfDead(dyRows);
  return true;
}

} // namespace

unsigned llmc::fuseBiasGrad(ModuleOp module) {
  SmallVector<ReduceSumOp> sums;
  module.walk([&](ReduceSumOp op) { sums.push_back(op); });
  DominanceInfo dominance(module);
  unsigned fused = 0;
  for (ReduceSumOp sum : sums) fused += fuseBiasGradOf(sum, dominance);
  return fused;
}
