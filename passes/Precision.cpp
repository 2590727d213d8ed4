//===- Precision.cpp - bf16/f16 compute with fp32 master weights ----------===//
//
// Runs on @forward before autodiff: parameters stay fp32 (the optimizer's
// master copy) and are cast to the compute type where they are read; the
// casts' VJPs bring gradients back to fp32. Embedding tables are looked up in
// fp32 and the rows cast afterwards, so their scatter-add gradient stays
// fp32. Statistics inside kernels (norms, softmax, loss) are always fp32.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Utils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace llmc {
#define GEN_PASS_DEF_PRECISION
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

RankedTensorType withElement(Type type, Type element) {
  auto t = cast<RankedTensorType>(type);
  return RankedTensorType::get(t.getShape(), element);
}

bool isF32Tensor(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && t.getElementType().isF32();
}

struct PrecisionPass : llmc::impl::PrecisionBase<PrecisionPass> {
  using PrecisionBase::PrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    Type compute;
    if (computeType == "f32")
      return;
    if (computeType == "bf16")
      compute = BFloat16Type::get(ctx);
    else if (computeType == "f16")
      compute = Float16Type::get(ctx);
    else {
      module.emitError() << "precision: unknown compute type '" << computeType
                         << "' (expected f32, bf16 or f16)";
      return signalPassFailure();
    }
    func::FuncOp forward = lookupFunc(module, "forward");
    if (!forward) {
      module.emitError("precision: no @forward");
      return signalPassFailure();
    }

    OpBuilder b(ctx);
    Block &entry = forward.getBody().front();
    b.setInsertionPointToStart(&entry);
    for (BlockArgument arg : forward.getArguments()) {
      if (!llm::getParamAttr(forward, arg.getArgNumber()) || !isF32Tensor(arg.getType()))
        continue;
      auto isTableUse = [](OpOperand &use) {
        return isa<llm::EmbeddingOp>(use.getOwner()) && use.getOperandNumber() == 0;
      };
      if (llvm::all_of(arg.getUses(), isTableUse))
        continue;
      Value cast = llm::CastOp::create(b, arg.getLoc(), withElement(arg.getType(), compute), arg);
      arg.replaceUsesWithIf(cast, [&](OpOperand &use) {
        return use.getOwner() != cast.getDefiningOp() && !isTableUse(use);
      });
    }

    // Propagate the compute type through result types, inner ops first.
    forward.walk<WalkOrder::PostOrder>([&](Operation *op) {
      if (auto embedding = dyn_cast<llm::EmbeddingOp>(op)) {
        if (!isF32Tensor(embedding.getType()))
          return;
        b.setInsertionPointAfter(embedding);
        Value cast = llm::CastOp::create(b, embedding.getLoc(),
                                         withElement(embedding.getType(), compute),
                                         embedding);
        embedding.getResult().replaceAllUsesExcept(cast, cast.getDefiningOp());
        return;
      }
      if (auto block = dyn_cast<llm::BlockOp>(op)) {
        auto yield = cast<llm::YieldOp>(block.getBody().front().getTerminator());
        for (auto [result, value] : llvm::zip(block.getResults(), yield.getValues()))
          result.setType(value.getType());
        return;
      }
      if (op->getDialect() != b.getContext()->getLoadedDialect<llm::LLMDialect>() ||
          isa<llm::CastOp, llm::CrossEntropyOp, llm::FillOp>(op))
        return;
      bool lowered = llvm::any_of(op->getOperandTypes(), [&](Type t) {
        auto tensor = dyn_cast<RankedTensorType>(t);
        return tensor && tensor.getElementType() == compute;
      });
      if (!lowered)
        return;
      for (OpResult result : op->getResults()) {
        bool keepF32 = isa<llm::AttentionOp>(op) && result.getResultNumber() == 1;
        if (isF32Tensor(result.getType()) && !keepF32)
          result.setType(withElement(result.getType(), compute));
      }
    });
    if (failed(verify(forward)))
      return signalPassFailure();
  }
};

} // namespace
