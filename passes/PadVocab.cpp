//===- PadVocab.cpp - the LM head's vocabulary padded to a multiple -------===//
//
// GPT-2's 50257 classes make a bf16 row of logits 100,514 bytes: no leading
// dimension cuBLASLt's fastest Hopper kernels accept, and no 16-byte loads
// for the loss kernel. As llm.c does (50257 → 50304), the head's weight is
// padded to a multiple of `multiple` classes inside the artifact:
//
//   %w : [V, D] param                       %w : [Vp, D] param, llmc.shard =
//   %l = matmul %h, %w {transpose_b}   →        {global_shape [V, D],
//   %loss = cross_entropy %l, %t                 levels [{dim 0, pad_to Vp}]}
//                                           %l = matmul %h, %w {transpose_b} : [.., Vp]
//                                           %loss = cross_entropy %l, %t {num_classes = V}
//
// The padded rows start as zeros and stay so: the loss leaves the padded
// columns out of its max and sum and gives them a gradient of exactly 0, so
// their rows of the weight gradient are 0, and AdamW (weight decay
// included) moves nothing that is 0 with a zero gradient. A tied embedding
// reads the same parameter; token ids never reach the padded rows.
//
// The padding is a shard level (ShardLevel::padTo in the runtime): the
// parameter's global tensor is the real [V, D], so initialisation gives the
// real rows the values an unpadded artifact would, and checkpoints,
// `--weights`, export and quantization see the real vocabulary. Later
// passes see a [Vp, D] weight: tensor parallelism splits the padded
// vocabulary, ZeRO the padded rows; @logits cuts the padding off.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/ShardAttr.h"

#include "mlir/IR/Builders.h"

namespace llmc {
#define GEN_PASS_DEF_PADVOCAB
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

struct PadVocabPass : llmc::impl::PadVocabBase<PadVocabPass> {
  using PadVocabBase::PadVocabBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (multiple < 1) {
      module.emitError() << "pad-vocab: multiple (--vocab-multiple) must be >= 1, got "
                         << static_cast<int64_t>(multiple);
      return signalPassFailure();
    }
    func::FuncOp forward = lookupFunc(module, "forward");
    if (!forward) {
      module.emitError("pad-vocab: no @forward");
      return signalPassFailure();
    }
    if (multiple == 1)
      return;
    SmallVector<llm::CrossEntropyOp> losses;
    forward.walk([&](llm::CrossEntropyOp loss) { losses.push_back(loss); });
    for (llm::CrossEntropyOp loss : losses)
      if (failed(padHead(forward, loss)))
        return signalPassFailure();
  }

  /// The head's weight parameter (read directly: the pass runs before
  /// precision and layout), or null when `loss` is not fed by a
  /// parameter's matmul: such a graph keeps its vocabulary.
  static BlockArgument headWeight(func::FuncOp forward, llm::MatmulOp head) {
    if (!head || head.getTransposeA())
      return nullptr;
    auto weight = dyn_cast<BlockArgument>(head.getB());
    if (!weight || weight.getOwner()->getParentOp() != forward.getOperation() ||
        !llm::getParamAttr(forward, weight.getArgNumber()) ||
        cast<RankedTensorType>(weight.getType()).getRank() != 2)
      return nullptr;
    return weight;
  }

  LogicalResult padHead(func::FuncOp forward, llm::CrossEntropyOp loss) {
    // Gemma 2's logit soft-cap sits between head and loss: elementwise, it
    // is padded with the head (the padding's capped logits are 0 as well).
    auto cap = loss.getLogits().getDefiningOp<llm::SoftcapOp>();
    if (cap && !cap->hasOneUse())
      return success();
    auto head = (cap ? cap.getX() : loss.getLogits()).getDefiningOp<llm::MatmulOp>();
    BlockArgument weight = headWeight(forward, head);
    if (!weight || loss.getNumClasses() != 0)
      return success(); // not a head of ours, or padded already
    auto type = cast<RankedTensorType>(weight.getType());
    const int64_t dim = head.getTransposeB() ? 0 : 1;
    const int64_t vocab = type.getDimSize(dim);
    const int64_t padded = (vocab + multiple - 1) / multiple * multiple;
    if (padded == vocab)
      return success();
    StringRef name = llm::getParamAttr(forward, weight.getArgNumber()).getName();
    if (forward.getArgAttr(weight.getArgNumber(), kShardAttr))
      return head.emitOpError("pad-vocab: '")
             << name << "' is split already; the vocabulary is padded before any layout";
    // Whatever else reads the weight must not see the padding: a tied
    // embedding looks up rows by token id, which never reach it.
    for (Operation *user : weight.getUsers()) {
      auto embedding = dyn_cast<llm::EmbeddingOp>(user);
      if (user == head.getOperation() || (embedding && embedding.getTable() == weight && dim == 0))
        continue;
      return user->emitOpError("pad-vocab: '")
             << name << "' is the LM head's weight and is read here too, where padding its "
             << vocab << " classes to " << padded
             << " would change the result; compile with --vocab-multiple 1";
    }

    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = padded;
    forward.setArgAttr(weight.getArgNumber(), kShardAttr,
                       addPadLevel(&getContext(), nullptr, type, dim, padded));
    weight.setType(RankedTensorType::get(shape, type.getElementType()));
    SmallVector<Type> argTypes(forward.getArgumentTypes());
    argTypes[weight.getArgNumber()] = weight.getType();
    forward.setFunctionType(
        FunctionType::get(&getContext(), argTypes, forward.getResultTypes()));

    auto logits = cast<RankedTensorType>(head.getType());
    SmallVector<int64_t> logitsShape(logits.getShape());
    logitsShape.back() = padded;
    head.getResult().setType(RankedTensorType::get(logitsShape, logits.getElementType()));
    if (cap)
      cap.getResult().setType(head.getResult().getType());
    loss.setNumClasses(vocab);
    recordPadding(padded);
    return success();
  }

  /// `llmc.model`'s `padded_vocab_size` (artifact metadata
  /// model.padded_vocab_size, which `llmc inspect` reports).
  void recordPadding(int64_t padded) {
    ModuleOp module = getOperation();
    Builder b(&getContext());
    NamedAttrList model;
    if (auto existing = module->getAttrOfType<DictionaryAttr>(kModelAttr))
      model.append(existing.getValue());
    model.set("padded_vocab_size", b.getI64IntegerAttr(padded));
    module->setAttr(kModelAttr, model.getDictionary(&getContext()));
  }
};

} // namespace
