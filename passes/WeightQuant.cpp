//===- WeightQuant.cpp - matmuls that read NF4 weights --------------------===//
//
// Weight-only quantized inference. A decode step is memory bound: it reads
// every weight once per token, so the bytes of the weights are its time.
// Each matmul whose weight is a parameter read by nothing else becomes an
// llm.matmul_nf4 over the weight's NF4 storage (about 4.5 bits an element
// in blocks of 64: a 4-bit level, an 8-bit absmax per block, an fp32
// scale per 256 blocks), which the kernel expands a tile at a time. The
// storage parameters are QLoRA's (passes/Utils.h addNf4Storage), so `llmc
// quantize --scheme nf4:block<N>` files load into them as they are.
//
// A weight another op also reads (the tied GPT-2 head, which llm.embedding
// reads as well) keeps its full-precision parameter: quantizing it for one
// reader would change what the other reads.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Utils.h"
#include "kernels/QuantScheme.h"

#include "mlir/IR/Builders.h"

namespace llmc {
#define GEN_PASS_DEF_WEIGHTQUANT
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

struct WeightQuantPass : llmc::impl::WeightQuantBase<WeightQuantPass> {
  using WeightQuantBase::WeightQuantBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp forward = lookupFunc(module, "forward");
    if (!forward) {
      module.emitError("weight-quant: no @forward");
      return signalPassFailure();
    }
    SmallVector<llm::MatmulOp> sites;
    forward.walk([&](llm::MatmulOp m) { sites.push_back(m); });
    for (llm::MatmulOp m : sites)
      if (failed(rewrite(forward, m)))
        return signalPassFailure();
  }

  /// The parameter `m` reads as its whole b operand, through at most one
  /// cast, with nothing else reading it (or the cast); null otherwise.
  static BlockArgument soleWeight(func::FuncOp forward, llm::MatmulOp m, llm::CastOp &castOp) {
    if (m.getTransposeA() || cast<RankedTensorType>(m.getB().getType()).getRank() != 2)
      return {};
    Value b = m.getB();
    castOp = b.getDefiningOp<llm::CastOp>();
    if (castOp) {
      if (!castOp->hasOneUse())
        return {};
      b = castOp.getOperand();
    }
    auto arg = dyn_cast<BlockArgument>(b);
    if (!arg || arg.getOwner() != &forward.getBody().front() ||
        !llm::getParamAttr(forward, arg.getArgNumber()) || !arg.hasOneUse())
      return {};
    return arg;
  }

  LogicalResult rewrite(func::FuncOp forward, llm::MatmulOp m) {
    llm::CastOp castOp;
    BlockArgument weight = soleWeight(forward, m, castOp);
    if (!weight)
      return success();
    StringRef name = llm::getParamAttr(forward, weight.getArgNumber()).getName();
    if (auto shard = forward.getArgAttrOfType<DictionaryAttr>(weight.getArgNumber(), kShardAttr);
        shard && !shardSplits(shard).empty())
      return m.emitOpError("weight-quant: '")
             << name << "' is split by tensor parallelism; NF4 weights are stored whole "
                        "(drop --mesh tp=, or --weight-quant)";
    auto type = cast<RankedTensorType>(weight.getType());
    int64_t block = this->block;
    if (block < 1 || type.getShape().back() % block != 0)
      return m.emitOpError("weight-quant: blocks of ")
             << block << " do not divide the last dimension of '" << name << "' " << type;
    Location loc = m.getLoc();
    Nf4Storage storage = addNf4Storage(forward, loc, name, type, block);
    OpBuilder b(m);
    Value y = llm::MatmulNf4Op::create(b, loc, m.getA(), storage.codes, storage.absmaxQ,
                                       storage.absmaxScale, storage.absmaxMean,
                                       b.getI64IntegerAttr(block),
                                       b.getDenseI64ArrayAttr(type.getShape()),
                                       m.getTransposeB() ? b.getUnitAttr() : UnitAttr());
    m.getResult().replaceAllUsesWith(y);
    m.erase();
    if (castOp)
      castOp.erase();
    if (failed(forward.eraseArgument(weight.getArgNumber())))
      return emitError(loc, "weight-quant: cannot remove the full-precision '") << name << "'";
    return success();
  }
};

} // namespace
