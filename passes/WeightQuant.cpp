//===- WeightQuant.cpp - matmuls that read quantized weights --------------===//
//
// Weight-only quantized inference. A decode step is memory bound: it reads
// every weight once per token, so the bytes of the weights are its time.
// Each matmul whose weight is a parameter read by nothing else reads the
// weight's quantized storage instead, which its kernel expands a tile at a
// time:
//  - nf4:block<N>: llm.matmul_nf4 over QLoRA's storage (about 4.1 bits an
//    element in blocks of 64: a 4-bit level, an 8-bit absmax per block, an
//    fp32 scale per 256 blocks; passes/Utils.h addNf4Storage);
//  - int8 / int4 at tensor, channel or block granularity, symmetric or
//    not: llm.matmul_int over codes, an fp32 scale per group and,
//    asymmetric, an int32 zero point per group (addIntStorage).
// The storage parameters have the names and layout `llmc quantize
// --scheme <scheme>` writes, so its file loads into them as it is.
//
// A weight another op also reads (the tied GPT-2 head, which llm.embedding
// reads as well) keeps its full-precision parameter: quantizing it for one
// reader would change what the other reads.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/QATScheme.h"
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
    std::string error;
    std::optional<QATSchemeSpec> spec = parseWeightOnlyScheme(scheme, error);
    if (!spec) {
      module.emitError("weight-quant: ") << error;
      return signalPassFailure();
    }
    spec_ = *spec;
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
             << name << "' is split by tensor parallelism; quantized weights are stored whole "
                        "(drop --mesh tp=, or --weight-quant)";
    auto type = cast<RankedTensorType>(weight.getType());
    // A channel axis left out is the weight's output channel.
    quant::Scheme s =
        kernelScheme(spec_.attr(m.getContext(), /*defaultAxis=*/m.getTransposeB() ? 0 : 1));
    if (s.granularity == quant::Granularity::Block &&
        (s.block < 1 || type.getShape().back() % s.block != 0))
      return m.emitOpError("weight-quant: blocks of ")
             << s.block << " do not divide the last dimension of '" << name << "' " << type;
    Location loc = m.getLoc();
    OpBuilder b(m);
    UnitAttr transposeB = m.getTransposeB() ? b.getUnitAttr() : UnitAttr();
    DenseI64ArrayAttr shape = b.getDenseI64ArrayAttr(type.getShape());
    Value y;
    if (s.format == quant::Format::Nf4) {
      Nf4Storage storage = addNf4Storage(forward, loc, name, type, s.block);
      y = llm::MatmulNf4Op::create(b, loc, m.getA(), storage.codes, storage.absmaxQ,
                                   storage.absmaxScale, storage.absmaxMean,
                                   b.getI64IntegerAttr(s.block), shape, transposeB);
    } else {
      const int bits = s.format == quant::Format::Int8 ? 8 : 4;
      IntStorage storage = addIntStorage(forward, loc, name, type, bits,
                                         quant::groupCount(s, vec(type.getShape())),
                                         !s.symmetric);
      IntegerAttr block, axis;
      if (s.granularity == quant::Granularity::Block)
        block = b.getI64IntegerAttr(s.block);
      if (s.granularity == quant::Granularity::Channel)
        axis = b.getI64IntegerAttr(s.axis);
      y = llm::MatmulIntOp::create(b, loc, m.getA(), storage.codes, storage.scale,
                                   storage.zeroPoint, b.getI64IntegerAttr(bits), block, axis,
                                   shape, transposeB);
    }
    m.getResult().replaceAllUsesWith(y);
    m.erase();
    if (castOp)
      castOp.erase();
    if (failed(forward.eraseArgument(weight.getArgNumber())))
      return emitError(loc, "weight-quant: cannot remove the full-precision '") << name << "'";
    return success();
  }

  static std::vector<int64_t> vec(ArrayRef<int64_t> a) { return {a.begin(), a.end()}; }

  QATSchemeSpec spec_;
};

} // namespace
