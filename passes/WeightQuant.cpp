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
// Under tensor parallelism the int8/int4 storage takes the weight's split:
// the codes become [rows, bytes per row] and the scales [rows, groups per
// row] (blocks), [rows] or [columns] (channels) or [1] (the tensor), each
// split along the dimensions of the weight it indexes (a per-row scale is
// whole on every rank of a column split). The flat file tensors load into
// them reshaped. NF4 is not split: its double-quantized scales each cover
// 256 blocks, across rows.
//
// A weight another op also reads (the tied GPT-2 head, which llm.embedding
// reads as well) keeps its full-precision parameter: quantizing it for one
// reader would change what the other reads.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/QATScheme.h"
#include "passes/Utils.h"
#include "common/QuantScheme.h"

#include "dialects/Dist/DistDialect.h"
#include "passes/Layout.h"

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
    auto shard = forward.getArgAttrOfType<DictionaryAttr>(weight.getArgNumber(), kShardAttr);
    if (shardSplits(shard).empty())
      shard = nullptr;
    auto type = cast<RankedTensorType>(weight.getType());
    // A channel axis left out is the weight's output channel.
    quant::Scheme s =
        kernelScheme(spec_.attr(m.getContext(), /*defaultAxis=*/m.getTransposeB() ? 0 : 1));
    std::optional<int64_t> realRows = paddedRows(shard); // a padded vocabulary's head
    if (shard && s.format == quant::Format::Nf4 &&
        shardSplits(shard).size() != shardPadding(shard).size())
      return m.emitOpError("weight-quant: '")
             << name << "' is split by tensor parallelism, and NF4 storage is not (each "
                        "double-quantized scale covers 256 blocks, across rows); use an int8 or "
                        "int4 scheme, or drop --mesh tp=";
    if (s.format == quant::Format::Nf4 && !realRows)
      return m.emitOpError("weight-quant: '")
             << name << "' is padded along its columns, which flat NF4 storage cannot hold; "
                        "compile with --vocab-multiple 1";
    // (A split weight's pieces are checked below.)
    if (!shard && s.granularity == quant::Granularity::Block &&
        (s.block < 1 || type.getShape().back() % s.block != 0))
      return m.emitOpError("weight-quant: blocks of ")
             << s.block << " do not divide the last dimension of '" << name << "' " << type;
    Location loc = m.getLoc();
    OpBuilder b(m);
    UnitAttr transposeB = m.getTransposeB() ? b.getUnitAttr() : UnitAttr();
    DenseI64ArrayAttr shape = b.getDenseI64ArrayAttr(type.getShape());
    Value y;
    if (s.format == quant::Format::Nf4) {
      Nf4Storage storage = addNf4Storage(forward, loc, name, type, s.block, *realRows);
      y = llm::MatmulNf4Op::create(b, loc, m.getA(), storage.codes, storage.absmaxQ,
                                   storage.absmaxScale, storage.absmaxMean,
                                   b.getI64IntegerAttr(s.block), shape, transposeB);
    } else {
      const int bits = s.format == quant::Format::Int8 ? 8 : 4;
      FailureOr<IntStorageTypes> types =
          shard ? splitStorage(m, name, type, shard, s, bits) : wholeStorage(type, s, bits);
      if (failed(types))
        return failure();
      IntStorage storage = addIntStorage(forward, loc, name, *types, !s.symmetric);
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

  /// Storage of a whole weight: flat, as the file holds it.
  static IntStorageTypes wholeStorage(RankedTensorType weight, const quant::Scheme &s, int bits) {
    Builder b(weight.getContext());
    int64_t n = weight.getNumElements();
    IntStorageTypes t;
    t.codes = RankedTensorType::get({bits == 8 ? n : (n + 1) / 2}, b.getI8Type());
    t.scale = RankedTensorType::get({quant::groupCount(s, vec(weight.getShape()))}, b.getF32Type());
    return t;
  }

  /// Storage of a weight split as `shard` records (`local` is this rank's
  /// piece): 2-D codes and scales along the weight's dimensions, split
  /// with it. Evenly split weights only, in whole bytes and whole blocks.
  FailureOr<IntStorageTypes> splitStorage(llm::MatmulOp m, StringRef name, RankedTensorType local,
                                          DictionaryAttr shard, const quant::Scheme &s,
                                          int bits) {
    Builder b(m.getContext());
    SmallVector<int64_t> global = shardGlobalShape(shard, local);
    auto mesh = getOperation().lookupSymbol<dist::MeshOp>(kMeshName);
    auto refuse = [&](const Twine &why) {
      return m.emitOpError("weight-quant: '") << name << "' " << local << " of " << global[0]
                                              << "x" << global[1] << ": " << why;
    };
    // Columns of one piece of the split of dimension 1 (all columns when
    // the columns are not split).
    int64_t pieceColumns = global[1];
    SmallVector<ShardSplit> splits = shardSplits(shard);
    SmallVector<int64_t> sizes(global); // as the levels so far leave the weight
    for (const ShardSplit &split : splits) {
      if (split.pads()) { // a padded vocabulary: the rows of the codes and scales too
        if (split.dim != 0)
          return refuse("quantized storage pads rows only; compile with --vocab-multiple 1");
        sizes[0] = split.padTo;
        continue;
      }
      int64_t parts = split.blocks;
      for (const std::string &axis : split.axes)
        parts *= mesh ? std::max<int64_t>(1, mesh.axisSize(axis)) : 1;
      if (sizes[split.dim] % parts != 0)
        return refuse("quantized storage is split evenly only, and " +
                      Twine(sizes[split.dim]) + " is not a multiple of the " + Twine(parts) +
                      " pieces of dimension " + Twine(split.dim));
      if (llvm::count_if(splits, [&](const ShardSplit &o) {
            return o.dim == split.dim && !o.pads();
          }) > 1)
        return refuse("quantized storage takes one split per dimension");
      if (split.dim == 1)
        pieceColumns = global[1] / parts;
      sizes[split.dim] /= parts;
    }
    if (bits == 4 && pieceColumns % 2 != 0)
      return refuse("int4 rows split into pieces of " + Twine(pieceColumns) +
                    " columns, not whole bytes");
    if (s.granularity == quant::Granularity::Block && pieceColumns % s.block != 0)
      return refuse("blocks of " + Twine(s.block) + " do not divide its pieces of " +
                    Twine(pieceColumns) + " columns");
    // The split levels, each kept (on `dims[level.dim]`) or dropped (-1).
    auto levelsOn = [&](std::array<int64_t, 2> dims, ArrayRef<int64_t> globalShape) {
      SmallVector<Attribute> levels;
      for (Attribute level : shard.getAs<ArrayAttr>("levels")) {
        auto dict = cast<DictionaryAttr>(level);
        int64_t dim = dict.getAs<IntegerAttr>("dim").getInt();
        if (dims[dim] < 0)
          continue;
        SmallVector<NamedAttribute> entries = {
            b.getNamedAttr("axes", dict.get("axes")),
            b.getNamedAttr("dim", b.getI64IntegerAttr(dims[dim])),
            b.getNamedAttr("blocks", dict.get("blocks"))};
        if (auto padTo = dict.getAs<IntegerAttr>("pad_to")) // rows, on dimension 0 (above)
          entries.push_back(b.getNamedAttr("pad_to", padTo));
        levels.push_back(b.getDictionaryAttr(entries));
      }
      if (levels.empty())
        return DictionaryAttr();
      return b.getDictionaryAttr({b.getNamedAttr("global_shape", b.getDenseI64ArrayAttr(globalShape)),
                                  b.getNamedAttr("levels", b.getArrayAttr(levels))});
    };
    ArrayRef<int64_t> l = local.getShape();
    const int64_t perByte = bits == 8 ? 1 : 2;
    IntStorageTypes t;
    SmallVector<int64_t> codesGlobal = {global[0], global[1] / perByte};
    t.codes = RankedTensorType::get({l[0], l[1] / perByte}, b.getI8Type());
    t.codesShard = levelsOn({0, 1}, codesGlobal);
    SmallVector<int64_t> scaleLocal, scaleGlobal;
    std::array<int64_t, 2> scaleDims = {-1, -1};
    switch (s.granularity) {
    case quant::Granularity::Block:
      scaleLocal = {l[0], l[1] / s.block}, scaleGlobal = {global[0], global[1] / s.block};
      scaleDims = {0, 1};
      break;
    case quant::Granularity::Channel:
      scaleLocal = {l[s.axis]}, scaleGlobal = {global[s.axis]};
      scaleDims[s.axis] = 0;
      break;
    case quant::Granularity::Tensor:
      scaleLocal = scaleGlobal = {1};
      break;
    }
    t.scale = RankedTensorType::get(scaleLocal, b.getF32Type());
    t.scaleShard = levelsOn(scaleDims, scaleGlobal);
    return t;
  }

  QATSchemeSpec spec_;
};

} // namespace
