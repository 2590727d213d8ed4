//===- QuantizedStorage.cpp - a split weight's quantized storage ----------===//
//
// Part of llmc: see QuantizedStorage.h.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/QuantizedStorage.h"
#include "common/QuantScheme.h"

#include "dialects/Annotations/Annotations.h"
#include "dialects/LLM/LLMDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace llmc;

InFlightDiagnostic llmc::refuseStorage(Operation *op, StringRef pass, StringRef name,
                                       RankedTensorType local, const StorageSplit &split) {
  const bool stack = !split.stackGlobal.empty();
  ArrayRef<int64_t> global = stack ? split.stackGlobal : split.global;
  InFlightDiagnostic diag = op->emitOpError() << pass << ": ";
  if (stack)
    diag << "the experts' weights ";
  diag << "'" << name << "' "
       << (stack ? RankedTensorType::get(split.stackLocal, local.getElementType()) : local)
       << " of ";
  llvm::interleave(global, [&](int64_t d) { diag << d; }, [&] { diag << "x"; });
  return std::move(diag << ": ");
}

namespace {

/// Fills `split` (its shard and shapes set) with the levels of its shard,
/// or fails after an error on `op` when quantized storage cannot take them.
LogicalResult readLevels(Operation *op, StringRef pass, StringRef name, RankedTensorType local,
                         dist::MeshOp mesh, StorageSplit &split) {
  for (const ShardSplit &level : shardSplits(split.shard)) {
    if (level.pads()) { // a padded vocabulary: the rows of the storage too
      if (level.dim != 0)
        return refuseStorage(op, pass, name, local, split)
               << "quantized storage pads rows only; compile with --vocab-multiple 1";
      split.padded[0] = level.padTo;
      continue;
    }
    const int64_t d = level.dim;
    if (split.parts[d] != 1)
      return refuseStorage(op, pass, name, local, split)
             << "quantized storage takes one split per dimension";
    int64_t parts = level.blocks;
    for (const std::string &axis : level.axes)
      parts *= mesh ? std::max<int64_t>(1, mesh.axisSize(axis)) : 1;
    if (split.padded[d] % parts != 0)
      return refuseStorage(op, pass, name, local, split)
             << "quantized storage is split evenly only, and " << split.padded[d]
             << " is not a multiple of the " << parts << " pieces of dimension " << d;
    split.parts[d] = parts;
    split.chunks[d] = level.blocks;
    split.axes[d].assign(level.axes.begin(), level.axes.end());
  }
  return success();
}

} // namespace

FailureOr<StorageSplit> llmc::readStorageSplit(Operation *op, StringRef pass, StringRef name,
                                               RankedTensorType local, DictionaryAttr shard,
                                               dist::MeshOp mesh) {
  StorageSplit split;
  split.shard = shard;
  split.global = shardGlobalShape(shard, local);
  split.padded = split.global;
  if (split.global.size() != 2)
    return op->emitOpError() << pass << ": '" << name << "' is not a matrix";
  if (failed(readLevels(op, pass, name, local, mesh, split)))
    return failure();
  return split;
}

namespace {

/// The ranks `level` splits a dimension over: its blocks, each split over
/// the ranks of its axes.
int64_t levelParts(const ShardSplit &level, dist::MeshOp mesh) {
  int64_t parts = level.blocks;
  for (const std::string &axis : level.axes)
    parts *= mesh ? std::max<int64_t>(1, mesh.axisSize(axis)) : 1;
  return parts;
}

/// A level of the view's llmc.shard.
DictionaryAttr viewLevel(Builder &b, const ShardSplit &level, int64_t viewDim, int64_t blocks) {
  SmallVector<StringRef> axes(level.axes.begin(), level.axes.end());
  return b.getDictionaryAttr({b.getNamedAttr("axes", b.getStrArrayAttr(axes)),
                              b.getNamedAttr("dim", b.getI64IntegerAttr(viewDim)),
                              b.getNamedAttr("blocks", b.getI64IntegerAttr(blocks))});
}

} // namespace

FailureOr<StorageSplit> llmc::readExpertSplit(Operation *op, StringRef pass, StringRef name,
                                              RankedTensorType local, DictionaryAttr shard,
                                              dist::MeshOp mesh, RankedTensorType &viewLocal) {
  SmallVector<int64_t> global = shardGlobalShape(shard, local);
  if (global.size() != 3)
    return op->emitOpError() << pass << ": '" << name << "' is not a stack of matrices";
  ArrayRef<int64_t> l = local.getShape();
  StorageSplit split;
  split.stackLocal.assign(l.begin(), l.end());
  split.stackGlobal = global;
  split.global = split.padded = {global[0] * global[1], global[2]};
  viewLocal = RankedTensorType::get({l[0] * l[1], l[2]}, local.getElementType());
  // Each dimension of the stack split at most once, evenly: its experts
  // into runs of whole experts, an expert's rows within the expert (a
  // chunk of the view's rows per expert), its columns as the view's.
  std::optional<ShardSplit> experts, rows, columns;
  for (const ShardSplit &level : shardSplits(shard)) {
    if (level.pads())
      return refuseStorage(op, pass, name, viewLocal, split) << "quantized experts are not padded";
    std::optional<ShardSplit> &slot = level.dim == 0 ? experts : level.dim == 1 ? rows : columns;
    if (slot)
      return refuseStorage(op, pass, name, viewLocal, split)
             << "quantized storage takes one split per dimension";
    slot = level;
  }
  if (experts) {
    split.expertParts = levelParts(*experts, mesh);
    split.expertAxes.assign(experts->axes.begin(), experts->axes.end());
    if (experts->blocks != 1)
      return refuseStorage(op, pass, name, viewLocal, split)
             << "quantized experts split into one run of whole experts per rank, not "
             << experts->blocks << " blocks";
    if (global[0] % split.expertParts != 0)
      return refuseStorage(op, pass, name, viewLocal, split)
             << "quantized experts split evenly only, and " << global[0]
             << " experts do not split into " << split.expertParts;
  }
  if (rows) {
    split.chunks[0] = rows->blocks * global[0];
    split.parts[0] = levelParts(*rows, mesh) * global[0];
    split.axes[0].assign(rows->axes.begin(), rows->axes.end());
  }
  if (columns) {
    split.chunks[1] = columns->blocks;
    split.parts[1] = levelParts(*columns, mesh);
    split.axes[1].assign(columns->axes.begin(), columns->axes.end());
  }
  for (int d = 0; d < 2; ++d)
    if (split.padded[d] % split.parts[d] != 0)
      return refuseStorage(op, pass, name, viewLocal, split)
             << "quantized storage is split evenly only, and " << split.padded[d]
             << " is not a multiple of the " << split.parts[d] << " pieces of dimension " << d;
  // The view's levels: each expert's rows first (G chunks of the view's
  // rows), then the runs of whole experts, which the rows' split leaves
  // contiguous, then the columns.
  Builder b(op->getContext());
  SmallVector<Attribute> levels;
  if (rows)
    levels.push_back(viewLevel(b, *rows, 0, split.chunks[0]));
  if (experts) {
    split.expertLevel = static_cast<int>(levels.size());
    levels.push_back(viewLevel(b, *experts, 0, 1));
  }
  if (columns)
    levels.push_back(viewLevel(b, *columns, 1, columns->blocks));
  split.shard =
      b.getDictionaryAttr({b.getNamedAttr("global_shape", b.getDenseI64ArrayAttr(split.global)),
                           b.getNamedAttr("levels", b.getArrayAttr(levels))});
  return split;
}

DictionaryAttr StorageSplit::levelsOn(MLIRContext *context, std::array<int64_t, 2> dims,
                                      ArrayRef<int64_t> globalShape, bool perExpert) const {
  Builder b(context);
  SmallVector<Attribute> levels;
  for (auto [index, level] : llvm::enumerate(shard.getAs<ArrayAttr>("levels"))) {
    auto dict = cast<DictionaryAttr>(level);
    int64_t dim = dict.getAs<IntegerAttr>("dim").getInt();
    if (dims[dim] < 0 || (perExpert && dim == 0 && static_cast<int>(index) != expertLevel))
      continue;
    SmallVector<NamedAttribute> entries = {b.getNamedAttr("axes", dict.get("axes")),
                                           b.getNamedAttr("dim", b.getI64IntegerAttr(dims[dim])),
                                           b.getNamedAttr("blocks", dict.get("blocks"))};
    if (auto padTo = dict.getAs<IntegerAttr>("pad_to")) // rows only (readStorageSplit)
      entries.push_back(b.getNamedAttr("pad_to", padTo));
    levels.push_back(b.getDictionaryAttr(entries));
  }
  if (levels.empty())
    return DictionaryAttr();
  return b.getDictionaryAttr({b.getNamedAttr("global_shape", b.getDenseI64ArrayAttr(globalShape)),
                              b.getNamedAttr("levels", b.getArrayAttr(levels))});
}

Nf4StorageTypes llmc::flatNf4Storage(RankedTensorType weight, int64_t block, int64_t realRows) {
  MLIRContext *context = weight.getContext();
  Builder b(context);
  int64_t n = weight.getNumElements(), groups = n / block;
  int64_t real = realRows > 0 ? n / weight.getDimSize(0) * realRows : n, realGroups = real / block;
  // `padded` elements of which the first `count` are the real weight's.
  auto flat = [&](int64_t padded, int64_t count, Type element, DictionaryAttr &shard) {
    if (count < padded)
      shard = addPadLevel(context, nullptr, RankedTensorType::get({count}, element), 0, padded);
    return RankedTensorType::get({padded}, element);
  };
  Nf4StorageTypes t;
  t.codes = flat((n + 1) / 2, (real + 1) / 2, b.getI8Type(), t.codesShard);
  t.absmaxQ = flat(groups, realGroups, b.getI8Type(), t.absmaxQShard);
  t.absmaxScale = flat(quant::nf4ScaleCount(groups), quant::nf4ScaleCount(realGroups),
                       b.getF32Type(), t.absmaxScaleShard);
  return t;
}

FailureOr<Nf4StorageTypes> llmc::splitNf4Storage(Operation *op, StringRef pass, StringRef name,
                                                 RankedTensorType local, const StorageSplit &split,
                                                 int64_t block) {
  const int64_t columns = split.piece(1);
  if (block < 1 || columns % block != 0)
    return refuseStorage(op, pass, name, local, split)
           << "NF4 blocks of " << block << " do not divide its pieces of " << columns
           << " columns (each rank must hold whole blocks of the weight's NF4 storage, which "
              "is quantized whole)";
  if (columns % 2 != 0)
    return refuseStorage(op, pass, name, local, split)
           << "its pieces of " << columns << " columns are not whole bytes of NF4 codes";
  MLIRContext *context = op->getContext();
  Builder b(context);
  ArrayRef<int64_t> l = local.getShape();
  ArrayRef<int64_t> g = split.global;
  Nf4StorageTypes t;
  t.codes = RankedTensorType::get({l[0], l[1] / 2}, b.getI8Type());
  t.codesShard = split.levelsOn(context, {0, 1}, {g[0], g[1] / 2});
  t.absmaxQ = RankedTensorType::get({l[0], l[1] / block}, b.getI8Type());
  t.absmaxQShard = split.levelsOn(context, {0, 1}, {g[0], g[1] / block});
  // The whole weight's scales, on every rank (padded with the rows).
  const int64_t scales = quant::nf4ScaleCount(split.padded[0] * g[1] / block);
  const int64_t realScales = quant::nf4ScaleCount(g[0] * g[1] / block);
  t.absmaxScale = RankedTensorType::get({scales}, b.getF32Type());
  if (realScales < scales)
    t.absmaxScaleShard = addPadLevel(
        context, nullptr, RankedTensorType::get({realScales}, b.getF32Type()), 0, scales);
  return t;
}

FailureOr<Nf4StorageTypes> llmc::nf4StorageFor(Operation *op, StringRef pass, StringRef name,
                                               RankedTensorType local, DictionaryAttr shard,
                                               dist::MeshOp mesh, int64_t block,
                                               std::optional<StorageSplit> &split) {
  split.reset();
  if (shardSplits(shard).size() != shardPadding(shard).size()) {
    FailureOr<StorageSplit> read = readStorageSplit(op, pass, name, local, shard, mesh);
    if (failed(read))
      return failure();
    split = *read;
    return splitNf4Storage(op, pass, name, local, *split, block);
  }
  std::optional<int64_t> realRows = paddedRows(shard); // a padded vocabulary's head
  if (!realRows)
    return op->emitOpError() << pass << ": '" << name
                             << "' is padded along its columns, which flat NF4 storage cannot "
                                "hold; compile with --vocab-multiple 1";
  if (block < 1 || local.getShape().back() % block != 0)
    return op->emitOpError() << pass << ": blocks of " << block
                             << " do not divide the last dimension of '" << name << "' " << local;
  return flatNf4Storage(local, block, *realRows);
}

void llmc::setNf4Piece(Operation *op, const StorageSplit &split) {
  Builder b(op->getContext());
  op->setAttr("whole_shape", b.getDenseI64ArrayAttr(split.padded));
  op->setAttr("chunks", b.getDenseI64ArrayAttr({split.chunks[0], split.chunks[1]}));
  op->setAttr("piece_offset", b.getDenseI64ArrayAttr({0, 0}));
  for (int d = 0; d < 2; ++d) {
    if (split.axes[d].empty())
      continue;
    SmallVector<StringRef> axes(split.axes[d].begin(), split.axes[d].end());
    addRankOffset(op, "piece_offset", d, b.getStrArrayAttr(axes), split.piece(d));
  }
  if (!split.splitsExperts())
    return;
  // A run of whole experts: its first row's offset in the whole stack, and
  // of the rows' chunks (one per expert) only its experts'.
  SmallVector<StringRef> axes(split.expertAxes.begin(), split.expertAxes.end());
  addRankOffset(op, "piece_offset", 0, b.getStrArrayAttr(axes),
                split.padded[0] / split.expertParts);
  if (split.chunks[0] > 1)
    op->setAttr("held_chunks",
                b.getDenseI64ArrayAttr({split.chunks[0] / split.expertParts, split.chunks[1]}));
}

namespace {

/// A frozen, zero-initialised parameter `name` of `type` (split as `shard`
/// records, when not null) after the last parameter of `func` (so
/// parameters stay together).
Value addFrozenParameter(func::FuncOp func, Location loc, const std::string &name,
                         RankedTensorType type, DictionaryAttr shard = {}) {
  MLIRContext *ctx = func.getContext();
  OpBuilder b(ctx);
  auto attr = llm::ParamAttr::get(ctx, name, "zeros", APFloat(0.0), /*trainable=*/false);
  unsigned index = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (llm::getParamAttr(func, i))
      index = i + 1;
  SmallVector<NamedAttribute> attrs = {b.getNamedAttr(llm::kParamAttrName, attr)};
  if (shard)
    attrs.push_back(b.getNamedAttr(kShardAttr, shard));
  (void)func.insertArgument(index, type, b.getDictionaryAttr(attrs), loc);
  return func.getArgument(index);
}

} // namespace

Nf4Storage llmc::addNf4Storage(func::FuncOp func, Location loc, StringRef name,
                               const Nf4StorageTypes &types) {
  Nf4Storage s;
  s.codes = addFrozenParameter(func, loc, name.str() + ".qweight", types.codes, types.codesShard);
  s.absmaxQ =
      addFrozenParameter(func, loc, name.str() + ".absmax_q", types.absmaxQ, types.absmaxQShard);
  s.absmaxScale = addFrozenParameter(func, loc, name.str() + ".absmax_scale", types.absmaxScale,
                                     types.absmaxScaleShard);
  s.absmaxMean = addFrozenParameter(func, loc, name.str() + ".absmax_mean",
                                    RankedTensorType::get({}, Float32Type::get(func.getContext())));
  return s;
}

IntStorage llmc::addIntStorage(func::FuncOp func, Location loc, StringRef name,
                               const IntStorageTypes &types, bool asymmetric) {
  IntStorage s;
  s.codes = addFrozenParameter(func, loc, name.str() + ".qweight", types.codes, types.codesShard);
  s.scale = addFrozenParameter(func, loc, name.str() + ".scale", types.scale, types.scaleShard);
  if (asymmetric)
    s.zeroPoint = addFrozenParameter(
        func, loc, name.str() + ".zero_point",
        RankedTensorType::get(types.scale.getShape(), IntegerType::get(func.getContext(), 32)),
        types.scaleShard);
  return s;
}
