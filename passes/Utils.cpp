//===- Utils.cpp - helpers shared by llmc passes --------------------------===//

#include "passes/Utils.h"

#include "common/QuantScheme.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "dialects/QAT/QATDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

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

func::FuncOp llmc::lookupFunc(ModuleOp module, StringRef name) {
  return module.lookupSymbol<func::FuncOp>(name);
}

LogicalResult llmc::inlineCalls(ModuleOp module, func::FuncOp func) {
  SmallVector<func::CallOp> calls;
  func.walk([&](func::CallOp call) { calls.push_back(call); });
  for (func::CallOp call : calls) {
    func::FuncOp callee = lookupFunc(module, call.getCallee());
    if (!callee || callee.isExternal())
      return call.emitOpError("cannot inline call to '")
             << call.getCallee() << "': no body in this module";
    IRMapping mapping;
    for (auto [arg, operand] :
         llvm::zip(callee.getArguments(), call.getOperands()))
      mapping.map(arg, operand);
    OpBuilder builder(call);
    for (Operation &op : callee.getBody().front().without_terminator())
      builder.clone(op, mapping);
    auto ret = cast<func::ReturnOp>(callee.getBody().front().getTerminator());
    for (auto [result, value] : llvm::zip(call.getResults(), ret.getOperands()))
      result.replaceAllUsesWith(mapping.lookupOrDefault(value));
    call.erase();
  }
  return success();
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
    dropout->setAttr("offsets",
                     b.getDenseI64ArrayAttr(SmallVector<int64_t>(before.getRank(), 0)));
  }
  addRankOffset(dropout, "offsets", dim, axes, before.getDimSize(dim) / parts);
}

SmallVector<ModuleOp> llmc::programModules(ModuleOp module) {
  SmallVector<ModuleOp> stages;
  for (auto nested : module.getOps<ModuleOp>())
    if (nested->hasAttr(kStageRanksAttr))
      stages.push_back(nested);
  if (stages.empty())
    stages.push_back(module);
  return stages;
}

std::string llmc::formatSize(int64_t bytes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  double value = static_cast<double>(bytes);
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.1f ", value) << units[unit];
  return text;
}

BlockArgument llmc::parameterRead(func::FuncOp func, Value v) {
  for (;;) {
    if (auto cast = v.getDefiningOp<llm::CastOp>())
      v = cast.getX();
    else if (auto quantized = v.getDefiningOp<qat::FakeQuantOp>())
      v = quantized.getX();
    else
      break;
  }
  auto arg = dyn_cast<BlockArgument>(v);
  if (arg && arg.getOwner() == &func.getBody().front() &&
      llm::getParamAttr(func, arg.getArgNumber()))
    return arg;
  return nullptr;
}

static bool feedsLossWithin(Value v, int depth) {
  if (depth > 8)
    return false;
  for (Operation *user : v.getUsers()) {
    if (isa<llm::CrossEntropyOp, llm::CrossEntropyPartialOp, llm::ReduceMaxOp>(user))
      return true;
    if (isa<llm::ReshapeOp, llm::CastOp, llm::AddOp, dist::AllReduceOp>(user) &&
        feedsLossWithin(user->getResult(0), depth + 1))
      return true;
  }
  return false;
}

bool llmc::feedsLoss(Value v) { return feedsLossWithin(v, 0); }

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
  s.absmaxQ = addFrozenParameter(func, loc, name.str() + ".absmax_q", types.absmaxQ,
                                 types.absmaxQShard);
  s.absmaxScale = addFrozenParameter(func, loc, name.str() + ".absmax_scale", types.absmaxScale,
                                     types.absmaxScaleShard);
  s.absmaxMean = addFrozenParameter(func, loc, name.str() + ".absmax_mean",
                                    RankedTensorType::get({}, Float32Type::get(func.getContext())));
  return s;
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
