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
// on nothing computed after it, so it moves up to the fused op. A frozen
// head (LoRA) has no %dw product; the fused op is then frozen_weight and
// forms only dh.
//
// Under tensor parallelism the head is a vocabulary shard and its loss
// Megatron's (passes/lib/TensorParallel.cpp): the log-sum-exp needs every
// shard, so one op cannot go from the logits to their gradient. The
// forward's pieces reading the logits,
//   %m    = reduce_max %logits                      → all_reduce max → %shift
//   %s, %t = cross_entropy_partial %logits, %t, %shift  → all_reduce sums
// become one linear_cross_entropy_partial where the max was, whose sum is
// relative to the shard's own max and is rescaled to the shift where the
// partial was; the backward's
//   %g = cross_entropy_partial_grad %logits, %t, %shift, %ds, %dt
// and its two products become linear_cross_entropy_partial_grad, which
// computes the logits again. The collectives between them stay as they
// were.
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
// elementwise fusion chains with its bias and GELU in one kernel).
//
// The backward's sums of gradient products (Llama's dx over dq, dk and dv,
// over gate and up),
//   %a = matmul %dq, %wq ; %b = matmul %dk, %wk ; %s = add %a, %b
// fuse the same way, but at the later product, with the earlier one's
// result as the residual (linear %dk, %wk residual %a where %b was): at
// the add, the product's operands would stay alive across the other
// products' work. A sum whose other addend is made after the product
// stays.
//
// gelu-grad, swiglu-grad. The data-gradient product of the layer after
// an MLP's activation and the activation's backward reading it:
// passes/FuseActivationGrad.cpp.
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
// multi-tensor-adamw. The step's per-tensor AdamW updates, with the casts
// of their fp32 masters, as one op: passes/FuseMultiTensorAdamW.cpp.
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
#include "passes/FuseActivationGrad.h"
#include "passes/FuseMultiTensorAdamW.h"
#include "passes/FusePlace.h"

#include "common/ElementwiseProgram.h"
#include "common/HeadScratch.h"
#include "dialects/Dist/DistDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
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
const std::set<std::string> kFusions = {
    kFuseAddNorm, kBias,        kBiasGelu,          kBiasGrad,           kElementwise,
    kFuseGeluGrad, kFuseMultiTensorAdamW, kFuseQkvSplit, kLinearCrossEntropy, kFuseRope,
    kResidual,    kFuseSwigluGrad};

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

/// `a` and `b` hold the same weight: one value, or two gathers of one
/// shard by the same collective (ZeRO-3 gathers the weight again for the
/// backward, after freeing the forward's copy).
bool sameWeight(Value a, Value b) {
  if (a == b)
    return true;
  auto gatherA = a.getDefiningOp<dist::AllGatherOp>();
  auto gatherB = b.getDefiningOp<dist::AllGatherOp>();
  return gatherA && gatherB && gatherA.getType() == gatherB.getType() &&
         llvm::equal(gatherA->getOperands(), gatherB->getOperands()) &&
         gatherA->getPropertiesAsAttribute() == gatherB->getPropertiesAsAttribute();
}

/// The backward's products of the head `head` reading the logits'
/// gradient: dh = g·w (in the transposes the autodiff rule picks) and dw
/// from reshapes of g and h — none when the head is frozen (LoRA), whose
/// weight the autodiff pass gives no gradient.
struct HeadProducts {
  MatmulOp dgrad, wgrad;
  ReshapeOp gradRows; ///< reshape of the gradient feeding wgrad
};

/// Finds the products reading `grad`, the gradient of `head`'s logits;
/// fails when anything else reads it. With `regathered`, dh's product may
/// read the weight gathered again (sameWeight).
FailureOr<HeadProducts> matchProducts(MatmulOp head, Value grad, bool regathered = false) {
  HeadProducts p{};
  Value h = head.getA(), w = head.getB();
  bool transposeB = head.getTransposeB();
  for (Operation *user : grad.getUsers()) {
    auto matmul = dyn_cast<MatmulOp>(user);
    if (matmul && !p.dgrad && matmul.getA() == grad &&
        (regathered ? sameWeight(matmul.getB(), w) : matmul.getB() == w) &&
        !matmul.getTransposeA() && matmul.getTransposeB() == !transposeB) {
      p.dgrad = matmul;
      continue;
    }
    auto reshape = dyn_cast<ReshapeOp>(user);
    if (!reshape || p.gradRows || !reshape.getResult().hasOneUse())
      return failure();
    auto wgrad = dyn_cast<MatmulOp>(*reshape.getResult().getUsers().begin());
    if (!wgrad || !wgrad.getTransposeA() || wgrad.getTransposeB())
      return failure();
    Value gradRows = reshape.getResult();
    bool matches = transposeB ? wgrad.getA() == gradRows && isReshapeOf(wgrad.getB(), h)
                              : wgrad.getB() == gradRows && isReshapeOf(wgrad.getA(), h);
    if (!matches)
      return failure();
    p.gradRows = reshape;
    p.wgrad = wgrad;
  }
  if (!p.dgrad || p.dgrad.getType() != h.getType() ||
      (p.wgrad && p.wgrad.getType() != w.getType()))
    return failure();
  return p;
}

/// The training half of the pattern: the loss gradient and the two products
/// that consume it.
struct HeadBackward {
  CrossEntropyGradOp grad;
  HeadProducts products;
};

/// Finds the backward of `head` + `loss` among the users of the logits;
/// fails when anything else reads the logits or the gradient.
FailureOr<HeadBackward> matchBackward(MatmulOp head, CrossEntropyOp loss) {
  HeadBackward b{};
  Value logits = head.getResult();
  for (Operation *user : logits.getUsers()) {
    if (user == loss.getOperation())
      continue;
    auto grad = dyn_cast<CrossEntropyGradOp>(user);
    if (!grad || b.grad || grad.getLogits() != logits || grad.getTargets() != loss.getTargets() ||
        grad.getIgnoreIndex() != loss.getIgnoreIndex() ||
        grad.getNumClasses() != loss.getNumClasses())
      return failure();
    b.grad = grad;
  }
  if (!b.grad)
    return b; // forward only (evaluation)
  FailureOr<HeadProducts> products = matchProducts(head, b.grad.getResult());
  if (failed(products))
    return failure();
  b.products = *products;
  return b;
}

/// Erases `op` when nothing reads it any more.
void eraseIfDead(Operation *op) {
  if (op && op->use_empty())
    op->erase();
}

/// Hands the products' results to the fused op's `dh` and `dw` (null for a
/// frozen head) and erases them, the gradient's reshape and h's when
/// nothing else reads it.
void replaceProducts(HeadProducts &p, bool transposeB, Value dh, Value dw) {
  p.dgrad.getResult().replaceAllUsesWith(dh);
  p.dgrad->erase();
  if (!p.wgrad)
    return;
  p.wgrad.getResult().replaceAllUsesWith(dw);
  Operation *hRows = (transposeB ? p.wgrad.getB() : p.wgrad.getA()).getDefiningOp();
  p.wgrad->erase();
  p.gradRows->erase();
  eraseIfDead(hRows);
}

/// Bytes per logit of a chunk as the `target`'s kernels hold it: CUDA's
/// GEMMs write the head's own type, the CPU computes in fp32.
int64_t chunkElementBytes(Type element, StringRef target) {
  return target == "cuda" && !element.isF32() ? 2 : 4;
}

/// The head matmul h·w{ᵀ} of a fusable head: one 2-D weight, h, w and the
/// logits of one float type.
MatmulOp fusableHead(Value logits) {
  auto head = logits.getDefiningOp<MatmulOp>();
  if (!head || head.getTransposeA())
    return {};
  auto hType = cast<RankedTensorType>(head.getA().getType());
  auto wType = cast<RankedTensorType>(head.getB().getType());
  Type element = hType.getElementType();
  if (wType.getElementType() != element || wType.getRank() != 2 || hType.getRank() < 2 ||
      head.getType().getElementType() != element)
    return {};
  return head;
}

/// Fuses the head feeding `loss`, if the pattern matches; true when it did.
bool fuseLinearCrossEntropy(CrossEntropyOp loss, double chunkBytes, StringRef target) {
  MatmulOp head = fusableHead(loss.getLogits());
  if (!head)
    return false;
  Value h = head.getA(), w = head.getB();
  FailureOr<HeadBackward> backward = matchBackward(head, loss);
  if (failed(backward))
    return false;
  if (backward->grad && !makeAvailableBefore(backward->grad.getDloss(), loss))
    return false;

  auto hType = cast<RankedTensorType>(h.getType());
  int64_t vocab = head.getType().getShape().back();
  int64_t chunk = headChunkRows(hType.getNumElements() / hType.getShape().back(), vocab,
                                chunkElementBytes(hType.getElementType(), target), chunkBytes);

  OpBuilder builder(loss);
  Operation *fused;
  if (backward->grad) {
    auto op = LinearCrossEntropyTrainOp::create(
        builder, loss.getLoc(), h, w, loss.getTargets(), backward->grad.getDloss(), chunk,
        head.getTransposeB(), loss.getIgnoreIndex(), /*frozen_weight=*/!backward->products.wgrad,
        loss.getNumClasses());
    replaceProducts(backward->products, head.getTransposeB(), op.getDh(), op.getDw());
    backward->grad->erase();
    loss.getResult().replaceAllUsesWith(op.getLoss());
    fused = op;
  } else {
    auto op = LinearCrossEntropyOp::create(builder, loss.getLoc(), h, w, loss.getTargets(), chunk,
                                           head.getTransposeB(), loss.getIgnoreIndex(),
                                           loss.getNumClasses());
    loss.getResult().replaceAllUsesWith(op.getLoss());
    fused = op;
  }
  copyPlace(loss, fused);
  loss->erase();
  eraseIfDead(head);
  return true;
}

/// The pieces of a vocabulary-parallel head (passes/lib/TensorParallel.cpp)
/// that read its logits: the forward's statistics and, when the same
/// logits serve the backward, its gradient with the two products.
struct ShardedHead {
  ReduceMaxOp max;
  CrossEntropyPartialOp partial;
  CrossEntropyPartialGradOp grad;
  HeadProducts products;
};

/// Finds the readers of `head`'s logits; fails when anything else reads
/// them or the gradient, or when the pieces disagree on the shard.
FailureOr<ShardedHead> matchShardedHead(MatmulOp head) {
  ShardedHead s{};
  for (Operation *user : head.getResult().getUsers()) {
    if (auto max = dyn_cast<ReduceMaxOp>(user); max && !s.max)
      s.max = max;
    else if (auto partial = dyn_cast<CrossEntropyPartialOp>(user);
             partial && !s.partial && partial.getLogits() == head.getResult())
      s.partial = partial;
    else if (auto grad = dyn_cast<CrossEntropyPartialGradOp>(user);
             grad && !s.grad && grad.getLogits() == head.getResult())
      s.grad = grad;
    else
      return failure();
  }
  // The max and the partial sums come together; both read one shard, and
  // the rank offset that places it (dist.rank_offsets) is the same.
  if (static_cast<bool>(s.max) != static_cast<bool>(s.partial) || (!s.partial && !s.grad))
    return failure();
  if (s.partial && (s.max.getClassOffset() != s.partial.getClassOffset() ||
                    s.max.getNumClasses() != s.partial.getNumClasses() ||
                    s.max->getAttr(dist::DistDialect::kRankOffsetsAttrName) !=
                        s.partial->getAttr(dist::DistDialect::kRankOffsetsAttrName)))
    return failure();
  if (s.grad) {
    // The backward op computes the logits from the weight its products
    // read, so a weight gathered again for the backward serves.
    FailureOr<HeadProducts> products =
        matchProducts(head, s.grad.getResult(), /*regathered=*/true);
    if (failed(products))
      return failure();
    s.products = *products;
  }
  return s;
}

/// sumexp · exp(max − shift): a shard's Σ exp(logit − max) made relative
/// to the shift all ranks share, as cross_entropy_partial's sum is.
Value shiftSumexp(OpBuilder &builder, Location loc, Value sumexp, Value max, Value shift) {
  auto instruction = [](ew::Opcode op, int64_t a, int64_t b = 0) {
    return SmallVector<int64_t>{static_cast<int64_t>(op), /*f32*/ 0, a, b, 0};
  };
  SmallVector<int64_t> program;
  for (const SmallVector<int64_t> &in :
       {instruction(ew::Opcode::Load, 0), instruction(ew::Opcode::Load, 1),
        instruction(ew::Opcode::Load, 2), instruction(ew::Opcode::Sub, 1, 2),
        instruction(ew::Opcode::Exp, 3), instruction(ew::Opcode::Mul, 0, 4)})
    program.append(in);
  auto op = FusedElementwiseOp::create(builder, loc, TypeRange{sumexp.getType()},
                                       ValueRange{sumexp, max, shift},
                                       builder.getDenseI64ArrayAttr(program),
                                       builder.getDenseI64ArrayAttr({5}),
                                       /*global_shape=*/nullptr, /*offsets=*/nullptr);
  return op.getOuts()[0];
}

/// Fuses the vocabulary-parallel head computing `head`, if the pattern
/// matches; true when it did. The forward's reduce_max and
/// cross_entropy_partial become one linear_cross_entropy_partial where the
/// max was (its sum relative to the shard's max, rescaled to the shared
/// shift where the partial was), the backward's cross_entropy_partial_grad
/// and its products one linear_cross_entropy_partial_grad where the
/// gradient was. The collectives between them stay as they were.
bool fuseShardedHead(MatmulOp head, double chunkBytes, StringRef target) {
  FailureOr<ShardedHead> s = matchShardedHead(head);
  if (failed(s) || (s->partial && !makeAvailableBefore(s->partial.getTargets(), s->max)) ||
      (s->grad && !makeAvailableBefore(s->products.dgrad.getB(), s->grad)))
    return false;
  Value h = head.getA(), w = head.getB();
  auto hType = cast<RankedTensorType>(h.getType());
  int64_t vocab = head.getType().getShape().back();
  int64_t chunk = headChunkRows(hType.getNumElements() / hType.getShape().back(), vocab,
                                chunkElementBytes(hType.getElementType(), target), chunkBytes);
  bool transposeB = head.getTransposeB();

  if (CrossEntropyPartialOp partial = s->partial) {
    OpBuilder builder(s->max);
    auto op = LinearCrossEntropyPartialOp::create(
        builder, partial.getLoc(), h, w, partial.getTargets(), chunk, transposeB,
        partial.getClassOffset(), partial.getNumClasses(), partial.getIgnoreIndex());
    copyPlace(s->max, op);
    s->max.getResult().replaceAllUsesWith(op.getMax());
    builder.setInsertionPoint(partial);
    Operation *rescale =
        shiftSumexp(builder, partial.getLoc(), op.getSumexp(), op.getMax(), partial.getShift())
            .getDefiningOp();
    copyPlace(partial, rescale);
    rescale->removeAttr(dist::DistDialect::kRankOffsetsAttrName);
    partial.getSumexp().replaceAllUsesWith(rescale->getResult(0));
    partial.getTargetLogit().replaceAllUsesWith(op.getTargetLogit());
    partial->erase();
    s->max->erase();
  }
  if (CrossEntropyPartialGradOp grad = s->grad) {
    OpBuilder builder(grad);
    auto op = LinearCrossEntropyPartialGradOp::create(
        builder, grad.getLoc(), h, s->products.dgrad.getB(), grad.getTargets(), grad.getShift(),
        grad.getDsumexp(), grad.getDtargetLogit(), chunk, transposeB, grad.getClassOffset(),
        grad.getNumClasses(), grad.getIgnoreIndex(), /*frozen_weight=*/!s->products.wgrad);
    copyPlace(grad, op);
    replaceProducts(s->products, transposeB, op.getDh(), op.getDw());
    grad->erase();
  }
  head->erase();
  return true;
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
  copyPlace(add, fused);
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
bool fuseResidual(AddOp add, DominanceInfo &dominance) {
  // A backward sum of gradient products (Llama's dx over q, k and v, over
  // gate and up) fuses at its later product, the earlier one's result as
  // the residual: at the add, the product's operands would stay alive
  // across the other products' work.
  const bool atProduct = add->hasAttr(kBackwardAttr) && !add->hasAttr(kRecomputedAttr);
  for (auto [value, residual] : {std::pair(add.getLhs(), add.getRhs()),
                                 std::pair(add.getRhs(), add.getLhs())}) {
    Operation *product = residualProduct(value, add);
    if (!product || residual.getType() != add.getType() || value.getType() != add.getType())
      continue;
    Value x = product->getOperand(0), w = product->getOperand(1);
    if (computedFrom(residual, x) ||
        (atProduct && !dominance.properlyDominates(residual, product)))
      continue;
    auto linear = dyn_cast<LinearOp>(product);
    bool transposeB = linear ? linear.getTransposeB() : cast<MatmulOp>(product).getTransposeB();
    // In the forward at the add: the residual may be computed after the
    // product.
    OpBuilder builder(atProduct ? product : add.getOperation());
    auto fused = LinearOp::create(builder, builder.getFusedLoc({product->getLoc(), add.getLoc()}),
                                  x, w, linear ? linear.getBias() : Value(), residual, transposeB,
                                  /*gelu=*/false, /*keep_pre=*/false);
    copyPlace(add, fused);
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
        fuseLinearCrossEntropy(loss, chunkMb * 1024.0 * 1024.0, target);
      // Under tensor parallelism, the heads whose logits are a vocabulary
      // shard: the forward's and, where it replays the head, the
      // backward's.
      llvm::SetVector<Operation *> heads;
      getOperation().walk([&](Operation *op) {
        if (isa<CrossEntropyPartialOp, CrossEntropyPartialGradOp>(op))
          if (MatmulOp head = fusableHead(op->getOperand(0)))
            heads.insert(head);
      });
      for (Operation *head : heads)
        fuseShardedHead(cast<MatmulOp>(head), chunkMb * 1024.0 * 1024.0, target);
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
      DominanceInfo dominance(getOperation());
      for (AddOp add : adds)
        fuseResidual(add, dominance);
    }
    if (enabled->count(kFuseGeluGrad) || enabled->count(kFuseSwigluGrad))
      fuseActivationGrads(getOperation(), enabled->count(kFuseGeluGrad),
                          enabled->count(kFuseSwigluGrad));
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
    // Before the chains: the casts around the updates join them instead.
    if (enabled->count(kFuseMultiTensorAdamW))
      fuseMultiTensorAdamW(getOperation());
    // Last: the chains are whatever elementwise ops the fusions above left.
    if (enabled->count(kElementwise))
      fuseElementwiseChains(getOperation());
  }
};

} // namespace
