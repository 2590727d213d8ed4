//===- Fuse.cpp - op groups into fused kernels ----------------------------===//
//
// Runs on the finished training graph, after every pass that rewrites llm
// ops, so a fused op never meets a pass that does not know it. Each fusion
// matches exactly the ops the model builders, autodiff and the sharding
// passes produce and leaves anything else alone: a value some other op
// still reads keeps the op that makes it.
//
// linear-cross-entropy. The head and its loss,
//   %logits = matmul %h, %w          (w [V, D] with transpose_b, or [D, V])
//   %loss   = cross_entropy %logits, %t
// and, in training,
//   %g  = cross_entropy_grad %logits, %t, %seed
//   %dh = matmul %g, %w              (the transposes the autodiff rule picks)
//   %dw = matmul (reshape %g)ᵀ, (reshape %h)    or (reshape %h)ᵀ, (reshape %g)
// become one linear_cross_entropy(_train) placed where the loss was. The
// loss seed is a fill the autodiff pass emits after the loss; it depends
// on nothing computed after it, so it moves up to the fused op.
//
// bias, bias-gelu. A matmul with a shared weight and its bias,
//   %m = matmul %x, %w               (w [K, N], or [N, K] with transpose_b)
//   %a = add %m, %b                  (b [N])
//   %g = gelu %a                     (bias-gelu)
// become one linear placed where the add was, when the product feeds only
// the add. In training gelu_grad still reads %a: the fused op then also
// returns it (keep_pre), as cuBLASLt's GELU_AUX epilogue does, so the
// fusion holds in the backward's presence. The ops must belong to the same
// part of the step (microbatch, pipeline action, forward, backward or
// recomputation): under selective recomputation the kept product feeds
// the forward's add and the replayed one, so neither fuses.
//
// bias-grad. The same layer's weight and bias gradients,
//   %db = reduce_sum %dy                                 ([N])
//   %dw = matmul (reshape %x), (reshape %dy) {transpose_a} ([K, N])
// become one linear_weight_grad placed where the sum was (x, which the
// forward made, is there already), whose CUDA kernel sums dy's rows in the
// GEMM's epilogue. On the CPU that sum is no cheaper inside the GEMM, so
// `all` includes bias-grad only for target=cuda.
//
// residual. The residual stream's add of a layer's output projection, in
// the forward (or a replay of it),
//   %p = linear %x, %w, %b           (GPT-2: what bias left)  or  matmul %x, %w
//   %s = add %p, %r                  (either order; r of p's type: no broadcast)
// becomes one linear %x, %w(, %b) residual %r placed where the add was, so
// the GEMM's epilogue adds the stream and no add kernel reads the product
// back. It runs before add-norm, which then finds these adds gone and fuses
// what is left. The product must feed only the add and belong to the same
// part of the step. Not fused: an addend computed from the product's own
// input, a branch of the same layer (LoRA's scaled adapter, which the
// elementwise fusion chains with its bias and GELU in one kernel), and the
// backward's sums of gradient products (Llama's dx over q, k and v), where
// the fused op at the add would keep the product's operands alive across
// the other products' work.
//
// add-norm. The residual add and the norm reading its sum, and in the
// backward the norm's dx and the add accumulating the stream's gradient:
// passes/FuseAddNorm.cpp.
//
// qkv-split. Attention reading q, k and v as strided views of a packed qkv
// projection instead of slice copies, and its backward writing one dqkv
// instead of three pads and their sum. rope: attention rotating q and k
// as it loads them, and its backward rotating dq and dk back as it stores
// them: passes/FuseAttention.cpp.
//
// elementwise. Runs last and takes the elementwise chains the others left
// (passes/FuseElementwise.cpp): each becomes one llm.fused_elementwise.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "dialects/Annotations/Annotations.h"
#include "passes/FuseAddNorm.h"
#include "passes/FuseAttention.h"
#include "passes/FuseElementwise.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <set>
#include <string>

namespace llmc {
#define GEN_PASS_DEF_FUSE
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

namespace {

constexpr const char *kLinearCrossEntropy = "linear-cross-entropy";
constexpr const char *kBias = "bias";
constexpr const char *kBiasGelu = "bias-gelu";
constexpr const char *kBiasGrad = "bias-grad";
constexpr const char *kElementwise = "elementwise";
constexpr const char *kResidual = "residual";
const std::set<std::string> kFusions = {kFuseAddNorm,        kBias,         kBiasGelu,
                                        kBiasGrad,           kElementwise,  kFuseQkvSplit,
                                        kLinearCrossEntropy, kFuseRope,     kResidual};

/// Makes `value` available before `point`: true when it already is, or when
/// its pure defining op (and, recursively, what it needs) can move there.
bool makeAvailableBefore(Value value, Operation *point) {
  Block *block = value.getParentBlock();
  Operation *ancestor = block->findAncestorOpInBlock(*point);
  if (!ancestor)
    return false;
  Operation *def = value.getDefiningOp();
  if (!def || def->isBeforeInBlock(ancestor))
    return true;
  if (def->getBlock() != point->getBlock() || !isPure(def) || def->getNumRegions() != 0)
    return false;
  for (Value operand : def->getOperands())
    if (!makeAvailableBefore(operand, point))
      return false;
  def->moveBefore(point);
  // It now runs in the part of the step (pipeline action) of `point`.
  if (Attribute action = point->getAttr("llmc.action"))
    def->setAttr("llmc.action", action);
  return true;
}

/// `value` is `reshape %of` (a reshape that only flattens rows).
bool isReshapeOf(Value value, Value of) {
  auto reshape = value.getDefiningOp<ReshapeOp>();
  return reshape && reshape.getX() == of;
}

/// The training half of the pattern: the loss gradient and the two products
/// that consume it.
struct HeadBackward {
  CrossEntropyGradOp grad;
  MatmulOp dgrad, wgrad;
  ReshapeOp gradRows; ///< reshape of the gradient feeding wgrad
};

/// Finds the backward of `head` + `loss` among the users of the logits;
/// fails when anything else reads the logits or the gradient.
FailureOr<HeadBackward> matchBackward(MatmulOp head, CrossEntropyOp loss) {
  HeadBackward b{};
  Value logits = head.getResult(), h = head.getA(), w = head.getB();
  for (Operation *user : logits.getUsers()) {
    if (user == loss.getOperation())
      continue;
    auto grad = dyn_cast<CrossEntropyGradOp>(user);
    if (!grad || b.grad || grad.getLogits() != logits || grad.getTargets() != loss.getTargets() ||
        grad.getIgnoreIndex() != loss.getIgnoreIndex())
      return failure();
    b.grad = grad;
  }
  if (!b.grad)
    return b; // forward only (evaluation)
  bool transposeB = head.getTransposeB();
  for (Operation *user : b.grad.getResult().getUsers()) {
    auto matmul = dyn_cast<MatmulOp>(user);
    if (matmul && !b.dgrad && matmul.getA() == b.grad.getResult() && matmul.getB() == w &&
        !matmul.getTransposeA() && matmul.getTransposeB() == !transposeB) {
      b.dgrad = matmul;
      continue;
    }
    auto reshape = dyn_cast<ReshapeOp>(user);
    if (!reshape || b.gradRows || !reshape.getResult().hasOneUse())
      return failure();
    auto wgrad = dyn_cast<MatmulOp>(*reshape.getResult().getUsers().begin());
    if (!wgrad || !wgrad.getTransposeA() || wgrad.getTransposeB())
      return failure();
    Value gradRows = reshape.getResult();
    bool matches = transposeB ? wgrad.getA() == gradRows && isReshapeOf(wgrad.getB(), h)
                              : wgrad.getB() == gradRows && isReshapeOf(wgrad.getA(), h);
    if (!matches)
      return failure();
    b.gradRows = reshape;
    b.wgrad = wgrad;
  }
  if (!b.dgrad || !b.wgrad || b.dgrad.getType() != h.getType() ||
      b.wgrad.getType() != w.getType())
    return failure();
  return b;
}

/// Erases `op` when nothing reads it any more.
void eraseIfDead(Operation *op) {
  if (op && op->use_empty())
    op->erase();
}

/// Fuses the head feeding `loss`, if the pattern matches; true when it did.
bool fuseLinearCrossEntropy(CrossEntropyOp loss, double chunkBytes) {
  auto head = loss.getLogits().getDefiningOp<MatmulOp>();
  if (!head || head.getTransposeA())
    return false;
  Value h = head.getA(), w = head.getB();
  auto hType = cast<RankedTensorType>(h.getType()), wType = cast<RankedTensorType>(w.getType());
  // One float type throughout (fp32, or a bf16/f16 head, whose logits the
  // kernels round where the matmul stores them).
  Type element = hType.getElementType();
  if (wType.getElementType() != element || wType.getRank() != 2 || hType.getRank() < 2 ||
      cast<RankedTensorType>(loss.getLogits().getType()).getElementType() != element)
    return false;
  FailureOr<HeadBackward> backward = matchBackward(head, loss);
  if (failed(backward))
    return false;
  if (backward->grad && !makeAvailableBefore(backward->grad.getDloss(), loss))
    return false;

  int64_t rows = hType.getNumElements() / hType.getShape().back();
  int64_t vocab = wType.getShape()[head.getTransposeB() ? 0 : 1];
  int64_t chunk = std::clamp<int64_t>(
      static_cast<int64_t>(chunkBytes / (4.0 * static_cast<double>(vocab))), 1, rows);

  OpBuilder builder(loss);
  Operation *fused;
  if (backward->grad) {
    auto op = LinearCrossEntropyTrainOp::create(builder, loss.getLoc(), h, w, loss.getTargets(),
                                                backward->grad.getDloss(), chunk,
                                                head.getTransposeB(), loss.getIgnoreIndex());
    backward->dgrad.getResult().replaceAllUsesWith(op.getDh());
    backward->wgrad.getResult().replaceAllUsesWith(op.getDw());
    loss.getResult().replaceAllUsesWith(op.getLoss());
    fused = op;
  } else {
    auto op = LinearCrossEntropyOp::create(builder, loss.getLoc(), h, w, loss.getTargets(), chunk,
                                           head.getTransposeB(), loss.getIgnoreIndex());
    loss.getResult().replaceAllUsesWith(op.getLoss());
    fused = op;
  }
  // Where it belongs (microbatch, pipeline action, block) travels along.
  for (NamedAttribute attr : loss->getDiscardableAttrs())
    fused->setAttr(attr.getName(), attr.getValue());

  Operation *hRows = nullptr;
  if (backward->grad) {
    Value other = head.getTransposeB() ? backward->wgrad.getB() : backward->wgrad.getA();
    hRows = other.getDefiningOp();
    backward->wgrad->erase();
    backward->gradRows->erase();
    backward->dgrad->erase();
    backward->grad->erase();
  }
  eraseIfDead(hRows);
  loss->erase();
  eraseIfDead(head);
  return true;
}

/// `a` and `b` run in the same part of the step: the same microbatch,
/// pipeline action, block, forward or backward, replay or not.
bool samePlace(Operation *a, Operation *b) {
  return a->getBlock() == b->getBlock() &&
         a->getDiscardableAttrDictionary() == b->getDiscardableAttrDictionary();
}

/// Fuses the matmul and bias `add` (and, when `withGelu`, a gelu reading
/// it) into one linear, if the pattern matches; true when it did.
bool fuseLinear(AddOp add, bool withBias, bool withGelu) {
  auto matmul = add.getLhs().getDefiningOp<MatmulOp>();
  if (!matmul || matmul.getTransposeA() || !matmul.getResult().hasOneUse() ||
      !samePlace(matmul, add))
    return false;
  Value x = matmul.getA(), w = matmul.getB(), bias = add.getRhs();
  auto product = cast<RankedTensorType>(matmul.getType());
  auto wType = cast<RankedTensorType>(w.getType()), biasType = cast<RankedTensorType>(bias.getType());
  if (wType.getRank() != 2 || biasType.getShape() != product.getShape().take_back() ||
      biasType.getElementType() != product.getElementType() ||
      add.getType() != matmul.getType())
    return false;
  GeluOp gelu;
  if (withGelu)
    for (Operation *user : add.getResult().getUsers())
      if (auto g = dyn_cast<GeluOp>(user); g && samePlace(g, add)) {
        gelu = g;
        break;
      }
  if (!gelu && !withBias)
    return false;
  // Whoever else reads the biased value (gelu_grad) reads the fused op's.
  bool keepPre = gelu && !add.getResult().hasOneUse();

  SmallVector<Location> locs = {matmul.getLoc(), add.getLoc()};
  if (gelu)
    locs.push_back(gelu.getLoc());
  OpBuilder builder(add);
  auto fused = LinearOp::create(builder, builder.getFusedLoc(locs), x, w, bias,
                                /*residual=*/Value(), matmul.getTransposeB(),
                                static_cast<bool>(gelu), keepPre);
  for (NamedAttribute attr : add->getDiscardableAttrs())
    fused->setAttr(attr.getName(), attr.getValue());
  if (gelu) {
    gelu.getResult().replaceAllUsesWith(fused.getY());
    gelu->erase();
    if (keepPre)
      add.getResult().replaceAllUsesWith(fused.getPre());
  } else {
    add.getResult().replaceAllUsesWith(fused.getY());
  }
  add->erase();
  matmul->erase();
  return true;
}

/// `value` is computed from `from` by ops of its block (`from` itself is
/// not: a residual may be the product's input).
bool computedFrom(Value value, Value from) {
  Operation *start = from.getDefiningOp();
  SmallVector<Value> work = {value};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    // What was computed before `from` cannot read it.
    if (!def || (start && def->getBlock() == start->getBlock() && def->isBeforeInBlock(start)) ||
        !seen.insert(def).second)
      continue;
    for (Value operand : def->getOperands()) {
      if (operand == from)
        return true;
      work.push_back(operand);
    }
  }
  return false;
}

/// The product `value` is, when `add` can take it into a linear's epilogue:
/// a shared-weight matmul, or a linear with a bias and nothing after it,
/// that feeds only `add` in the same part of the step.
Operation *residualProduct(Value value, AddOp add) {
  Operation *def = value.getDefiningOp();
  if (!def || !value.hasOneUse() || !samePlace(def, add))
    return nullptr;
  if (auto matmul = dyn_cast<MatmulOp>(def))
    return !matmul.getTransposeA() &&
                   cast<RankedTensorType>(matmul.getB().getType()).getRank() == 2
               ? def
               : nullptr;
  if (auto linear = dyn_cast<LinearOp>(def))
    return linear.getBias() && !linear.getResidual() && !linear.getGelu() ? def : nullptr;
  return nullptr;
}

/// Fuses the residual `add` of a product (either operand) into a linear
/// with that residual, if the pattern matches; true when it did.
bool fuseResidual(AddOp add) {
  if (add->hasAttr(kBackwardAttr) && !add->hasAttr(kRecomputedAttr))
    return false;
  for (auto [value, residual] : {std::pair(add.getLhs(), add.getRhs()),
                                 std::pair(add.getRhs(), add.getLhs())}) {
    Operation *product = residualProduct(value, add);
    if (!product || residual.getType() != add.getType() || value.getType() != add.getType())
      continue;
    Value x = product->getOperand(0), w = product->getOperand(1);
    if (computedFrom(residual, x))
      continue;
    auto linear = dyn_cast<LinearOp>(product);
    bool transposeB = linear ? linear.getTransposeB() : cast<MatmulOp>(product).getTransposeB();
    // At the add: the residual may be computed after the product.
    OpBuilder builder(add);
    auto fused = LinearOp::create(builder, builder.getFusedLoc({product->getLoc(), add.getLoc()}),
                                  x, w, linear ? linear.getBias() : Value(), residual, transposeB,
                                  /*gelu=*/false, /*keep_pre=*/false);
    for (NamedAttribute attr : add->getDiscardableAttrs())
      fused->setAttr(attr.getName(), attr.getValue());
    add.getResult().replaceAllUsesWith(fused.getY());
    add->erase();
    product->erase();
    return true;
  }
  return false;
}

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
bool fuseBiasGrad(ReduceSumOp sum, DominanceInfo &dominance) {
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
      if (auto m = dyn_cast<MatmulOp>(reader);
          m && m.getTransposeA() && !m.getTransposeB() && rowsOf(m.getB()) == dy &&
          samePlace(m, sum)) {
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
  for (NamedAttribute attr : sum->getDiscardableAttrs())
    fused->setAttr(attr.getName(), attr.getValue());
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

/// The fusions `spec` enables on `target`, or failure with `error` set.
/// `all` leaves bias-grad out on the CPU, where it gains nothing; named,
/// it applies there too (its CPU kernel is the two kernels it replaces).
FailureOr<std::set<std::string>> parseFusions(StringRef spec, StringRef target,
                                              std::string &error) {
  if (spec == "all") {
    std::set<std::string> all = kFusions;
    if (target != "cuda")
      all.erase(kBiasGrad);
    return all;
  }
  std::set<std::string> enabled;
  if (spec == "none" || spec.empty())
    return enabled;
  SmallVector<StringRef> names;
  spec.split(names, ',');
  for (StringRef raw : names) {
    std::string name = raw.trim().str();
    if (!kFusions.count(name)) {
      error = "unknown fusion '" + name + "' (expected all, none or a list of: " +
              llvm::join(kFusions, ", ") + ")";
      return failure();
    }
    enabled.insert(name);
  }
  return enabled;
}

struct FusePass : public llmc::impl::FuseBase<FusePass> {
  using FuseBase::FuseBase;

  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      getOperation().emitError() << "llmc-fuse: target must be cpu or cuda, got '" << target
                                 << "'";
      return signalPassFailure();
    }
    std::string error;
    FailureOr<std::set<std::string>> enabled = parseFusions(fusions, target, error);
    if (failed(enabled)) {
      getOperation().emitError() << "llmc-fuse: " << error;
      return signalPassFailure();
    }
    if (chunkMb <= 0) {
      getOperation().emitError() << "llmc-fuse: chunk-mb (--fuse-chunk-mb) must be positive, got "
                                 << chunkMb;
      return signalPassFailure();
    }
    if (enabled->count(kLinearCrossEntropy)) {
      SmallVector<CrossEntropyOp> losses;
      getOperation().walk([&](CrossEntropyOp op) { losses.push_back(op); });
      for (CrossEntropyOp loss : losses)
        fuseLinearCrossEntropy(loss, chunkMb * 1024.0 * 1024.0);
    }
    bool bias = enabled->count(kBias), biasGelu = enabled->count(kBiasGelu);
    if (bias || biasGelu) {
      SmallVector<AddOp> adds;
      getOperation().walk([&](AddOp op) { adds.push_back(op); });
      for (AddOp add : adds)
        fuseLinear(add, bias, biasGelu);
    }
    // Before add-norm: a residual add in the epilogue saves a pass more
    // than the add beside the norm (the product is never stored alone).
    if (enabled->count(kResidual)) {
      SmallVector<AddOp> adds;
      getOperation().walk([&](AddOp op) { adds.push_back(op); });
      for (AddOp add : adds)
        fuseResidual(add);
    }
    if (enabled->count(kFuseAddNorm))
      fuseAddNorms(getOperation());
    if (enabled->count(kFuseQkvSplit))
      fuseQkvSplits(getOperation());
    if (enabled->count(kFuseRope))
      fuseRopes(getOperation());
    if (enabled->count(kBiasGrad)) {
      SmallVector<ReduceSumOp> sums;
      getOperation().walk([&](ReduceSumOp op) { sums.push_back(op); });
      DominanceInfo dominance(getOperation());
      for (ReduceSumOp sum : sums)
        fuseBiasGrad(sum, dominance);
    }
    // Last: the chains are whatever elementwise ops the fusions above left.
    if (enabled->count(kElementwise))
      fuseElementwiseChains(getOperation());
  }
};

} // namespace
