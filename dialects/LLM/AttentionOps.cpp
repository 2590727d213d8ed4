//===- AttentionOps.cpp - shape rules of the attention ops ----------------===//
//
// Attention over [B, T, heads, head_dim] q, k and v (and packed qkv), its
// backward, and the paged KV cache's write and attention.
//
//===----------------------------------------------------------------------===//

#include "common/QuantScheme.h"
#include "dialects/LLM/LLMDialect.h"
#include "dialects/LLM/OpChecks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace llmc::llm;
using namespace llmc::llm::detail;

namespace {

/// q and k of an attention that rotates them: an even head dim, and
/// positions [B, T] when given.
LogicalResult checkRotated(std::optional<Location> loc, Value q, Value positions) {
  RankedTensorType qt = tensorOf(q);
  if (qt.getDimSize(3) % 2 != 0)
    return emitOptionalError(loc, "rotated q and k need an even head_dim, got ", qt.getDimSize(3));
  if (positions && tensorOf(positions).getShape() != qt.getShape().take_front(2))
    return emitOptionalError(loc, "positions must be [", qt.getDimSize(0), ", ", qt.getDimSize(1),
                             "], got ", shapeString(tensorOf(positions).getShape()));
  return success();
}

LogicalResult checkAttention(std::optional<Location> loc, Value q, Value k, Value segmentIds) {
  RankedTensorType qt = tensorOf(q), kt = tensorOf(k);
  if (qt.getRank() != 4 || kt.getRank() != 4)
    return emitOptionalError(loc, "q and k must be [B, T, heads, head_dim], got ",
                             shapeString(qt.getShape()), " and ", shapeString(kt.getShape()));
  if (failed(sameElementType(loc, q, k, "q", "k")))
    return failure();
  ArrayRef<int64_t> qs = qt.getShape(), ks = kt.getShape();
  if (qs[0] != ks[0])
    return emitOptionalError(loc, "q batch ", qs[0], " differs from k batch ", ks[0]);
  if (qs[3] != ks[3])
    return emitOptionalError(loc, "q head_dim ", qs[3], " differs from k head_dim ", ks[3]);
  if (ks[2] < 1 || qs[2] % ks[2] != 0)
    return emitOptionalError(loc, "query heads (", qs[2], ") must be a multiple of kv heads (",
                             ks[2], ")");
  if (segmentIds) {
    ArrayRef<int64_t> ss = tensorOf(segmentIds).getShape();
    if (ss.size() != 2 || ss[0] != qs[0] || ss[1] != qs[1] || qs[1] != ks[1])
      return emitOptionalError(loc, "segment_ids must be [", qs[0], ", ", qs[1],
                               "] with equal q and k lengths, got ", shapeString(ss));
  }
  return success();
}

/// Attribute-dependent attention rules (run by the verifier, once attributes
/// are known).
LogicalResult checkAttentionAttrs(Operation *op, Value q, Value k, bool causal,
                                  const APFloat &scale) {
  int64_t t = tensorOf(q).getDimSize(1), s = tensorOf(k).getDimSize(1);
  if (causal && t != s)
    return op->emitOpError("causal attention needs equal q and k lengths, got ")
           << t << " and " << s;
  if (!(scale.convertToDouble() > 0))
    return op->emitOpError("scale must be > 0");
  if (auto window = op->getAttrOfType<IntegerAttr>("window")) {
    if (window.getInt() < 1)
      return op->emitOpError("window must be >= 1, got ") << window.getInt();
    if (!causal)
      return op->emitOpError("a window needs causal attention");
  }
  if (auto softcap = op->getAttrOfType<FloatAttr>("softcap");
      softcap && !(softcap.getValueAsDouble() > 0))
    return op->emitOpError("softcap must be > 0, got ") << softcap.getValueAsDouble();
  return success();
}

/// An integer attribute of an op whose type is being inferred: the built
/// op's property `fromProperties`, else the parsed op's dictionary entry
/// (0 when absent, which the shape checks report).
int64_t inferredInt(Attribute fromProperties, DictionaryAttr attributes, StringRef name) {
  auto attr = dyn_cast_or_null<IntegerAttr>(fromProperties);
  if (!attr && attributes)
    attr = attributes.getAs<IntegerAttr>(name);
  return attr ? attr.getInt() : 0;
}

/// The output type of attention over a packed qkv `[B, T, (H + 2·KV)·D]`,
/// `[B, T, H, D]`, after checking the packing.
FailureOr<RankedTensorType> packedOutType(std::optional<Location> loc, Value qkv, int64_t heads,
                                          int64_t kvHeads, Value segmentIds) {
  RankedTensorType t = tensorOf(qkv);
  if (t.getRank() != 3)
    return emitOptionalError(loc, "qkv must be [B, T, (heads + 2·kv_heads)·head_dim], got ",
                             shapeString(t.getShape()));
  if (kvHeads < 1 || heads < 1 || heads % kvHeads != 0)
    return emitOptionalError(loc, "heads (", heads, ") must be a positive multiple of kv_heads (",
                             kvHeads, ")");
  ArrayRef<int64_t> s = t.getShape();
  int64_t width = heads + 2 * kvHeads;
  if (s[2] % width != 0 || s[2] == 0)
    return emitOptionalError(loc, "qkv's last dimension (", s[2],
                             ") must be a positive multiple of heads + 2·kv_heads (", width, ")");
  if (segmentIds && tensorOf(segmentIds).getShape() != s.take_front(2))
    return emitOptionalError(loc, "segment_ids must be [", s[0], ", ", s[1], "], got ",
                             shapeString(tensorOf(segmentIds).getShape()));
  return RankedTensorType::get({s[0], s[1], heads, s[2] / width}, t.getElementType());
}

RankedTensorType lseType(RankedTensorType q) {
  ArrayRef<int64_t> s = q.getShape();
  return RankedTensorType::get({s[0], s[2], s[1]}, Float32Type::get(q.getContext()));
}

} // namespace

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkAttention(loc, adaptor.getQ(), adaptor.getK(), adaptor.getSegmentIds())))
    return failure();
  types.push_back(adaptor.getQ().getType());
  types.push_back(lseType(tensorOf(adaptor.getQ())));
  return success();
}

LogicalResult AttentionOp::verify() {
  return checkAttentionAttrs(*this, getQ(), getK(), getCausal(), getScale());
}

//===----------------------------------------------------------------------===//
// Paged KV cache
//===----------------------------------------------------------------------===//

/// The block table [B, M] and positions [B, T] of rows [B, T, ...] `rows`.
static LogicalResult checkPagedIndices(std::optional<Location> loc, RankedTensorType rows,
                                       Value blockTable, Value positions) {
  RankedTensorType table = tensorOf(blockTable), pos = tensorOf(positions);
  if (table.getRank() != 2 || table.getDimSize(0) != rows.getDimSize(0))
    return emitOptionalError(loc, "block_table must be [B, M] with B = ", rows.getDimSize(0),
                             ", got ", shapeString(table.getShape()));
  if (pos.getShape() != rows.getShape().take_front(2))
    return emitOptionalError(loc, "positions must be ", shapeString(rows.getShape().take_front(2)),
                             ", got ", shapeString(pos.getShape()));
  return success();
}

/// A block pool [NB, P, KV, D].
static LogicalResult checkCachePool(std::optional<Location> loc, RankedTensorType cache) {
  if (cache.getRank() != 4)
    return emitOptionalError(loc, "the cache must be a block pool [NB, P, KV, D], got ",
                             shapeString(cache.getShape()));
  return success();
}

/// Whether a pool of `cache` elements holds one-byte codes with scales:
/// int8, or fp8 E4M3 (OCP's, f8E4M3FN).
static bool isCodeCache(Type cache) { return cache.isInteger(8) || isa<Float8E4M3FNType>(cache); }

std::optional<int64_t> llmc::llm::cacheCodeFormat(Operation *op) {
  Value pool;
  if (auto write = dyn_cast<KvCacheWriteOp>(op))
    pool = write.getCache();
  else if (auto attention = dyn_cast<PagedAttentionOp>(op))
    pool = attention.getKCache();
  if (!pool)
    return std::nullopt;
  Type element = cast<RankedTensorType>(pool.getType()).getElementType();
  if (element.isInteger(8))
    return static_cast<int64_t>(quant::Format::Int8);
  if (isa<Float8E4M3FNType>(element))
    return static_cast<int64_t>(quant::Format::Fp8E4M3);
  return std::nullopt;
}

/// What a cache of `cache`'s elements may hold for attention computed in
/// `compute`: the compute type itself, a 16-bit float under f32 (rounded in,
/// widened out), or int8 or fp8 E4M3 codes with scales. A float wider than
/// the compute type would hold nothing more than the compute type does.
static bool cacheTypeAllowed(Type compute, Type cache) {
  return cache == compute || isCodeCache(cache) ||
         (compute.isF32() && (cache.isBF16() || cache.isF16()));
}

/// A pool of codes has scale pools [NB, P, KV] f32, one per token slot and
/// kv head; a float pool has none.
static LogicalResult checkCacheScales(Operation *op, RankedTensorType cache, ValueRange scales,
                                      size_t expected, StringRef what) {
  if (!isCodeCache(cache.getElementType())) {
    if (!scales.empty())
      return op->emitOpError("a ") << cache.getElementType() << " cache takes no scales";
    return success();
  }
  if (scales.size() != expected)
    return op->emitOpError("a cache of ")
           << cache.getElementType() << " codes needs " << what << " [NB, P, KV] f32";
  auto type =
      RankedTensorType::get(cache.getShape().take_front(3), Float32Type::get(op->getContext()));
  for (Value s : scales)
    if (s.getType() != type)
      return op->emitOpError("scales must be ")
             << type << " for a cache " << cache << ", got " << s.getType();
  return success();
}

LogicalResult KvCacheWriteOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getCache().getType());
  if (adaptor.getScales())
    types.push_back(adaptor.getScales().getType());
  return success();
}

LogicalResult KvCacheWriteOp::verify() {
  RankedTensorType cache = tensorOf(getCache()), rows = tensorOf(getRows());
  if (failed(checkCachePool(getLoc(), cache)) ||
      failed(checkPagedIndices(getLoc(), rows, getBlockTable(), getPositions())))
    return failure();
  if (rows.getRank() != 4 || rows.getShape().take_back(2) != cache.getShape().take_back(2))
    return emitOpError("rows must be [B, T, KV, D] with KV, D of ") << cache << ", got " << rows;
  if (!cacheTypeAllowed(rows.getElementType(), cache.getElementType()))
    return emitOpError("a cache of ")
           << cache.getElementType() << " cannot hold " << rows.getElementType()
           << " rows (expected the rows' type, bf16 or f16 under f32, or i8 or f8E4M3FN with "
              "scales)";
  SmallVector<Value> scales;
  if (getScales())
    scales.push_back(getScales());
  return checkCacheScales(*this, cache, scales, 1, "a scale pool");
}

LogicalResult PagedAttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getQ().getType());
  return success();
}

LogicalResult PagedAttentionOp::verify() {
  RankedTensorType q = tensorOf(getQ()), cache = tensorOf(getKCache());
  if (failed(checkCachePool(getLoc(), cache)) ||
      failed(checkPagedIndices(getLoc(), q, getBlockTable(), getPositions())))
    return failure();
  if (q.getRank() != 4 || q.getDimSize(3) != cache.getDimSize(3))
    return emitOpError("q must be [B, T, H, D] of the cache's head size, got ")
           << q << " against " << cache;
  if (!cacheTypeAllowed(q.getElementType(), cache.getElementType()))
    return emitOpError("a cache of ")
           << cache.getElementType() << " cannot serve a " << q.getElementType()
           << " q (expected q's type, bf16 or f16 under f32, or i8 or f8E4M3FN with scales)";
  if (failed(checkCacheScales(*this, cache, getScales(), 2, "two scale pools (keys', values')")))
    return failure();
  if (q.getDimSize(2) % cache.getDimSize(2) != 0)
    return emitOpError("query heads ")
           << q.getDimSize(2) << " must be a multiple of kv heads " << cache.getDimSize(2);
  if (!(getScale().convertToDouble() > 0))
    return emitOpError("scale must be > 0");
  if (IntegerAttr window = getWindowAttr(); window && window.getInt() < 1)
    return emitOpError("window must be >= 1, got ") << window.getInt();
  if (FloatAttr softcap = getSoftcapAttr(); softcap && !(softcap.getValueAsDouble() > 0))
    return emitOpError("softcap must be > 0, got ") << softcap.getValueAsDouble();
  return success();
}

/// An attention backward's dq, dk, dv (q's, k's, k's types), once its lse
/// is q's.
static LogicalResult inferAttentionGradTypes(std::optional<Location> loc, Value q, Value k,
                                             Value lse, SmallVectorImpl<Type> &types) {
  RankedTensorType expectedLse = lseType(tensorOf(q));
  if (lse.getType() != expectedLse)
    return emitOptionalError(loc, "lse must be ", expectedLse, ", got ", lse.getType());
  types.push_back(q.getType());
  types.push_back(k.getType());
  types.push_back(k.getType());
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkAttention(loc, adaptor.getQ(), adaptor.getK(), adaptor.getSegmentIds())))
    return failure();
  return inferAttentionGradTypes(loc, adaptor.getQ(), adaptor.getK(), adaptor.getLse(), types);
}

LogicalResult AttentionGradOp::verify() {
  return checkAttentionAttrs(*this, getQ(), getK(), getCausal(), getScale());
}

LogicalResult AttentionRopeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkAttention(loc, adaptor.getQ(), adaptor.getK(), adaptor.getSegmentIds())) ||
      failed(checkRotated(loc, adaptor.getQ(), adaptor.getPositions())))
    return failure();
  types.push_back(adaptor.getQ().getType());
  types.push_back(lseType(tensorOf(adaptor.getQ())));
  return success();
}

LogicalResult AttentionRopeOp::verify() {
  if (failed(checkAttentionAttrs(*this, getQ(), getK(), getCausal(), getScale())))
    return failure();
  return verifyRopeAttrs(*this);
}

LogicalResult AttentionRopeGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                    Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkAttention(loc, adaptor.getQ(), adaptor.getK(), adaptor.getSegmentIds())) ||
      failed(checkRotated(loc, adaptor.getQ(), adaptor.getPositions())))
    return failure();
  return inferAttentionGradTypes(loc, adaptor.getQ(), adaptor.getK(), adaptor.getLse(), types);
}

LogicalResult AttentionRopeGradOp::verify() {
  if (failed(checkAttentionAttrs(*this, getQ(), getK(), getCausal(), getScale())))
    return failure();
  return verifyRopeAttrs(*this);
}

/// A packed attention op's `out` type, from its qkv, heads and kv_heads.
template <typename PackedAdaptor>
static FailureOr<RankedTensorType>
packedOutTypeOf(std::optional<Location> loc, PackedAdaptor &adaptor, DictionaryAttr attributes) {
  return packedOutType(loc, adaptor.getQkv(),
                       inferredInt(adaptor.getProperties().heads, attributes, "heads"),
                       inferredInt(adaptor.getProperties().kv_heads, attributes, "kv_heads"),
                       adaptor.getSegmentIds());
}

LogicalResult AttentionPackedOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                  ValueRange operands, DictionaryAttr attributes,
                                                  OpaqueProperties properties, RegionRange regions,
                                                  SmallVectorImpl<Type> &types) {
  Adaptor adaptor(operands, attributes, properties, regions);
  FailureOr<RankedTensorType> out = packedOutTypeOf(loc, adaptor, attributes);
  if (failed(out))
    return failure();
  types.push_back(*out);
  types.push_back(lseType(*out));
  return success();
}

LogicalResult AttentionPackedOp::verify() {
  return checkAttentionAttrs(*this, getOut(), getOut(), getCausal(), getScale());
}

LogicalResult AttentionPackedGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, ValueRange operands, DictionaryAttr attributes,
    OpaqueProperties properties, RegionRange regions, SmallVectorImpl<Type> &types) {
  Adaptor adaptor(operands, attributes, properties, regions);
  FailureOr<RankedTensorType> out = packedOutTypeOf(loc, adaptor, attributes);
  if (failed(out))
    return failure();
  if (adaptor.getOut().getType() != *out)
    return emitOptionalError(loc, "out must be ", *out, ", got ", adaptor.getOut().getType());
  if (adaptor.getLse().getType() != lseType(*out))
    return emitOptionalError(loc, "lse must be ", lseType(*out), ", got ",
                             adaptor.getLse().getType());
  types.push_back(adaptor.getQkv().getType());
  return success();
}

LogicalResult AttentionPackedGradOp::verify() {
  return checkAttentionAttrs(*this, getOut(), getOut(), getCausal(), getScale());
}
