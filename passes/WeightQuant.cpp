//===- WeightQuant.cpp - matmuls that read quantized weights --------------===//
//
// Weight-only quantized inference. A decode step is memory bound: it reads
// every weight once per token, so the bytes of the weights are its time.
// Each matmul whose weight is a parameter read by nothing else reads the
// weight's quantized storage instead, which its kernel expands a tile at a
// time:
//  - nf4:block<N>: llm.matmul_nf4 over QLoRA's storage (about 4.1 bits an
//    element in blocks of 64: a 4-bit level, an 8-bit absmax per block —
//    int8, or E4M3 with double-quant=fp8 — an fp32 scale per 256 blocks;
//    passes/lib/QuantizedStorage.h);
//  - int8 / int4 at tensor, channel or block granularity, symmetric or
//    not: llm.matmul_int over codes, an fp32 scale per group and,
//    asymmetric, an int32 zero point per group (addIntStorage);
//  - fp8 (E4M3) at any granularity, symmetric: llm.matmul_int {fp8} over
//    one E4M3 byte per element and an fp32 scale per group.
// The storage parameters have the names and layout `llmc quantize
// --scheme <scheme>` writes, so its file loads into them as it is.
//
// Under tensor parallelism the storage takes the weight's split
// (passes/lib/QuantizedStorage.h): the codes become [rows, bytes per row] and
// the scales [rows, groups per row] (blocks), [rows] or [columns]
// (channels) or [1] (the tensor), each split along the dimensions of the
// weight it indexes (a per-row scale is whole on every rank of a column
// split); NF4's absmax levels are [rows, blocks per row], split alike, and
// its double-quantized scales, which each cover 256 blocks of the whole
// weight across rows, are whole on every rank, matmul_nf4 finding a
// block's through where its piece lies. The flat file tensors load into
// them reshaped, so one file serves every layout.
//
// A weight another op also reads (the tied GPT-2 head, which llm.embedding
// reads as well) keeps its full-precision parameter: quantizing it for one
// reader would change what the other reads.
//
// A mixture of experts' llm.grouped_matmul over stacked weights [G, K, F]
// (or [G, F, K]) becomes llm.grouped_matmul_int / grouped_matmul_nf4: each
// expert's slice quantized as a dense weight of its shape is, with its own
// scales (per expert and output channel, per block, or one per expert),
// stored expert after expert — `llmc quantize`'s `:stacked` scheme; NF4's
// blocks are per expert anyway, and its storage is the stack's, flat. The
// router's matmul is a dense weight site like any other, but its logits
// pick the experts, so it stays in full precision: quantizing it would
// change which experts run, not only what they compute. Under tensor
// parallelism the stack's storage is split as the 2-D view [G·A, B]'s
// (passes/lib/QuantizedStorage.h): each expert's rows (gate and up,
// column-parallel) split within the expert, its columns (down,
// row-parallel) split in whole bytes and blocks; the stack's NF4
// double-quantized scales whole on every rank, grouped_matmul_nf4 finding
// each block's through where its piece lies. Experts split by expert
// parallelism are refused: a generation step takes tensor parallelism only.
//
//===----------------------------------------------------------------------===//

#include "common/QuantScheme.h"
#include "dialects/Annotations/Annotations.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/QATScheme.h"
#include "passes/lib/QuantizedStorage.h"
#include "passes/lib/ShardAttr.h"
#include "passes/lib/WeightSites.h"

#include "dialects/Dist/DistDialect.h"
#include "passes/lib/Layout.h"

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
    std::optional<quant::AbsmaxFormat> absmaxFormat = parseDoubleQuant(doubleQuant, error);
    if (!absmaxFormat) {
      module.emitError("weight-quant: bad double-quant ") << error;
      return signalPassFailure();
    }
    if (*absmaxFormat != quant::AbsmaxFormat::Int8 && spec_.format != "nf4") {
      module.emitError() << "weight-quant: double-quant=" << doubleQuant
                         << " is for nf4 storage (its absmax levels), not " << scheme;
      return signalPassFailure();
    }
    absmaxFormat_ = *absmaxFormat;
    // Matmuls reading a parameter; rewrite() takes those whose weight
    // nothing else reads.
    SmallVector<llm::MatmulOp> sites;
    for (const WeightSite &site : findWeightSites(forward))
      if (!site.embedding && site.weight && !feedsRouter(site.op->getResult(0)))
        sites.push_back(cast<llm::MatmulOp>(site.op));
    for (llm::MatmulOp m : sites)
      if (failed(rewrite(forward, m)))
        return signalPassFailure();
    SmallVector<llm::GroupedMatmulOp> experts;
    forward.walk([&](llm::GroupedMatmulOp g) { experts.push_back(g); });
    for (llm::GroupedMatmulOp g : experts)
      if (failed(rewriteExperts(forward, g)))
        return signalPassFailure();
  }

  /// The parameter `weights` reads (through at most one cast, nothing else
  /// reading either), as soleWeight finds a matmul's.
  static BlockArgument soleParameter(func::FuncOp forward, Value weights, llm::CastOp &castOp) {
    castOp = weights.getDefiningOp<llm::CastOp>();
    if (castOp) {
      if (!castOp->hasOneUse())
        return {};
      weights = castOp.getOperand();
    }
    auto arg = dyn_cast<BlockArgument>(weights);
    if (!arg || arg.getOwner() != &forward.getBody().front() ||
        !llm::getParamAttr(forward, arg.getArgNumber()) || !arg.hasOneUse())
      return {};
    return arg;
  }

  /// `g` over its stacked weights' quantized storage, each expert's slice
  /// quantized as a dense weight of the slice's shape.
  LogicalResult rewriteExperts(func::FuncOp forward, llm::GroupedMatmulOp g) {
    llm::CastOp castOp;
    BlockArgument weight = soleParameter(forward, g.getWeights(), castOp);
    if (!weight)
      return success();
    StringRef name = llm::getParamAttr(forward, weight.getArgNumber()).getName();
    auto shard = forward.getArgAttrOfType<DictionaryAttr>(weight.getArgNumber(), kShardAttr);
    auto type = cast<RankedTensorType>(weight.getType());
    // A channel axis left out is each expert's output channel.
    quant::Scheme s =
        kernelScheme(spec_.attr(g.getContext(), /*defaultAxis=*/g.getTransposeB() ? 0 : 1));
    std::optional<StorageSplit> split;
    RankedTensorType view; // the storage's 2-D view of this rank's piece
    if (!shardSplits(shard).empty()) {
      FailureOr<StorageSplit> read =
          readExpertSplit(g, "weight-quant", name, type, shard, mesh(), view);
      if (failed(read))
        return failure();
      split = *read;
    } else if (failed(checkWholeExperts(g, name, type, s))) {
      return failure();
    }
    FailureOr<Value> y = s.format == quant::Format::Nf4
                             ? nf4Experts(forward, g, name, type, view, split, s)
                             : intExperts(forward, g, name, type, view, split, s);
    if (failed(y))
      return failure();
    g.getResult().replaceAllUsesWith(*y);
    Location loc = g.getLoc();
    g.erase();
    if (castOp)
      castOp.erase();
    if (failed(forward.eraseArgument(weight.getArgNumber())))
      return emitError(loc, "weight-quant: cannot remove the full-precision '") << name << "'";
    return success();
  }

  /// Whether a whole stack `type` takes scheme `s`: blocks that divide each
  /// expert's rows, 4-bit codes that fill whole bytes per expert (a split
  /// stack's pieces are checked with its split).
  static LogicalResult checkWholeExperts(llm::GroupedMatmulOp g, StringRef name,
                                         RankedTensorType type, const quant::Scheme &s) {
    ArrayRef<int64_t> w = type.getShape();
    if (s.granularity == quant::Granularity::Block && (s.block < 1 || w.back() % s.block != 0))
      return g.emitOpError("weight-quant: blocks of ")
             << s.block << " do not divide the last dimension of '" << name << "' " << type;
    const bool nibbles = s.format == quant::Format::Int4 || s.format == quant::Format::Nf4;
    if (nibbles && (w[1] * w[2]) % 2 != 0)
      return g.emitOpError("weight-quant: each expert of '")
             << name << "' " << type << " has an odd number of 4-bit codes (whole bytes only)";
    return success();
  }

  /// llm.grouped_matmul_nf4 over the stack's NF4 storage: flat when whole;
  /// split, the storage of the 2-D view `view` of this rank's piece.
  FailureOr<Value> nf4Experts(func::FuncOp forward, llm::GroupedMatmulOp g, StringRef name,
                              RankedTensorType type, RankedTensorType view,
                              const std::optional<StorageSplit> &split, const quant::Scheme &s) {
    FailureOr<Nf4StorageTypes> types = flatNf4Storage(type, s.block);
    if (split)
      types = splitNf4Storage(g, "weight-quant", name, view, *split, s.block);
    if (failed(types))
      return failure();
    OpBuilder b(g);
    Nf4Storage storage = addNf4Storage(forward, g.getLoc(), name, *types);
    auto product = llm::GroupedMatmulNf4Op::create(
        b, g.getLoc(), g.getX(), g.getOffsets(), storage.codes, storage.absmaxQ,
        storage.absmaxScale, storage.absmaxMean, b.getI64IntegerAttr(s.block),
        b.getDenseI64ArrayAttr(type.getShape()), g.getTransposeB() ? b.getUnitAttr() : UnitAttr(),
        DenseI64ArrayAttr(), DenseI64ArrayAttr(), DenseI64ArrayAttr(), DenseI64ArrayAttr(),
        b.getStringAttr(quant::absmaxFormatName(absmaxFormat_)));
    if (split)
      setNf4Piece(product, *split);
    return product.getResult();
  }

  /// llm.grouped_matmul_int over each expert's int8/int4/fp8 storage,
  /// expert after expert: flat when whole; split, the storage of the 2-D
  /// view `view` of this rank's piece.
  FailureOr<Value> intExperts(func::FuncOp forward, llm::GroupedMatmulOp g, StringRef name,
                              RankedTensorType type, RankedTensorType view,
                              const std::optional<StorageSplit> &split, const quant::Scheme &s) {
    const bool fp8 = s.format == quant::Format::Fp8E4M3;
    const int bits = s.format == quant::Format::Int4 ? 4 : 8;
    ArrayRef<int64_t> w = type.getShape();
    FailureOr<IntStorageTypes> types = IntStorageTypes();
    if (split) {
      types = splitStorage(g, name, view, *split, s, bits, /*experts=*/w[0]);
    } else {
      const int64_t slice = w[1] * w[2], groups = quant::groupCount(s, {w[1], w[2]});
      Builder b(g.getContext());
      types->codes = RankedTensorType::get({w[0] * (bits == 8 ? slice : slice / 2)}, b.getI8Type());
      types->scale = RankedTensorType::get({w[0] * groups}, b.getF32Type());
    }
    if (failed(types))
      return failure();
    OpBuilder b(g);
    IntStorage storage = addIntStorage(forward, g.getLoc(), name, *types, !s.symmetric);
    IntegerAttr block, axis;
    if (s.granularity == quant::Granularity::Block)
      block = b.getI64IntegerAttr(s.block);
    if (s.granularity == quant::Granularity::Channel)
      axis = b.getI64IntegerAttr(s.axis);
    return llm::GroupedMatmulIntOp::create(
               b, g.getLoc(), g.getX(), g.getOffsets(), storage.codes, storage.scale,
               storage.zeroPoint, b.getI64IntegerAttr(bits), fp8 ? b.getUnitAttr() : UnitAttr(),
               block, axis, b.getDenseI64ArrayAttr(w),
               g.getTransposeB() ? b.getUnitAttr() : UnitAttr())
        .getResult();
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
    // (A split weight's pieces are checked with its split.)
    if (!shard && s.granularity == quant::Granularity::Block &&
        (s.block < 1 || type.getShape().back() % s.block != 0))
      return m.emitOpError("weight-quant: blocks of ")
             << s.block << " do not divide the last dimension of '" << name << "' " << type;
    FailureOr<Value> y = s.format == quant::Format::Nf4 ? nf4Product(forward, m, name, type, shard, s)
                                                         : intProduct(forward, m, name, type, shard, s);
    if (failed(y))
      return failure();
    m.getResult().replaceAllUsesWith(*y);
    Location loc = m.getLoc();
    m.erase();
    if (castOp)
      castOp.erase();
    if (failed(forward.eraseArgument(weight.getArgNumber())))
      return emitError(loc, "weight-quant: cannot remove the full-precision '") << name << "'";
    return success();
  }

  /// llm.matmul_nf4 over the NF4 storage of `m`'s weight: flat when whole
  /// (a padded vocabulary's rows padded at its end), split with the weight
  /// under tensor parallelism.
  FailureOr<Value> nf4Product(func::FuncOp forward, llm::MatmulOp m, StringRef name,
                              RankedTensorType type, DictionaryAttr shard,
                              const quant::Scheme &s) {
    std::optional<StorageSplit> split;
    FailureOr<Nf4StorageTypes> types =
        nf4StorageFor(m, "weight-quant", name, type, shard, mesh(), s.block, split);
    if (failed(types))
      return failure();
    OpBuilder b(m);
    Nf4Storage storage = addNf4Storage(forward, m.getLoc(), name, *types);
    auto product = llm::MatmulNf4Op::create(
        b, m.getLoc(), m.getA(), storage.codes, storage.absmaxQ, storage.absmaxScale,
        storage.absmaxMean, b.getI64IntegerAttr(s.block), b.getDenseI64ArrayAttr(type.getShape()),
        m.getTransposeB() ? b.getUnitAttr() : UnitAttr(), DenseI64ArrayAttr(), DenseI64ArrayAttr(),
        DenseI64ArrayAttr(), b.getStringAttr(quant::absmaxFormatName(absmaxFormat_)));
    if (split)
      setNf4Piece(product, *split);
    return product.getResult();
  }

  /// llm.matmul_int over the int8/int4/fp8 storage of `m`'s weight.
  FailureOr<Value> intProduct(func::FuncOp forward, llm::MatmulOp m, StringRef name,
                              RankedTensorType type, DictionaryAttr shard,
                              const quant::Scheme &s) {
    const bool fp8 = s.format == quant::Format::Fp8E4M3;
    const int bits = s.format == quant::Format::Int4 ? 4 : 8;
    FailureOr<IntStorageTypes> types = wholeStorage(type, s, bits);
    if (shard) {
      FailureOr<StorageSplit> split =
          readStorageSplit(m, "weight-quant", name, type, shard, mesh());
      if (failed(split))
        return failure();
      types = splitStorage(m, name, type, *split, s, bits);
    }
    if (failed(types))
      return failure();
    OpBuilder b(m);
    IntStorage storage = addIntStorage(forward, m.getLoc(), name, *types, !s.symmetric);
    IntegerAttr block, axis;
    if (s.granularity == quant::Granularity::Block)
      block = b.getI64IntegerAttr(s.block);
    if (s.granularity == quant::Granularity::Channel)
      axis = b.getI64IntegerAttr(s.axis);
    return llm::MatmulIntOp::create(b, m.getLoc(), m.getA(), storage.codes, storage.scale,
                                    storage.zeroPoint, b.getI64IntegerAttr(bits),
                                    fp8 ? b.getUnitAttr() : UnitAttr(), block, axis,
                                    b.getDenseI64ArrayAttr(type.getShape()),
                                    m.getTransposeB() ? b.getUnitAttr() : UnitAttr())
        .getResult();
  }

  dist::MeshOp mesh() { return getOperation().lookupSymbol<dist::MeshOp>(kMeshName); }

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

  /// Storage of a weight split as `split` says (`local` is this rank's
  /// piece): 2-D codes and scales along the weight's dimensions, split
  /// with it. Evenly split weights only, in whole bytes and whole blocks.
  /// A stack of `experts` (> 0) is its 2-D view's (readExpertSplit), with
  /// per-column scales and the tensor's one per expert, split along the
  /// experts with them under expert parallelism, else whole.
  static FailureOr<IntStorageTypes> splitStorage(Operation *op, StringRef name,
                                                 RankedTensorType local, const StorageSplit &split,
                                                 const quant::Scheme &s, int bits,
                                                 int64_t experts = 0) {
    // Columns of one piece of the split of dimension 1 (all columns when
    // the columns are not split).
    const int64_t pieceColumns = split.piece(1);
    if (bits == 4 && pieceColumns % 2 != 0)
      return refuseStorage(op, "weight-quant", name, local, split)
             << "int4 rows split into pieces of " << pieceColumns << " columns, not whole bytes";
    if (s.granularity == quant::Granularity::Block && pieceColumns % s.block != 0)
      return refuseStorage(op, "weight-quant", name, local, split)
             << "blocks of " << s.block << " do not divide its pieces of " << pieceColumns
             << " columns";
    MLIRContext *context = op->getContext();
    Builder b(context);
    ArrayRef<int64_t> l = local.getShape(), global = split.global;
    const int64_t perByte = bits == 8 ? 1 : 2;
    IntStorageTypes t;
    t.codes = RankedTensorType::get({l[0], l[1] / perByte}, b.getI8Type());
    t.codesShard = split.levelsOn(context, {0, 1}, {global[0], global[1] / perByte});
    SmallVector<int64_t> scaleLocal, scaleGlobal;
    std::array<int64_t, 2> scaleDims = {-1, -1};
    bool perExpert = false; // scales indexed by expert along their dimension 0
    switch (s.granularity) {
    case quant::Granularity::Block:
      scaleLocal = {l[0], l[1] / s.block}, scaleGlobal = {global[0], global[1] / s.block};
      scaleDims = {0, 1};
      break;
    case quant::Granularity::Channel:
      if (experts > 0 && s.axis == 1) { // each expert's columns: [G, columns]
        scaleLocal = {experts, l[1]}, scaleGlobal = {split.stackGlobal[0], global[1]};
        scaleDims = {0, 1};
        perExpert = true;
        break;
      }
      scaleLocal = {l[s.axis]}, scaleGlobal = {global[s.axis]};
      scaleDims[s.axis] = 0;
      break;
    case quant::Granularity::Tensor:
      scaleLocal = scaleGlobal = {std::max<int64_t>(experts, 1)};
      if (experts > 0) { // one per expert: [G]
        scaleGlobal = {split.stackGlobal[0]};
        scaleDims[0] = 0;
        perExpert = true;
      }
      break;
    }
    t.scale = RankedTensorType::get(scaleLocal, b.getF32Type());
    t.scaleShard = split.levelsOn(context, scaleDims, scaleGlobal, perExpert);
    return t;
  }

  QATSchemeSpec spec_;
  quant::AbsmaxFormat absmaxFormat_ = quant::AbsmaxFormat::Int8;
};

} // namespace
