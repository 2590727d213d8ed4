//===- LLMOps.cpp - llm op shape inference and verifiers ------------------===//
//
// Every shape rule lives in the op's inferReturnTypes, so builders get result
// types for free and the verifier reports the same rule with the op's
// location when a written type disagrees. The attention ops' rules are in
// AttentionOps.cpp, the losses' and the fused head's in LossOps.cpp, the
// mixture of experts' in MoEOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "common/Adam8bit.h"
#include "common/ElementwiseProgram.h"
#include "common/QuantScheme.h"
#include "dialects/LLM/ElementwiseProgramSyntax.h"
#include "dialects/LLM/LLMDialect.h"
#include "dialects/LLM/OpChecks.h"
#include "dialects/Nf4Piece.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace llmc::llm;
using namespace llmc::llm::detail;

namespace {

bool isSuffix(ArrayRef<int64_t> suffix, ArrayRef<int64_t> shape) {
  return suffix.size() <= shape.size() &&
         shape.take_back(suffix.size()) == suffix;
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

LogicalResult checkEpsilon(Operation *op, APFloat epsilon) {
  if (!(epsilon.convertToDouble() >= 0))
    return op->emitOpError("epsilon must be >= 0");
  return success();
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

LogicalResult RopeOp::verify() { return verifyRopeAttrs(*this); }

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
