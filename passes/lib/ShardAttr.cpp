//===- ShardAttr.cpp - the llmc.shard attribute ---------------------------===//
//
// Part of llmc: see ShardAttr.h.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/ShardAttr.h"

#include "dialects/Dist/DistDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace llmc;

/// `existing` (or, without it, a tensor of `current`'s global shape) with
/// one more level.
static DictionaryAttr appendLevel(Builder &b, DictionaryAttr existing, RankedTensorType current,
                                  ArrayRef<NamedAttribute> level) {
  SmallVector<Attribute> levels;
  Attribute global = b.getDenseI64ArrayAttr(current.getShape());
  if (existing) {
    global = existing.get("global_shape");
    if (auto old = existing.getAs<ArrayAttr>("levels"))
      levels.append(old.begin(), old.end());
  }
  levels.push_back(b.getDictionaryAttr(level));
  return b.getDictionaryAttr(
      {b.getNamedAttr("global_shape", global), b.getNamedAttr("levels", b.getArrayAttr(levels))});
}

DictionaryAttr llmc::addShardLevel(MLIRContext *context, DictionaryAttr existing,
                                   RankedTensorType current, ArrayAttr axes, int64_t dim,
                                   int64_t blocks) {
  Builder b(context);
  return appendLevel(b, existing, current,
                     {b.getNamedAttr("axes", axes), b.getNamedAttr("dim", b.getI64IntegerAttr(dim)),
                      b.getNamedAttr("blocks", b.getI64IntegerAttr(blocks))});
}

DictionaryAttr llmc::addPadLevel(MLIRContext *context, DictionaryAttr existing,
                                 RankedTensorType current, int64_t dim, int64_t padTo) {
  Builder b(context);
  return appendLevel(b, existing, current,
                     {b.getNamedAttr("axes", b.getArrayAttr({})),
                      b.getNamedAttr("dim", b.getI64IntegerAttr(dim)),
                      b.getNamedAttr("blocks", b.getI64IntegerAttr(1)),
                      b.getNamedAttr("pad_to", b.getI64IntegerAttr(padTo))});
}

void llmc::addRankOffset(Operation *op, StringRef attr, int64_t index, ArrayAttr axes,
                         int64_t stride) {
  MLIRContext *context = op->getContext();
  SmallVector<Attribute> terms;
  if (auto existing = op->getAttrOfType<ArrayAttr>(dist::DistDialect::kRankOffsetsAttrName))
    terms.append(existing.begin(), existing.end());
  terms.push_back(dist::RankOffsetAttr::get(context, FlatSymbolRefAttr::get(context, "mesh"),
                                            StringAttr::get(context, attr), index, axes, stride));
  op->setAttr(dist::DistDialect::kRankOffsetsAttrName, ArrayAttr::get(context, terms));
}

void llmc::markDropoutPiece(Operation *dropout, RankedTensorType before, int64_t dim,
                            ArrayAttr axes, int64_t parts) {
  Builder b(dropout->getContext());
  if (!dropout->hasAttr("global_shape")) {
    dropout->setAttr("global_shape", b.getDenseI64ArrayAttr(before.getShape()));
    dropout->setAttr("offsets", b.getDenseI64ArrayAttr(SmallVector<int64_t>(before.getRank(), 0)));
  }
  addRankOffset(dropout, "offsets", dim, axes, before.getDimSize(dim) / parts);
}

SmallVector<ShardSplit> llmc::shardSplits(DictionaryAttr shard) {
  SmallVector<ShardSplit> splits;
  if (!shard)
    return splits;
  auto global = dyn_cast_or_null<DenseI64ArrayAttr>(shard.get("global_shape"));
  if (auto levels = shard.getAs<ArrayAttr>("levels"))
    for (auto level : levels.getAsRange<DictionaryAttr>()) {
      ShardSplit split;
      split.dim = level.getAs<IntegerAttr>("dim").getInt();
      split.blocks = level.getAs<IntegerAttr>("blocks").getInt();
      for (StringRef axis : level.getAs<ArrayAttr>("axes").getAsValueRange<StringAttr>())
        split.axes.push_back(axis.str());
      if (global && split.dim < static_cast<int64_t>(global.size()))
        split.globalSize = global[split.dim];
      if (auto padTo = level.getAs<IntegerAttr>("pad_to"))
        split.padTo = padTo.getInt();
      splits.push_back(split);
    }
  return splits;
}

SmallVector<ShardSplit> llmc::shardPadding(DictionaryAttr shard) {
  SmallVector<ShardSplit> padding;
  for (const ShardSplit &split : shardSplits(shard))
    if (split.pads())
      padding.push_back(split);
  return padding;
}

SmallVector<std::string> llmc::shardAxes(DictionaryAttr shard) {
  SmallVector<std::string> axes;
  for (const ShardSplit &split : shardSplits(shard))
    axes.append(split.axes.begin(), split.axes.end());
  return axes;
}

SmallVector<int64_t> llmc::shardGlobalShape(DictionaryAttr shard, RankedTensorType local) {
  if (auto global = shard ? dyn_cast_or_null<DenseI64ArrayAttr>(shard.get("global_shape"))
                          : DenseI64ArrayAttr())
    return SmallVector<int64_t>(global.asArrayRef());
  return SmallVector<int64_t>(local.getShape());
}

std::optional<int64_t> llmc::paddedRows(DictionaryAttr shard) {
  int64_t rows = 0;
  for (const ShardSplit &pad : shardPadding(shard)) {
    if (pad.dim != 0 || rows)
      return std::nullopt;
    rows = pad.globalSize;
  }
  return rows;
}
