//===- LLMOps.cpp - llm op shape inference and verifiers ------------------===//
//
// Every shape rule lives in the op's inferReturnTypes, so builders get result
// types for free and the verifier reports the same rule with the op's
// location when a written type disagrees.
//
//===----------------------------------------------------------------------===//

#include "dialects/LLM/LLMDialect.h"
#include "common/Adam8bit.h"
#include "common/ElementwiseProgram.h"
#include "common/HeadScratch.h"
#include "common/QuantScheme.h"
#include "dialects/LLM/ElementwiseProgramSyntax.h"
#include "dialects/Nf4Piece.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace llmc::llm;

namespace {

RankedTensorType tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// `4x64x128`, the way MLIR spells a shape.
std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text;
  for (auto [i, dim] : llvm::enumerate(shape))
    text += (i ? "x" : "") + std::to_string(dim);
  return shape.empty() ? "scalar" : text;
}

bool isSuffix(ArrayRef<int64_t> suffix, ArrayRef<int64_t> shape) {
  return suffix.size() <= shape.size() &&
         shape.take_back(suffix.size()) == suffix;
}

LogicalResult sameElementType(std::optional<Location> loc, Value a, Value b,
                              StringRef aName, StringRef bName) {
  if (tensorOf(a).getElementType() != tensorOf(b).getElementType())
    return emitOptionalError(loc, aName, " and ", bName,
                             " must have the same element type, got ",
                             tensorOf(a).getElementType(), " and ",
                             tensorOf(b).getElementType());
  return success();
}

/// Checks that a per-feature vector (gamma, beta) matches x's last dimension.
LogicalResult checkFeatureVector(std::optional<Location> loc, Value x,
                                 Value vec, StringRef name) {
  RankedTensorType xt = tensorOf(x), vt = tensorOf(vec);
  if (xt.getRank() < 1)
    return emitOptionalError(loc, "input must have rank >= 1");
  if (vt.getRank() != 1 || vt.getDimSize(0) != xt.getShape().back())
    return emitOptionalError(loc, name, " must be [", xt.getShape().back(),
                             "] to match the last dimension of the input, got ",
                             shapeString(vt.getShape()));
  return success();
}

LogicalResult checkAttention(std::optional<Location> loc, Value q, Value k,
                             Value segmentIds) {
  RankedTensorType qt = tensorOf(q), kt = tensorOf(k);
  if (qt.getRank() != 4 || kt.getRank() != 4)
    return emitOptionalError(loc, "q and k must be [B, T, heads, head_dim], got ",
                             shapeString(qt.getShape()), " and ",
                             shapeString(kt.getShape()));
  if (failed(sameElementType(loc, q, k, "q", "k")))
    return failure();
  ArrayRef<int64_t> qs = qt.getShape(), ks = kt.getShape();
  if (qs[0] != ks[0])
    return emitOptionalError(loc, "q batch ", qs[0], " differs from k batch ", ks[0]);
  if (qs[3] != ks[3])
    return emitOptionalError(loc, "q head_dim ", qs[3], " differs from k head_dim ", ks[3]);
  if (ks[2] < 1 || qs[2] % ks[2] != 0)
    return emitOptionalError(loc, "query heads (", qs[2],
                             ") must be a multiple of kv heads (", ks[2], ")");
  if (segmentIds) {
    ArrayRef<int64_t> ss = tensorOf(segmentIds).getShape();
    if (ss.size() != 2 || ss[0] != qs[0] || ss[1] != qs[1] || qs[1] != ks[1])
      return emitOptionalError(loc, "segment_ids must be [", qs[0], ", ", qs[1],
                               "] with equal q and k lengths, got ",
                               shapeString(ss));
  }
  return success();
}

/// Attribute-dependent attention rules (run by the verifier, once attributes
/// are known).
LogicalResult checkAttentionAttrs(Operation *op, Value q, Value k, bool causal,
                                  APFloat scale) {
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

LogicalResult checkEpsilon(Operation *op, APFloat epsilon) {
  if (!(epsilon.convertToDouble() >= 0))
    return op->emitOpError("epsilon must be >= 0");
  return success();
}

RankedTensorType lseType(RankedTensorType q) {
  ArrayRef<int64_t> s = q.getShape();
  return RankedTensorType::get({s[0], s[2], s[1]}, Float32Type::get(q.getContext()));
}

} // namespace

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

LogicalResult BlockOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty name");
  // Runs before the nested ops are verified, so the terminator may still be
  // a foreign one.
  auto yield = dyn_cast<YieldOp>(getBody().front().getTerminator());
  if (!yield)
    return emitOpError("body must end with llm.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ") << yield.getValues().size()
                                  << " value(s) whose types do not match its "
                                  << getNumResults() << " result type(s)";
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  RankedTensorType a = tensorOf(adaptor.getA()), b = tensorOf(adaptor.getB());
  if (a.getRank() < 2)
    return emitOptionalError(loc, "operand a must have rank >= 2, got ",
                             shapeString(a.getShape()));
  if (b.getRank() != 2 && b.getRank() != a.getRank())
    return emitOptionalError(loc, "operand b must be a matrix or have a's rank (",
                             a.getRank(), "), got ", shapeString(b.getShape()));
  if (failed(sameElementType(loc, adaptor.getA(), adaptor.getB(), "a", "b")))
    return failure();
  int64_t ar = a.getRank(), br = b.getRank();
  int64_t m = a.getDimSize(ar - (adaptor.getTransposeA() ? 1 : 2));
  int64_t ka = a.getDimSize(ar - (adaptor.getTransposeA() ? 2 : 1));
  int64_t kb = b.getDimSize(br - (adaptor.getTransposeB() ? 1 : 2));
  int64_t n = b.getDimSize(br - (adaptor.getTransposeB() ? 2 : 1));
  if (ka != kb)
    return emitOptionalError(loc, "contraction sizes differ: a has ", ka,
                             ", b has ", kb);
  if (br == ar && br > 2 &&
      a.getShape().drop_back(2) != b.getShape().drop_back(2))
    return emitOptionalError(loc, "batch dimensions differ: ",
                             shapeString(a.getShape().drop_back(2)), " vs ",
                             shapeString(b.getShape().drop_back(2)));
  SmallVector<int64_t> shape(a.getShape().drop_back(2));
  shape.append({m, n});
  types.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static LogicalResult inferBroadcast(std::optional<Location> loc, Value lhs,
                                    Value rhs, SmallVectorImpl<Type> &types) {
  if (failed(sameElementType(loc, lhs, rhs, "lhs", "rhs")))
    return failure();
  if (!isSuffix(tensorOf(rhs).getShape(), tensorOf(lhs).getShape()))
    return emitOptionalError(loc, "rhs shape ", shapeString(tensorOf(rhs).getShape()),
                             " is not a suffix of lhs shape ",
                             shapeString(tensorOf(lhs).getShape()));
  types.push_back(lhs.getType());
  return success();
}

LogicalResult AddOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult MulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(), types);
}

#define LLMC_SAME_AS_OPERAND(OpClass, getter)                                 \
  LogicalResult OpClass::inferReturnTypes(MLIRContext *,                      \
                                          std::optional<Location>,            \
                                          Adaptor adaptor,                    \
                                          SmallVectorImpl<Type> &types) {     \
    types.push_back(adaptor.getter().getType());                              \
    return success();                                                         \
  }

LLMC_SAME_AS_OPERAND(GeluOp, getX)
LLMC_SAME_AS_OPERAND(SiluOp, getX)
LLMC_SAME_AS_OPERAND(SigmoidOp, getX)
LLMC_SAME_AS_OPERAND(SqrtOp, getX)
LLMC_SAME_AS_OPERAND(ScaleOp, getX)
LLMC_SAME_AS_OPERAND(SoftcapOp, getX)
LLMC_SAME_AS_OPERAND(SoftcapGradOp, getX)
LLMC_SAME_AS_OPERAND(SwigluOp, getGate)
LLMC_SAME_AS_OPERAND(GegluOp, getGate)
LLMC_SAME_AS_OPERAND(GeluGradOp, getX)
LLMC_SAME_AS_OPERAND(SiluGradOp, getX)
LLMC_SAME_AS_OPERAND(SigmoidGradOp, getX)

LLMC_SAME_AS_OPERAND(DropoutOp, getX)

/// Checks where a piece of shape `local` lies in the tensor dropout's mask
/// is drawn over (llm.dropout's and llm.fused_elementwise's `global_shape`
/// and `offsets`).
static LogicalResult verifyDropoutPiece(Operation *op, ArrayRef<int64_t> local,
                                        std::optional<ArrayRef<int64_t>> global,
                                        std::optional<ArrayRef<int64_t>> offsets) {
  if (!global && !offsets)
    return success();
  if (!global || !offsets)
    return op->emitOpError("global_shape and offsets go together");
  if (global->size() != local.size() || offsets->size() != local.size())
    return op->emitOpError("global_shape and offsets must have one entry per dimension (")
           << local.size() << ")";
  for (size_t d = 0; d < local.size(); ++d)
    if ((*offsets)[d] < 0 || (*offsets)[d] + local[d] > (*global)[d])
      return op->emitOpError("dimension ") << d << ": a piece of " << local[d] << " at offset "
                                           << (*offsets)[d] << " does not fit in "
                                           << (*global)[d];
  return success();
}

LogicalResult SoftcapOp::verify() {
  if (!(getCap().convertToDouble() > 0))
    return emitOpError("cap must be > 0, got ") << getCap().convertToDouble();
  return success();
}

LogicalResult SoftcapGradOp::verify() {
  if (!(getCap().convertToDouble() > 0))
    return emitOpError("cap must be > 0, got ") << getCap().convertToDouble();
  return success();
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return emitOpError("rate must be in [0, 1), got ") << rate;
  return verifyDropoutPiece(*this, getX().getType().getShape(), getGlobalShape(),
                            getOffsets());
}

LogicalResult CastOp::verify() {
  if (getX().getType().getShape() != getResult().getType().getShape())
    return emitOpError("cannot change the shape: ")
           << getX().getType() << " to " << getResult().getType();
  return success();
}

/// Host memory holds the value between the two copies and nothing else
/// reads it there: no kernel but the copy back runs on host buffers.
LogicalResult CopyToHostOp::verify() {
  for (Operation *user : getResult().getUsers())
    if (!isa<CopyToDeviceOp>(user))
      return emitOpError("result lives in host memory; only llm.copy_to_device may read it, not ")
             << user->getName();
  return success();
}

LogicalResult CopyToDeviceOp::verify() {
  if (!getX().getDefiningOp<CopyToHostOp>())
    return emitOpError("operand must be an llm.copy_to_host result (a value in host memory)");
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization, embedding, position
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkFeatureVector(loc, adaptor.getX(), adaptor.getGamma(), "gamma")))
    return failure();
  types.push_back(adaptor.getX().getType());
  return success();
}

LogicalResult LayerNormOp::verify() { return checkEpsilon(*this, getEpsilon()); }

LogicalResult RMSNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkFeatureVector(loc, adaptor.getX(), adaptor.getGamma(), "gamma")))
    return failure();
  types.push_back(adaptor.getX().getType());
  return success();
}

LogicalResult RMSNormOp::verify() { return checkEpsilon(*this, getEpsilon()); }

/// The fused residual add + norm: a per-feature gamma (and beta) of the
/// operands' element type, results the operands' type.
static LogicalResult inferAddNorm(std::optional<Location> loc, Value a, Value gamma, Value beta,
                                  SmallVectorImpl<Type> &types) {
  if (failed(checkFeatureVector(loc, a, gamma, "gamma")) ||
      failed(sameElementType(loc, a, gamma, "a", "gamma")) ||
      (beta && failed(sameElementType(loc, a, beta, "a", "beta"))))
    return failure();
  types.append({a.getType(), a.getType()});
  return success();
}

LogicalResult AddLayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &types) {
  Value bias = adaptor.getBias();
  if (bias && bias.getType() != adaptor.getGamma().getType())
    return emitOptionalError(loc, "bias must have gamma's type ", adaptor.getGamma().getType(),
                             ", got ", bias.getType());
  return inferAddNorm(loc, adaptor.getA(), adaptor.getGamma(), adaptor.getBeta(), types);
}

LogicalResult AddLayerNormOp::verify() { return checkEpsilon(*this, getEpsilon()); }

LogicalResult AddRMSNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferAddNorm(loc, adaptor.getA(), adaptor.getGamma(), Value(), types);
}

LogicalResult AddRMSNormOp::verify() { return checkEpsilon(*this, getEpsilon()); }

/// A vocabulary shard: rows [row_offset, row_offset + rows) of vocab_size.
static LogicalResult checkVocabShard(Operation *op, int64_t rows, uint64_t rowOffsetAttr,
                                     uint64_t vocabSizeAttr) {
  auto rowOffset = static_cast<int64_t>(rowOffsetAttr);
  auto vocabSize = static_cast<int64_t>(vocabSizeAttr);
  if (vocabSize == 0) {
    if (rowOffset != 0)
      return op->emitOpError("row_offset needs vocab_size (the whole table's rows)");
    return success();
  }
  if (rowOffset < 0 || rowOffset + rows > vocabSize)
    return op->emitOpError("rows [") << rowOffset << ", " << rowOffset + rows
                                     << ") do not fit in a vocabulary of " << vocabSize;
  return success();
}

LogicalResult EmbeddingOp::verify() {
  return checkVocabShard(*this, getTable().getType().getDimSize(0), getRowOffset(),
                         getVocabSize());
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType table = tensorOf(adaptor.getTable());
  if (table.getRank() != 2)
    return emitOptionalError(loc, "table must be [vocab, dim], got ",
                             shapeString(table.getShape()));
  SmallVector<int64_t> shape(tensorOf(adaptor.getIds()).getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult RopeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorOf(adaptor.getX());
  if (x.getRank() != 4 || x.getDimSize(3) % 2 != 0)
    return emitOptionalError(loc, "rope input must be [B, T, heads, head_dim] with "
                                  "even head_dim, got ",
                             shapeString(x.getShape()));
  if (Value positions = adaptor.getPositions();
      positions && tensorOf(positions).getShape() != x.getShape().take_front(2))
    return emitOptionalError(loc, "positions must be [", x.getDimSize(0), ", ",
                             x.getDimSize(1), "], got ",
                             shapeString(tensorOf(positions).getShape()));
  types.push_back(x);
  return success();
}

namespace {

/// The rotation attributes llm.rope and the attention ops that apply it
/// share: theta and the Llama 3 scaling (all four or none).
template <typename Op> LogicalResult verifyRopeAttrs(Op op) {
  if (!(op.getTheta().convertToDouble() > 0))
    return op.emitOpError("theta must be > 0");
  int given = !!op.getScalingFactorAttr() + !!op.getLowFreqFactorAttr() +
              !!op.getHighFreqFactorAttr() + !!op.getOriginalMaxPositionsAttr();
  if (given == 0)
    return success();
  if (given != 4)
    return op.emitOpError("scaling_factor, low_freq_factor, high_freq_factor and "
                          "original_max_positions go together (Llama 3 scaling)");
  if (!(op.getScalingFactorAttr().getValueAsDouble() > 0))
    return op.emitOpError("scaling_factor must be > 0");
  double low = op.getLowFreqFactorAttr().getValueAsDouble(),
         high = op.getHighFreqFactorAttr().getValueAsDouble();
  if (!(low > 0 && high > low))
    return op.emitOpError("low_freq_factor (") << low << ") and high_freq_factor (" << high
                                                << ") must satisfy 0 < low < high";
  if (op.getOriginalMaxPositionsAttr().getInt() < 1)
    return op.emitOpError("original_max_positions must be >= 1");
  return success();
}

/// q and k of an attention that rotates them: an even head dim, and
/// positions [B, T] when given.
LogicalResult checkRotated(std::optional<Location> loc, Value q, Value positions) {
  RankedTensorType qt = tensorOf(q);
  if (qt.getDimSize(3) % 2 != 0)
    return emitOptionalError(loc, "rotated q and k need an even head_dim, got ",
                             qt.getDimSize(3));
  if (positions && tensorOf(positions).getShape() != qt.getShape().take_front(2))
    return emitOptionalError(loc, "positions must be [", qt.getDimSize(0), ", ",
                             qt.getDimSize(1), "], got ",
                             shapeString(tensorOf(positions).getShape()));
  return success();
}

} // namespace

LogicalResult RopeOp::verify() { return verifyRopeAttrs(*this); }

//===----------------------------------------------------------------------===//
// Attention and loss
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkAttention(loc, adaptor.getQ(), adaptor.getK(),
                            adaptor.getSegmentIds())))
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
  auto type = RankedTensorType::get(cache.getShape().take_front(3),
                                    Float32Type::get(op->getContext()));
  for (Value s : scales)
    if (s.getType() != type)
      return op->emitOpError("scales must be ") << type << " for a cache " << cache << ", got "
                                                << s.getType();
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
    return emitOpError("rows must be [B, T, KV, D] with KV, D of ")
           << cache << ", got " << rows;
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
    return emitOpError("query heads ") << q.getDimSize(2) << " must be a multiple of kv heads "
                                       << cache.getDimSize(2);
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
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  if (failed(checkAttention(loc, adaptor.getQ(), adaptor.getK(),
                            adaptor.getSegmentIds())))
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
                                                    Adaptor adaptor,
                                                    SmallVectorImpl<Type> &types) {
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
static FailureOr<RankedTensorType> packedOutTypeOf(std::optional<Location> loc,
                                                   PackedAdaptor &adaptor,
                                                   DictionaryAttr attributes) {
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

LogicalResult AttentionPackedGradOp::inferReturnTypes(MLIRContext *,
                                                      std::optional<Location> loc,
                                                      ValueRange operands,
                                                      DictionaryAttr attributes,
                                                      OpaqueProperties properties,
                                                      RegionRange regions,
                                                      SmallVectorImpl<Type> &types) {
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

static LogicalResult checkLossShapes(std::optional<Location> loc, Value logits,
                                     Value targets) {
  RankedTensorType lt = tensorOf(logits);
  if (lt.getRank() < 1)
    return emitOptionalError(loc, "logits must have a vocabulary dimension");
  if (tensorOf(targets).getShape() != lt.getShape().drop_back())
    return emitOptionalError(loc, "targets must be ",
                             shapeString(lt.getShape().drop_back()),
                             " to match logits ", shapeString(lt.getShape()),
                             ", got ", shapeString(tensorOf(targets).getShape()));
  return success();
}

/// `numClasses` (0: every column) leaves out at most the last columns of
/// `logits`.
static LogicalResult checkNumClasses(Operation *op, Value logits, int64_t numClasses) {
  int64_t width = tensorOf(logits).getShape().back();
  if (numClasses < 0 || numClasses > width)
    return op->emitOpError("num_classes = ")
           << numClasses << " must be in [0, " << width << "] (the logits' columns; 0: all)";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(checkLossShapes(getLoc(), getLogits(), getTargets())))
    return failure();
  return checkNumClasses(*this, getLogits(), getNumClasses());
}

LogicalResult CrossEntropyGradOp::verify() {
  return checkNumClasses(*this, getLogits(), getNumClasses());
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(MLIRContext *,
                                                   std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  if (failed(checkLossShapes(loc, adaptor.getLogits(), adaptor.getTargets())))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

/// `adaptor` with the op's inherent attributes. The generated parsers infer
/// result types before the op exists, while those attributes are still in
/// the attribute dictionary and the properties empty, so they are read from
/// there (a built op's dictionary holds only discardable attributes: its
/// properties stand).
template <typename OpT>
static typename OpT::Adaptor withParsedAttributes(typename OpT::Adaptor adaptor,
                                                  MLIRContext *context) {
  DictionaryAttr attrs = adaptor.getAttributes();
  if (!attrs || attrs.empty())
    return adaptor;
  typename OpT::Properties properties = adaptor.getProperties();
  auto emitError = [&] { return mlir::emitError(UnknownLoc::get(context)); };
  if (failed(OpT::setPropertiesFromAttr(properties, attrs, emitError)))
    return adaptor;
  return typename OpT::Adaptor(adaptor.getOperands(), attrs, properties);
}

/// The per-row statistics of a vocabulary-parallel loss are fp32 `rows`.
static LogicalResult checkRowStats(std::optional<Location> loc, ArrayRef<int64_t> rows,
                                   Value stat, StringRef name) {
  if (tensorOf(stat).getShape() != rows)
    return emitOptionalError(loc, name, " must be ", shapeString(rows), ", got ",
                             shapeString(tensorOf(stat).getShape()));
  return success();
}

/// What a fused head op returns before its scratch.
enum class HeadResults {
  Loss,        ///< the loss
  LossAndGrad, ///< the loss, dh, dw (no dw with frozen_weight)
  RowStats,    ///< max, sumexp, target_logit (a vocabulary shard's)
  Grad,        ///< dh, dw (no dw with frozen_weight)
};

/// Rows the fused head's scratch holds beyond its chunk (common/HeadScratch.h).
static int64_t accumulatorRows(RankedTensorType h, int64_t chunk, HeadResults results,
                               bool frozenWeight) {
  const bool weightGrad =
      (results == HeadResults::LossAndGrad || results == HeadResults::Grad) && !frozenWeight;
  const int64_t width = h.getShape().back();
  return llmc::headAccumulatorRows(h.getNumElements() / width, width, chunk,
                                   !h.getElementType().isF32(), weightGrad);
}

/// The shapes of the fused head + loss: h [..., D], w [V, D] (transpose_b)
/// or [D, V], targets h's leading shape, fp32 throughout; pushes `results`
/// (without dw when `frozenWeight`), then the scratch [chunk_rows (+ D
/// where dw sums over chunks in fp32), V].
template <typename Adaptor>
static LogicalResult inferLinearCrossEntropy(MLIRContext *context, std::optional<Location> loc,
                                             Adaptor adaptor, HeadResults results,
                                             SmallVectorImpl<Type> &types,
                                             bool frozenWeight = false) {
  RankedTensorType h = tensorOf(adaptor.getH()), w = tensorOf(adaptor.getW());
  Type f32 = Float32Type::get(context);
  if (failed(sameElementType(loc, adaptor.getH(), adaptor.getW(), "h", "w")))
    return failure();
  if (h.getRank() < 2 || w.getRank() != 2)
    return emitOptionalError(loc, "h must be [..., D] and w a matrix, got ",
                             shapeString(h.getShape()), " and ", shapeString(w.getShape()));
  bool transposeB = static_cast<bool>(adaptor.getTransposeB());
  int64_t d = h.getShape().back(), vocab = w.getShape()[transposeB ? 0 : 1];
  if (w.getShape()[transposeB ? 1 : 0] != d)
    return emitOptionalError(loc, "w ", shapeString(w.getShape()), " does not match h's width ",
                             d, transposeB ? " (w is [V, D] with transpose_b)" : " (w is [D, V])");
  if (tensorOf(adaptor.getTargets()).getShape() != h.getShape().drop_back())
    return emitOptionalError(loc, "targets must be ", shapeString(h.getShape().drop_back()),
                             ", got ", shapeString(tensorOf(adaptor.getTargets()).getShape()));
  int64_t chunk = adaptor.getChunkRows();
  if (chunk < 1)
    return emitOptionalError(loc, "chunk_rows must be >= 1, got ", chunk);
  if (results == HeadResults::Loss || results == HeadResults::LossAndGrad)
    types.push_back(RankedTensorType::get({}, f32));
  if (results == HeadResults::RowStats)
    types.append(3, RankedTensorType::get(h.getShape().drop_back(), f32));
  if (results == HeadResults::LossAndGrad || results == HeadResults::Grad) {
    types.push_back(h);
    if (!frozenWeight)
      types.push_back(w);
  }
  types.push_back(RankedTensorType::get(
      {chunk + accumulatorRows(h, chunk, results, frozenWeight), vocab}, f32));
  return success();
}

LogicalResult LinearCrossEntropyOp::inferReturnTypes(MLIRContext *context,
                                                     std::optional<Location> loc, Adaptor adaptor,
                                                     SmallVectorImpl<Type> &types) {
  return inferLinearCrossEntropy(context, loc,
                                 withParsedAttributes<LinearCrossEntropyOp>(adaptor, context),
                                 HeadResults::Loss, types);
}

LogicalResult LinearCrossEntropyTrainOp::inferReturnTypes(MLIRContext *context,
                                                          std::optional<Location> loc,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type> &types) {
  auto parsed = withParsedAttributes<LinearCrossEntropyTrainOp>(adaptor, context);
  return inferLinearCrossEntropy(context, loc, parsed, HeadResults::LossAndGrad, types,
                                 parsed.getFrozenWeight());
}

/// The whole-vocabulary head's `num_classes` leaves out at most w's last
/// classes.
template <typename HeadOp> static LogicalResult verifyHeadClasses(HeadOp op) {
  int64_t vocab = op.getW().getType().getShape()[op.getTransposeB() ? 0 : 1];
  if (op.getNumClasses() < 0 || op.getNumClasses() > vocab)
    return op.emitOpError("num_classes = ")
           << op.getNumClasses() << " must be in [0, " << vocab << "] (w's classes; 0: all)";
  return success();
}

LogicalResult LinearCrossEntropyOp::verify() { return verifyHeadClasses(*this); }
LogicalResult LinearCrossEntropyTrainOp::verify() { return verifyHeadClasses(*this); }

/// A vocabulary shard's `classes` columns from `offset` fit in `total`.
static LogicalResult checkClassRange(Operation *op, int64_t classes, int64_t offset,
                                     int64_t total) {
  if (total < 1 || offset < 0 || offset + classes > total)
    return op->emitOpError("classes [") << offset << ", " << offset + classes
                                        << ") do not fit in num_classes = " << total;
  return success();
}

LogicalResult LinearCrossEntropyPartialOp::inferReturnTypes(MLIRContext *context,
                                                            std::optional<Location> loc,
                                                            Adaptor adaptor,
                                                            SmallVectorImpl<Type> &types) {
  return inferLinearCrossEntropy(
      context, loc, withParsedAttributes<LinearCrossEntropyPartialOp>(adaptor, context),
      HeadResults::RowStats, types);
}

LogicalResult LinearCrossEntropyPartialOp::verify() {
  int64_t classes = getW().getType().getShape()[getTransposeB() ? 0 : 1];
  return checkClassRange(*this, classes, getClassOffset(), getNumClasses());
}

LogicalResult LinearCrossEntropyPartialGradOp::inferReturnTypes(MLIRContext *context,
                                                                std::optional<Location> loc,
                                                                Adaptor adaptor,
                                                                SmallVectorImpl<Type> &types) {
  auto parsed = withParsedAttributes<LinearCrossEntropyPartialGradOp>(adaptor, context);
  if (failed(inferLinearCrossEntropy(context, loc, parsed, HeadResults::Grad, types,
                                     parsed.getFrozenWeight())))
    return failure();
  ArrayRef<int64_t> rows = tensorOf(adaptor.getTargets()).getShape();
  for (auto [stat, name] : {std::pair<Value, StringRef>{adaptor.getShift(), "shift"},
                            {adaptor.getDsumexp(), "dsumexp"},
                            {adaptor.getDtargetLogit(), "dtarget_logit"}})
    if (failed(checkRowStats(loc, rows, stat, name)))
      return failure();
  return success();
}

LogicalResult LinearCrossEntropyPartialGradOp::verify() {
  int64_t classes = getW().getType().getShape()[getTransposeB() ? 0 : 1];
  return checkClassRange(*this, classes, getClassOffset(), getNumClasses());
}

/// The program's dtype number (kernels/Tensor.h's DType) of a float
/// element type: 0 f32, 1 bf16, 2 f16.
static int64_t programDtype(Type type) {
  Type element = cast<RankedTensorType>(type).getElementType();
  return element.isBF16() ? 1 : element.isF16() ? 2 : 0;
}

LogicalResult FusedElementwiseOp::verify() {
  if (getOuts().empty())
    return emitOpError("must have at least one result");
  ArrayRef<int64_t> shape = cast<RankedTensorType>(getOuts()[0].getType()).getShape();
  SmallVector<int64_t> inputDtypes, resultDtypes;
  for (Value out : getOuts()) {
    if (cast<RankedTensorType>(out.getType()).getShape() != shape)
      return emitOpError("results must all have one shape, got ")
             << getOuts()[0].getType() << " and " << out.getType();
    resultDtypes.push_back(programDtype(out.getType()));
  }
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    ArrayRef<int64_t> in = cast<RankedTensorType>(input.getType()).getShape();
    if (in.size() > shape.size() || shape.take_back(in.size()) != in)
      return emitOpError("input ") << i << " " << input.getType()
                                   << " must have the results' shape or a suffix of it ("
                                   << shapeString(shape) << ")";
    inputDtypes.push_back(programDtype(input.getType()));
  }
  std::string error = ew::validateProgram(
      std::vector<int64_t>(getProgram().begin(), getProgram().end()),
      std::vector<int64_t>(getYields().begin(), getYields().end()),
      std::vector<int64_t>(inputDtypes.begin(), inputDtypes.end()),
      std::vector<int64_t>(resultDtypes.begin(), resultDtypes.end()));
  if (!error.empty())
    return emitOpError(error);
  if (getGlobalShape() &&
      !ew::usesOpcode(getProgram().data(), getProgram().size(), ew::Opcode::Dropout))
    return emitOpError("global_shape and offsets place dropout's mask, but the program has no "
                       "dropout");
  return verifyDropoutPiece(*this, shape, getGlobalShape(), getOffsets());
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                         Adaptor parsed, SmallVectorImpl<Type> &types) {
  Adaptor adaptor = withParsedAttributes<LinearOp>(parsed, context);
  RankedTensorType x = tensorOf(adaptor.getX()), w = tensorOf(adaptor.getW());
  if (x.getRank() < 2 || w.getRank() != 2)
    return emitOptionalError(loc, "x must be [..., K] (rank >= 2) and w a matrix, got ",
                             shapeString(x.getShape()), " and ", shapeString(w.getShape()));
  Value bias = adaptor.getBias(), residual = adaptor.getResidual();
  if (failed(sameElementType(loc, adaptor.getX(), adaptor.getW(), "x", "w")) ||
      (bias && failed(sameElementType(loc, adaptor.getX(), bias, "x", "bias"))))
    return failure();
  bool transposeB = static_cast<bool>(adaptor.getTransposeB());
  int64_t k = x.getShape().back(), n = w.getDimSize(transposeB ? 0 : 1);
  if (w.getDimSize(transposeB ? 1 : 0) != k)
    return emitOptionalError(loc, "w ", shapeString(w.getShape()), " does not match x's width ",
                             k, transposeB ? " (w is [N, K] with transpose_b)" : " (w is [K, N])");
  if (bias && tensorOf(bias).getShape() != ArrayRef<int64_t>{n})
    return emitOptionalError(loc, "bias must be [", n, "], got ",
                             shapeString(tensorOf(bias).getShape()));
  if (!bias && !residual)
    return emitOptionalError(loc, "needs a bias or a residual (without both it is a matmul)");
  if (adaptor.getGelu() && (!bias || residual))
    return emitOptionalError(loc, "gelu needs a bias and takes no residual");
  if (adaptor.getKeepPre() && !adaptor.getGelu())
    return emitOptionalError(loc, "keep_pre needs gelu (without it the pre-activation is y)");
  SmallVector<int64_t> shape(x.getShape().drop_back());
  shape.push_back(n);
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  if (residual && residual.getType() != types.front())
    return emitOptionalError(loc, "residual must be y's type ", types.front(), ", got ",
                             residual.getType());
  if (adaptor.getKeepPre())
    types.push_back(types.front());
  return success();
}

/// The type of `x · w` (w [K, N], or [N, K] with transpose_b), which a
/// matmul with an activation's backward as its epilogue returns; every
/// operand in `sameAsProduct` must have it too.
static LogicalResult inferProductWithEpilogue(std::optional<Location> loc, Value xValue,
                                              Value wValue, bool transposeB,
                                              ArrayRef<std::pair<Value, StringRef>> sameAsProduct,
                                              SmallVectorImpl<Type> &types, unsigned results) {
  RankedTensorType x = tensorOf(xValue), w = tensorOf(wValue);
  if (x.getRank() < 2 || w.getRank() != 2)
    return emitOptionalError(loc, "x must be [..., K] (rank >= 2) and w a matrix, got ",
                             shapeString(x.getShape()), " and ", shapeString(w.getShape()));
  if (failed(sameElementType(loc, xValue, wValue, "x", "w")))
    return failure();
  int64_t k = x.getShape().back(), n = w.getDimSize(transposeB ? 0 : 1);
  if (w.getDimSize(transposeB ? 1 : 0) != k)
    return emitOptionalError(loc, "w ", shapeString(w.getShape()), " does not match x's width ",
                             k, transposeB ? " (w is [N, K] with transpose_b)" : " (w is [K, N])");
  SmallVector<int64_t> shape(x.getShape().drop_back());
  shape.push_back(n);
  auto product = RankedTensorType::get(shape, x.getElementType());
  for (auto [operand, name] : sameAsProduct)
    if (operand.getType() != product)
      return emitOptionalError(loc, name, " must be the product's type ", product, ", got ",
                               operand.getType());
  types.append(results, product);
  return success();
}

LogicalResult MatmulGeluGradOp::inferReturnTypes(MLIRContext *context,
                                                 std::optional<Location> loc, Adaptor parsed,
                                                 SmallVectorImpl<Type> &types) {
  Adaptor adaptor = withParsedAttributes<MatmulGeluGradOp>(parsed, context);
  if (failed(inferProductWithEpilogue(loc, adaptor.getX(), adaptor.getW(),
                                      static_cast<bool>(adaptor.getTransposeB()),
                                      {{adaptor.getPre(), "pre"}}, types, 1)))
    return failure();
  if (adaptor.getBiasGrad()) { // db [N], the result's rows summed
    auto product = cast<RankedTensorType>(types.front());
    types.push_back(RankedTensorType::get({product.getShape().back()}, product.getElementType()));
  }
  return success();
}

LogicalResult MatmulSwigluGradOp::inferReturnTypes(MLIRContext *context,
                                                   std::optional<Location> loc, Adaptor parsed,
                                                   SmallVectorImpl<Type> &types) {
  Adaptor adaptor = withParsedAttributes<MatmulSwigluGradOp>(parsed, context);
  return inferProductWithEpilogue(loc, adaptor.getX(), adaptor.getW(),
                                  static_cast<bool>(adaptor.getTransposeB()),
                                  {{adaptor.getGate(), "gate"}, {adaptor.getUp(), "up"}}, types,
                                  2);
}

LogicalResult LinearWeightGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorOf(adaptor.getX()), dy = tensorOf(adaptor.getDy());
  if (x.getRank() < 2 || dy.getRank() < 2)
    return emitOptionalError(loc, "x and dy must be [..., K] and [..., N] (rank >= 2), got ",
                             shapeString(x.getShape()), " and ", shapeString(dy.getShape()));
  if (failed(sameElementType(loc, adaptor.getX(), adaptor.getDy(), "x", "dy")))
    return failure();
  auto rows = [](RankedTensorType t) {
    int64_t n = 1;
    for (int64_t d : t.getShape().drop_back())
      n *= d;
    return n;
  };
  if (rows(x) != rows(dy))
    return emitOptionalError(loc, "x ", shapeString(x.getShape()), " and dy ",
                             shapeString(dy.getShape()), " must have as many rows");
  int64_t k = x.getShape().back(), n = dy.getShape().back();
  types.push_back(RankedTensorType::get({k, n}, x.getElementType()));
  types.push_back(RankedTensorType::get({n}, x.getElementType()));
  return success();
}

namespace {

/// The result type of x · W (x · Wᵀ with transposeB), W of `weightShape`
/// held in quantized storage.
LogicalResult inferQuantizedProduct(std::optional<Location> loc, Value xValue,
                                    ArrayRef<int64_t> w, bool transposeB,
                                    SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorOf(xValue);
  if (x.getRank() < 1)
    return emitOptionalError(loc, "x must have rank >= 1");
  if (w.size() != 2)
    return emitOptionalError(loc, "weight_shape must be 2-D, got ", shapeString(w));
  int64_t k = transposeB ? w[1] : w[0];
  int64_t n = transposeB ? w[0] : w[1];
  if (x.getShape().back() != k)
    return emitOptionalError(loc, "contraction sizes differ: x has ", x.getShape().back(),
                             ", the weight ", shapeString(w), " has ", k);
  SmallVector<int64_t> shape(x.getShape().drop_back());
  shape.push_back(n);
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

/// Whether `v` holds `n` elements (flat, as a file stores it, or shaped
/// after the weight it quantizes, as tensor parallelism splits it); else
/// an error of `op` naming it.
LogicalResult expectStorage(Operation *op, Value v, int64_t n, StringRef what,
                            ArrayRef<int64_t> weightShape) {
  RankedTensorType t = tensorOf(v);
  if (t.hasStaticShape() && t.getNumElements() == n)
    return success();
  return op->emitOpError() << what << " must hold " << n << " elements for a weight "
                           << shapeString(weightShape) << ", got " << t;
}

} // namespace

LogicalResult MatmulNf4Op::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferQuantizedProduct(loc, adaptor.getX(), adaptor.getWeightShape(),
                               adaptor.getTransposeB(), types);
}

LogicalResult MatmulIntOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferQuantizedProduct(loc, adaptor.getX(), adaptor.getWeightShape(),
                               adaptor.getTransposeB(), types);
}

LogicalResult MatmulIntOp::verify() {
  ArrayRef<int64_t> w = getWeightShape();
  if (w.size() != 2)
    return emitOpError("weight_shape must be 2-D, got ") << shapeString(w);
  int64_t bits = getBits();
  if (bits != 8 && bits != 4)
    return emitOpError("bits must be 8 or 4, got ") << bits;
  if (getFp8() && (bits != 8 || getZeroPoint()))
    return emitOpError("fp8 codes are 8 bits each and take no zero_point");
  std::optional<int64_t> block = getBlock(), axis = getChannelAxis();
  if (block && axis)
    return emitOpError("give block or channel_axis, not both");
  if (block && (*block < 1 || w.back() % *block != 0))
    return emitOpError("blocks of ") << *block << " must divide the weight's last dimension ("
                                     << shapeString(w) << ")";
  if (axis && *axis != 0 && *axis != 1)
    return emitOpError("channel_axis must be 0 or 1, got ") << *axis;
  int64_t numel = w[0] * w[1];
  int64_t groups = block ? numel / *block : axis ? w[*axis] : 1;
  if (failed(expectStorage(*this, getCodes(), bits == 8 ? numel : (numel + 1) / 2,
                           bits == 8 ? "codes (one per byte)" : "codes (two per byte)", w)) ||
      failed(expectStorage(*this, getScale(), groups, "scale (one per group)", w)))
    return failure();
  if (getZeroPoint() &&
      failed(expectStorage(*this, getZeroPoint(), groups, "zero_point (one per group)", w)))
    return failure();
  return success();
}

LogicalResult MatmulNf4Op::verify() {
  ArrayRef<int64_t> w = getWeightShape();
  int64_t block = getBlock();
  if (w.size() != 2)
    return emitOpError("weight_shape must be 2-D, got ") << shapeString(w);
  if (block < 1 || w.back() % block != 0)
    return emitOpError("blocks of ") << block << " must divide the weight's last dimension ("
                                     << shapeString(w) << ")";
  FailureOr<Nf4Piece> piece =
      verifyNf4Piece(*this, w, block, getWholeShape(), getChunks(), getPieceOffset());
  if (failed(piece) || failed(verifyAbsmaxFormat(*this, getAbsmaxFormat())))
    return failure();
  int64_t numel = w[0] * w[1], groups = numel / block;
  if (failed(expectStorage(*this, getCodes(), (numel + 1) / 2, "codes (two per byte)", w)) ||
      failed(expectStorage(*this, getAbsmaxQ(), groups, "absmax_q (one per block)", w)) ||
      failed(expectStorage(*this, getAbsmaxScale(),
                           quant::nf4ScaleCount(piece->wholeBlocks(groups)),
                           "absmax_scale (one per 256 blocks)", w)))
    return failure();
  return success();
}

LogicalResult ReduceMaxOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorOf(adaptor.getX());
  if (x.getRank() < 1)
    return emitOptionalError(loc, "input must have rank >= 1");
  types.push_back(RankedTensorType::get(x.getShape().drop_back(), Float32Type::get(context)));
  return success();
}

/// Logits `rows × [V]`, targets and shift `rows` (a loss shard's inputs).
static LogicalResult checkPartialOperands(std::optional<Location> loc, Value logits,
                                          Value targets, Value shift) {
  if (failed(checkLossShapes(loc, logits, targets)))
    return failure();
  return checkRowStats(loc, tensorOf(logits).getShape().drop_back(), shift, "shift");
}

LogicalResult CrossEntropyPartialOp::inferReturnTypes(MLIRContext *,
                                                      std::optional<Location> loc,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type> &types) {
  if (failed(checkPartialOperands(loc, adaptor.getLogits(), adaptor.getTargets(),
                                  adaptor.getShift())))
    return failure();
  types.append(2, adaptor.getShift().getType());
  return success();
}

LogicalResult CrossEntropyPartialOp::verify() {
  return checkClassRange(*this, getLogits().getType().getShape().back(), getClassOffset(),
                         getNumClasses());
}

LogicalResult CrossEntropyPartialGradOp::inferReturnTypes(MLIRContext *,
                                                          std::optional<Location> loc,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type> &types) {
  // dsumexp and dtarget_logit have shift's type (AllTypesMatch).
  if (failed(checkPartialOperands(loc, adaptor.getLogits(), adaptor.getTargets(),
                                  adaptor.getShift())))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult CrossEntropyFinishOp::verify() {
  ArrayRef<int64_t> rows = getTargets().getType().getShape();
  for (auto [value, name] : {std::pair<Value, StringRef>{getSumexp(), "sumexp"},
                             {getShift(), "shift"},
                             {getTargetLogit(), "target_logit"}})
    if (failed(checkRowStats(getLoc(), rows, value, name)))
      return failure();
  return success();
}

LogicalResult CrossEntropyFinishGradOp::inferReturnTypes(MLIRContext *,
                                                         std::optional<Location> loc,
                                                         Adaptor adaptor,
                                                         SmallVectorImpl<Type> &types) {
  if (failed(checkRowStats(loc, tensorOf(adaptor.getTargets()).getShape(),
                           adaptor.getSumexp(), "sumexp")))
    return failure();
  types.append(3, adaptor.getSumexp().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = getX().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("cannot change the element type: ")
           << in.getElementType() << " to " << out.getElementType();
  if (!in.hasStaticShape() || !out.hasStaticShape() ||
      in.getNumElements() != out.getNumElements())
    return emitOpError("element count differs: ")
           << shapeString(in.getShape()) << " to " << shapeString(out.getShape());
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getX().getType() == getType())
    return getX();
  if (auto producer = getX().getDefiningOp<ReshapeOp>()) {
    getXMutable().assign(producer.getX());
    return getResult();
  }
  return {};
}

LogicalResult TransposeOp::verify() {
  RankedTensorType x = getX().getType(), out = getResult().getType();
  ArrayRef<int64_t> perm = getPermutation();
  if (static_cast<int64_t>(perm.size()) != x.getRank())
    return emitOpError("permutation has ") << perm.size() << " entries for a rank-"
                                           << x.getRank() << " input";
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.getRank() || seen[p])
      return emitOpError("permutation is not a permutation of 0..") << x.getRank() - 1;
    seen[p] = true;
    shape.push_back(x.getDimSize(p));
  }
  auto expected = RankedTensorType::get(shape, x.getElementType());
  if (expected != out)
    return emitOpError("result type must be ") << expected << ", got " << out;
  return success();
}

/// A box `inner` at `offsets` must lie inside `outer`.
static LogicalResult checkBox(Operation *op, RankedTensorType inner,
                              RankedTensorType outer, ArrayRef<int64_t> offsets) {
  if (inner.getElementType() != outer.getElementType())
    return op->emitOpError("cannot change the element type");
  if (inner.getRank() != outer.getRank() ||
      static_cast<int64_t>(offsets.size()) != outer.getRank())
    return op->emitOpError("offsets, input and result must have the same rank");
  for (int64_t d = 0; d < outer.getRank(); ++d)
    if (offsets[d] < 0 || offsets[d] + inner.getDimSize(d) > outer.getDimSize(d))
      return op->emitOpError("box of size ") << inner.getDimSize(d) << " at offset "
                                             << offsets[d] << " exceeds dimension "
                                             << d << " of size " << outer.getDimSize(d);
  return success();
}

LogicalResult SliceOp::verify() {
  return checkBox(*this, getResult().getType(), getX().getType(), getOffsets());
}

LogicalResult PadOp::verify() {
  return checkBox(*this, getX().getType(), getResult().getType(), getOffsets());
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  RankedTensorType first = tensorOf(getInputs().front());
  int64_t dim = getDim();
  if (dim < 0 || dim >= first.getRank())
    return emitOpError("dim ") << dim << " out of range for rank " << first.getRank();
  SmallVector<int64_t> shape(first.getShape());
  for (Value input : getInputs().drop_front()) {
    RankedTensorType t = tensorOf(input);
    if (t.getElementType() != first.getElementType() || t.getRank() != first.getRank())
      return emitOpError("inputs must share element type and rank");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != dim && t.getDimSize(d) != first.getDimSize(d))
        return emitOpError("inputs differ in dimension ")
               << d << ", which is not the concatenation dimension";
    shape[dim] += t.getDimSize(dim);
  }
  auto expected = RankedTensorType::get(shape, first.getElementType());
  if (expected != getResult().getType())
    return emitOpError("result type must be ") << expected << ", got "
                                               << getResult().getType();
  return success();
}

LogicalResult ReduceSumOp::verify() {
  RankedTensorType in = getX().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("cannot change the element type");
  if (!isSuffix(out.getShape(), in.getShape()))
    return emitOpError("result shape ") << shapeString(out.getShape())
                                        << " is not a suffix of input shape "
                                        << shapeString(in.getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType dy = getDy().getType(), out = getResult().getType();
  if (dy.getShape().drop_back() != getIds().getType().getShape())
    return emitOpError("dy must be ids' shape plus a feature dimension");
  if (out.getRank() != 2 || out.getDimSize(1) != dy.getShape().back())
    return emitOpError("result must be [vocab, ") << dy.getShape().back() << "]";
  if (out.getElementType() != dy.getElementType())
    return emitOpError("result and dy must share an element type");
  return checkVocabShard(*this, out.getDimSize(0), getRowOffset(), getVocabSize());
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  if (failed(checkFeatureVector(loc, adaptor.getX(), adaptor.getGamma(), "gamma")))
    return failure();
  types.append({adaptor.getX().getType(), adaptor.getGamma().getType(),
                adaptor.getGamma().getType()});
  return success();
}

LogicalResult RMSNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  if (failed(checkFeatureVector(loc, adaptor.getX(), adaptor.getGamma(), "gamma")))
    return failure();
  types.append({adaptor.getX().getType(), adaptor.getGamma().getType()});
  return success();
}

/// A norm's backward with an addend: gamma of x's element type.
static LogicalResult checkNormGradAdd(std::optional<Location> loc, Value x, Value gamma) {
  if (failed(checkFeatureVector(loc, x, gamma, "gamma")) ||
      failed(sameElementType(loc, x, gamma, "x", "gamma")))
    return failure();
  return success();
}

LogicalResult LayerNormGradAddOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  if (failed(checkNormGradAdd(loc, adaptor.getX(), adaptor.getGamma())))
    return failure();
  types.append({adaptor.getX().getType(), adaptor.getGamma().getType(),
                adaptor.getGamma().getType()});
  return success();
}

LogicalResult LayerNormGradAddOp::verify() { return checkEpsilon(*this, getEpsilon()); }

LogicalResult RMSNormGradAddOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  if (failed(checkNormGradAdd(loc, adaptor.getX(), adaptor.getGamma())))
    return failure();
  types.append({adaptor.getX().getType(), adaptor.getGamma().getType()});
  return success();
}

LogicalResult RMSNormGradAddOp::verify() { return checkEpsilon(*this, getEpsilon()); }

LogicalResult SwigluGradOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.append({adaptor.getGate().getType(), adaptor.getGate().getType()});
  return success();
}

LogicalResult GegluGradOp::inferReturnTypes(MLIRContext *, std::optional<Location>, Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  types.append({adaptor.getGate().getType(), adaptor.getGate().getType()});
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

LogicalResult GlobalNormOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  return success();
}

LogicalResult AdamWOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.append(3, adaptor.getParam().getType());
  return success();
}

LogicalResult AdamW8bitOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.append({adaptor.getParam().getType(), adaptor.getMCodes().getType(),
                adaptor.getMAbsmax().getType(), adaptor.getVCodes().getType(),
                adaptor.getVAbsmax().getType()});
  return success();
}

/// The optimizer hyperparameters both AdamW ops share.
template <typename Op> static LogicalResult verifyAdamHyperparameters(Op op) {
  double b1 = op.getBeta1().convertToDouble(), b2 = op.getBeta2().convertToDouble();
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    return op.emitOpError("beta1 and beta2 must be in [0, 1), got ") << b1 << " and " << b2;
  if (!(op.getEpsilon().convertToDouble() > 0))
    return op.emitOpError("epsilon must be > 0");
  if (op.getWeightDecay().convertToDouble() < 0 || op.getMaxGradNorm().convertToDouble() < 0)
    return op.emitOpError("weight_decay and max_grad_norm must be >= 0");
  // The kernels tell the optional scalars apart by position.
  if (op.getLossScale() && !op.getGradNorm())
    return op.emitOpError("loss_scale needs grad_norm");
  return success();
}

LogicalResult AdamWOp::verify() { return verifyAdamHyperparameters(*this); }

LogicalResult AdamW8bitOp::verify() {
  auto param = cast<RankedTensorType>(getParam().getType());
  auto codes = cast<RankedTensorType>(getMCodes().getType());
  auto absmax = cast<RankedTensorType>(getMAbsmax().getType());
  if (codes.getShape() != param.getShape())
    return emitOpError("moment codes must have the parameter's shape ")
           << param << ", got " << codes;
  int64_t blocks = adam8bit::blockCount(param.getNumElements());
  if (absmax.getRank() != 1 || absmax.getDimSize(0) != blocks)
    return emitOpError("moment absmax must be tensor<") << blocks << "xf32> (one per "
           << adam8bit::kBlock << " elements), got " << absmax;
  return verifyAdamHyperparameters(*this);
}

LogicalResult MultiTensorAdamWOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  for (ValueRange group : {adaptor.getParams(), adaptor.getM(), adaptor.getV()})
    for (Value v : group)
      types.push_back(v.getType());
  // The custom parser infers before it moves the parsed attributes into
  // the properties the adaptor reads: look in the dictionary as well.
  auto attr = [&](StringRef name) -> Attribute {
    DictionaryAttr dict = adaptor.getAttributes();
    return dict ? dict.get(name) : Attribute();
  };
  auto castOfAttr = adaptor.getCastOfAttr()
                        ? adaptor.getCastOfAttr()
                        : dyn_cast_or_null<DenseI64ArrayAttr>(attr("cast_of"));
  if (!castOfAttr || castOfAttr.empty())
    return success(); // the verifier reports a missing cast_of
  ArrayRef<int64_t> castOf = castOfAttr.asArrayRef();
  auto castType = adaptor.getCastTypeAttr() ? adaptor.getCastTypeAttr()
                                            : dyn_cast_or_null<TypeAttr>(attr("cast_type"));
  if (!castType || !isa<FloatType>(castType.getValue()))
    return emitOptionalError(loc, "llm.multi_tensor_adamw: cast_of needs a float cast_type");
  Type element = castType.getValue();
  for (int64_t i : castOf) {
    if (i < 0 || i >= static_cast<int64_t>(adaptor.getParams().size()))
      return emitOptionalError(loc, "llm.multi_tensor_adamw: cast_of index ", i,
                               " is not a tensor of the op (", adaptor.getParams().size(),
                               " tensors)");
    auto param = cast<RankedTensorType>(adaptor.getParams()[i].getType());
    types.push_back(RankedTensorType::get(param.getShape(), element));
  }
  return success();
}

LogicalResult MultiTensorAdamWOp::verify() {
  size_t n = getNumTensors();
  if (n == 0)
    return emitOpError("needs at least one tensor");
  if (getGrads().size() != n || getM().size() != n || getV().size() != n)
    return emitOpError("needs as many grads, m and v as params (") << n << "), got "
           << getGrads().size() << ", " << getM().size() << " and " << getV().size();
  for (size_t i = 0; i < n; ++i) {
    Type param = getParams()[i].getType();
    if (getM()[i].getType() != param || getV()[i].getType() != param)
      return emitOpError("tensor ") << i << ": m and v must have the parameter's type " << param;
    if (cast<RankedTensorType>(getGrads()[i].getType()).getShape() !=
        cast<RankedTensorType>(param).getShape())
      return emitOpError("tensor ") << i << ": the gradient must have the parameter's shape, got "
                                    << getGrads()[i].getType() << " for " << param;
  }
  ArrayRef<int64_t> decay = getDecay();
  if (decay.size() != n || llvm::any_of(decay, [](int64_t d) { return d != 0 && d != 1; }))
    return emitOpError("decay must hold one 0 or 1 per tensor (") << n << ")";
  ArrayRef<int64_t> castOf = getCastOf();
  for (size_t k = 0; k < castOf.size(); ++k) {
    if (k > 0 && castOf[k] <= castOf[k - 1])
      return emitOpError("cast_of must be increasing");
    if (!cast<RankedTensorType>(getParams()[castOf[k]].getType()).getElementType().isF32())
      return emitOpError("tensor ") << castOf[k] << ": only an f32 parameter is cast";
  }
  if (getCastType() && castOf.empty())
    return emitOpError("cast_type without cast_of");
  return verifyAdamHyperparameters(*this);
}

#define GET_OP_CLASSES
#include "dialects/LLM/LLMOps.cpp.inc"
