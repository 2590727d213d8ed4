//===- Precision.cpp - bf16/f16 compute with fp32 master weights ----------===//
//
// Runs on @forward before autodiff, with the storage scheme of the ZeRO
// paper's mixed-precision training: parameters (and so their gradients) are
// stored in the compute type, and the optimizer pass keeps an fp32 master
// copy of each trainable one with the AdamW moments, updates the master and
// rounds it into the parameter. Per parameter that is 2 + 2 bytes of
// parameter and gradient and 12 bytes of optimizer state (master, m, v) —
// the 16Ψ that ZeRO then shards. Statistics inside kernels (norms, softmax,
// loss) are always accumulated in fp32.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"

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
    // Parameters are stored in the compute type; the optimizer pass gives
    // each trainable one an fp32 master copy.
    SmallVector<Type> argTypes(forward.getArgumentTypes());
    for (BlockArgument arg : forward.getArguments()) {
      if (!llm::getParamAttr(forward, arg.getArgNumber()) || !isF32Tensor(arg.getType()))
        continue;
      arg.setType(withElement(arg.getType(), compute));
      argTypes[arg.getArgNumber()] = arg.getType();
    }
    forward.setFunctionType(b.getFunctionType(argTypes, forward.getResultTypes()));

    // Propagate the compute type through result types, inner ops first.
    forward.walk<WalkOrder::PostOrder>([&](Operation *op) {
      if (auto block = dyn_cast<llm::BlockOp>(op)) {
        auto yield = cast<llm::YieldOp>(block.getBody().front().getTerminator());
        for (auto [result, value] : llvm::zip(block.getResults(), yield.getValues()))
          result.setType(value.getType());
        return;
      }
      if (op->getDialect() != b.getContext()->getLoadedDialect<llm::LLMDialect>() ||
          op->hasTrait<llmc::trait::KeepsPrecision>())
        return;
      bool lowered = llvm::any_of(op->getOperandTypes(), [&](Type t) {
        auto tensor = dyn_cast<RankedTensorType>(t);
        return tensor && tensor.getElementType() == compute;
      });
      if (!lowered)
        return;
      for (OpResult result : op->getResults()) {
        bool keepF32 =
            op->hasTrait<llmc::trait::F32TrailingResults>() && result.getResultNumber() > 0;
        if (isF32Tensor(result.getType()) && !keepF32)
          result.setType(withElement(result.getType(), compute));
      }
    });
    if (failed(verify(forward)))
      return signalPassFailure();
  }
};

} // namespace
