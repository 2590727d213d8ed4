//===- Elementwise.cpp - elementwise chains as one generated loop ---------===//
//
// llmc-fuse's `elementwise`: after the other fusions have taken their
// patterns, the elementwise ops that remain (residual and gradient adds,
// scales, casts, dropout, the activations and their gradients) are grown
// into maximal chains, and each chain of two or more ops becomes one
// llm.fused_elementwise whose program (common/ElementwiseProgram.h)
// replays the ops per element, rounding where each op stored its result.
//
// A chain only grows along def-use edges between ops of the same part of
// the step (block, microbatch, pipeline action, forward or backward,
// replayed or not: the same rule as the other fusions), and only over
// llm's elementwise ops, so it never takes in a collective (dist ops), a
// fake-quant point (qat ops), a recomputation boundary or a pipeline stage
// cut: such values stay inputs and results of the fused op. A dropout
// sharded by a parallel layout (its global_shape, offsets and their rank
// offsets) joins a chain whose other dropouts share that placement, and
// the fused op carries it, so every layout still draws one rank's mask.
//
// The fused op stands where the chain's last op stood. A value of the
// chain that other ops read becomes one more result (the chain still
// saves reading it back, and the intermediate values it alone read are
// never stored); an op joins a chain only when every other reader of the
// chain's values comes after it, so moving the chain's earlier ops down to
// its end keeps every value defined before it is read, and only when the
// ops between the chain and it merely lay out its operands (pads,
// reshapes), so moving the chain down keeps no tensor alive across real
// work: memory the unfused ops would have freed.
//
//===----------------------------------------------------------------------===//

#include "passes/fuse/Fusions.h"

#include "common/ElementwiseProgram.h"
#include "dialects/Dist/DistDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace llmc;
using namespace llmc::llm;

namespace {

/// The program's dtype number of a float tensor's element type.
int64_t dtypeOf(Value value) {
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  return element.isBF16() ? 1 : element.isF16() ? 2 : 0;
}

/// Instructions `op` contributes to a program (besides its inputs' loads),
/// or 0 when it is not an op the program can express. Every result must
/// have one shape (the chain's): the program walks one index space.
int instructionsOf(Operation *op) {
  auto sameShape = [&](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape() ==
           cast<RankedTensorType>(op->getResult(0).getType()).getShape();
  };
  for (Value r : op->getResults())
    if (!sameShape(r))
      return 0;
  // Rank-dependent attribute terms are a sharded dropout's offsets, which
  // the fused op takes over (see DropoutPlacement); any other op's belong
  // to its own kernel.
  if (!isa<DropoutOp>(op) && op->hasAttr(dist::DistDialect::kRankOffsetsAttrName))
    return 0;
  return TypeSwitch<Operation *, int>(op)
      .Case<AddOp, MulOp>([&](auto o) { return sameShape(o.getLhs()) ? 1 : 0; })
      .Case<ScaleOp>([](auto) { return 2; }) // the factor, the product
      .Case<GeluOp, SiluOp, SwigluOp, GeluGradOp, SiluGradOp, CastOp>([](auto) { return 1; })
      .Case<SwigluGradOp>([](auto) { return 2; })
      .Case<DropoutOp>([](auto) { return 1; })
      .Default([](Operation *) { return 0; });
}

/// Where a dropout's mask index comes from: its global_shape, offsets and
/// their rank offsets (all null: the local flat index). The fused op has
/// one placement for all its dropout instructions, so a chain only takes
/// dropouts that agree on it.
struct DropoutPlacement {
  Attribute globalShape, offsets, rankOffsets;

  static DropoutPlacement of(DropoutOp op) {
    return {op.getGlobalShapeAttr(), op.getOffsetsAttr(),
            op->getAttr(dist::DistDialect::kRankOffsetsAttrName)};
  }
  bool operator==(const DropoutPlacement &o) const {
    return globalShape == o.globalShape && offsets == o.offsets && rankOffsets == o.rankOffsets;
  }
  bool operator!=(const DropoutPlacement &o) const { return !(*this == o); }
};

/// passes/lib/FusePlace.h's samePlace, but ignoring a sharded dropout's rank
/// offsets (a discardable attribute too): they say where its piece lies,
/// not where it runs, and the chain checks them as its dropouts'
/// placement instead.
bool samePart(Operation *a, Operation *b) {
  auto place = [](Operation *op) {
    NamedAttrList attrs(op->getDiscardableAttrDictionary());
    attrs.erase(dist::DistDialect::kRankOffsetsAttrName);
    return attrs.getDictionary(op->getContext());
  };
  return a->getBlock() == b->getBlock() && place(a) == place(b);
}

/// A chain being grown, its ops in block order.
struct Chain {
  SmallVector<Operation *> ops;
  llvm::SmallPtrSet<Operation *, 16> members;
  int instructions = 0;
  /// Its dropouts' common placement, once it has one.
  std::optional<DropoutPlacement> dropout;
};

/// Whether the ops between the chain's last op and `op` only lay out
/// `op`'s operands (reshape, slice, pad, concat, transpose, fill: the pads
/// that assemble dQKV, a zero seed). The fused op stands at `op`, so the
/// chain's inputs stay live until there: across such ops that costs at
/// most one operand, but across real work (a whole microbatch between two
/// gradient-accumulation adds) it would hold every microbatch's gradient
/// at once where the unfused sum held one.
bool onlyLayoutBetween(const Chain &chain, Operation *op) {
  llvm::SmallPtrSet<Operation *, 8> feeders = {op};
  for (Operation *between = op->getPrevNode(); between != chain.ops.back();
       between = between->getPrevNode()) {
    if (!between ||
        !isa<ReshapeOp, SliceOp, PadOp, ConcatOp, TransposeOp, FillOp, StopGradientOp>(between))
      return false;
    bool feeds = llvm::any_of(between->getUsers(), [&](Operation *user) {
      Operation *ancestor = op->getBlock()->findAncestorOpInBlock(*user);
      return ancestor && feeders.contains(ancestor);
    });
    if (!feeds)
      return false;
    feeders.insert(between);
  }
  return true;
}

/// Whether `op` may join `chain`: every reader of the chain's values
/// outside it (and outside `op`) comes after `op`, only layout ops for
/// `op` stand between the chain and `op`, and the program stays within the
/// kernels' limits.
bool canJoin(const Chain &chain, Operation *op) {
  if (!onlyLayoutBetween(chain, op))
    return false;
  if (auto dropout = dyn_cast<DropoutOp>(op))
    if (chain.dropout && *chain.dropout != DropoutPlacement::of(dropout))
      return false;
  llvm::SetVector<Value> inputs;
  int results = static_cast<int>(op->getNumResults());
  auto isMember = [&](Operation *o) { return o == op || chain.members.contains(o); };
  for (Operation *member : chain.ops) {
    for (Value result : member->getResults()) {
      bool readOutside = false;
      for (Operation *user : result.getUsers()) {
        if (isMember(user))
          continue;
        Operation *ancestor = op->getBlock()->findAncestorOpInBlock(*user);
        if (!ancestor || !op->isBeforeInBlock(ancestor))
          return false;
        readOutside = true;
      }
      results += readOutside;
    }
  }
  auto addInputs = [&](Operation *member) {
    for (Value operand : member->getOperands())
      if (!operand.getDefiningOp() || !isMember(operand.getDefiningOp()))
        inputs.insert(operand);
  };
  for (Operation *member : chain.ops) addInputs(member);
  addInputs(op);
  int instructions = chain.instructions + instructionsOf(op) + static_cast<int>(inputs.size());
  return static_cast<int>(inputs.size()) <= ew::kMaxInputs && results <= ew::kMaxResults &&
         instructions <= ew::kMaxInstructions;
}

/// Replaces `chain` by one llm.fused_elementwise placed at its last op.
void fuseChain(const Chain &chain) {
  SmallVector<int64_t> program, yields;
  SmallVector<Value> inputs, outs;
  llvm::DenseMap<Value, int64_t> registers;
  int64_t count = 0;
  auto emit = [&](ew::Opcode op, int64_t dtype, int64_t a = 0, int64_t b = 0, int64_t c = 0) {
    program.append({static_cast<int64_t>(op), dtype, a, b, c});
    return count++;
  };
  // The register of `v`: a chain value's, or a load of a new input.
  auto reg = [&](Value v) -> int64_t {
    auto it = registers.find(v);
    if (it != registers.end())
      return it->second;
    int64_t index = static_cast<int64_t>(inputs.size());
    inputs.push_back(v);
    return registers[v] = emit(ew::Opcode::Load, dtypeOf(v), index);
  };
  for (Operation *op : chain.ops) {
    int64_t t = dtypeOf(op->getResult(0));
    auto define = [&](unsigned result, int64_t r) { registers[op->getResult(result)] = r; };
    TypeSwitch<Operation *>(op)
        .Case([&](AddOp o) {
          int64_t l = reg(o.getLhs()), r = reg(o.getRhs());
          define(0, emit(ew::Opcode::Add, t, l, r));
        })
        .Case([&](MulOp o) {
          int64_t l = reg(o.getLhs()), r = reg(o.getRhs());
          define(0, emit(ew::Opcode::Mul, t, l, r));
        })
        .Case([&](ScaleOp o) {
          int64_t x = reg(o.getX());
          int64_t factor = emit(ew::Opcode::Const, 0, ew::bitsOf(o.getFactor().convertToDouble()));
          define(0, emit(ew::Opcode::Mul, t, x, factor));
        })
        .Case([&](GeluOp o) { define(0, emit(ew::Opcode::Gelu, t, reg(o.getX()))); })
        .Case([&](SiluOp o) { define(0, emit(ew::Opcode::Silu, t, reg(o.getX()))); })
        .Case([&](CastOp o) { define(0, emit(ew::Opcode::Cast, t, reg(o.getX()))); })
        .Case([&](SwigluOp o) {
          int64_t g = reg(o.getGate()), up = reg(o.getUp());
          define(0, emit(ew::Opcode::Swiglu, t, g, up));
        })
        .Case([&](GeluGradOp o) {
          int64_t x = reg(o.getX()), dy = reg(o.getDy());
          define(0, emit(ew::Opcode::GeluGrad, t, x, dy));
        })
        .Case([&](SiluGradOp o) {
          int64_t x = reg(o.getX()), dy = reg(o.getDy());
          define(0, emit(ew::Opcode::SiluGrad, t, x, dy));
        })
        .Case([&](SwigluGradOp o) {
          int64_t g = reg(o.getGate()), up = reg(o.getUp()), dy = reg(o.getDy());
          define(0, emit(ew::Opcode::SwigluGradGate, t, g, up, dy));
          define(1, emit(ew::Opcode::SwigluGradUp, t, g, dy));
        })
        .Case([&](DropoutOp o) {
          int64_t x = reg(o.getX());
          define(0, emit(ew::Opcode::Dropout, t, x, o.getSeed(),
                         ew::bitsOf(o.getRate().convertToDouble())));
        });
  }
  // Results: every chain value something outside the chain reads.
  for (Operation *op : chain.ops)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(),
                       [&](Operation *user) { return !chain.members.contains(user); })) {
        outs.push_back(result);
        yields.push_back(registers.lookup(result));
      }

  Operation *last = chain.ops.back();
  SmallVector<Location> locs;
  SmallVector<Type> types;
  for (Operation *op : chain.ops) locs.push_back(op->getLoc());
  for (Value v : outs) types.push_back(v.getType());
  OpBuilder builder(last);
  auto fused = FusedElementwiseOp::create(builder, builder.getFusedLoc(locs), types, inputs,
                                          builder.getDenseI64ArrayAttr(program),
                                          builder.getDenseI64ArrayAttr(yields),
                                          /*global_shape=*/nullptr, /*offsets=*/nullptr);
  // Where it belongs (microbatch, pipeline action, block) travels along;
  // the dropouts' placement comes from the chain's.
  for (NamedAttribute attr : last->getDiscardableAttrs())
    if (attr.getName() != dist::DistDialect::kRankOffsetsAttrName)
      fused->setAttr(attr.getName(), attr.getValue());
  if (chain.dropout && chain.dropout->globalShape) {
    fused.setGlobalShapeAttr(cast<DenseI64ArrayAttr>(chain.dropout->globalShape));
    fused.setOffsetsAttr(cast<DenseI64ArrayAttr>(chain.dropout->offsets));
    if (chain.dropout->rankOffsets)
      fused->setAttr(dist::DistDialect::kRankOffsetsAttrName, chain.dropout->rankOffsets);
  }
  for (auto [old, now] : llvm::zip(outs, fused.getOuts())) old.replaceAllUsesWith(now);
  for (Operation *op : llvm::reverse(chain.ops)) op->erase();
}

} // namespace

unsigned llmc::fuseElementwise(ModuleOp module) {
  // Grow chains in block order: an op joins the chain of the first of its
  // operands' producers it may join, else starts its own.
  SmallVector<std::unique_ptr<Chain>> chains;
  llvm::DenseMap<Operation *, Chain *> chainOf;
  module.walk([&](Operation *op) {
    int instructions = instructionsOf(op);
    if (!instructions)
      return;
    Chain *joined = nullptr;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      Chain *chain = def ? chainOf.lookup(def) : nullptr;
      if (chain && samePart(def, op) && canJoin(*chain, op)) {
        joined = chain;
        break;
      }
    }
    if (!joined) {
      chains.push_back(std::make_unique<Chain>());
      joined = chains.back().get();
    }
    joined->ops.push_back(op);
    joined->members.insert(op);
    joined->instructions += instructions;
    if (auto dropout = dyn_cast<DropoutOp>(op))
      joined->dropout = DropoutPlacement::of(dropout);
    chainOf[op] = joined;
  });
  unsigned fused = 0;
  for (const auto &chain : chains)
    if (chain->ops.size() >= 2) {
      fuseChain(*chain);
      ++fused;
    }
  return fused;
}
