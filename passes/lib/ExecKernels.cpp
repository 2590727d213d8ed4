//===- ExecKernels.cpp - llm, qat and dist ops as exec instructions -------===//

#include "passes/lib/ExecKernels.h"

#include "dialects/Annotations/Annotations.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "passes/lib/QATScheme.h"

#include "common/AttentionWorkspace.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace llmc {

int64_t fp8FormatOf(Value v) {
  Type element = cast<RankedTensorType>(v.getType()).getElementType();
  return static_cast<int64_t>(isa<Float8E5M2Type>(element) ? quant::Format::Fp8E5M2
                                                           : quant::Format::Fp8E4M3);
}

namespace {

/// cuBLASLt multiplies fp8 only with both operands K-major (a [M, K], b
/// [N, K]): the CUDA qat_matmul_fp8 transposes the others into its
/// workspace first (16-byte aligned pieces).
int64_t fp8TransposeBytes(qat::MatmulFp8Op op) {
  auto bytes = [](Value v) {
    return (cast<RankedTensorType>(v.getType()).getNumElements() + 255) / 256 * 256;
  };
  return (op.getTransposeA() ? bytes(op.getA()) : 0) + (op.getTransposeB() ? 0 : bytes(op.getB()));
}

} // namespace

int64_t kernelWorkspaceBytes(Operation &op, StringRef target) {
  if (target != "cuda")
    return 0;
  if (auto fp8 = dyn_cast<qat::MatmulFp8Op>(op))
    return fp8TransposeBytes(fp8);
  // Which attention op, whether it has segment ids, and its kv heads (the
  // packed forms say them in attributes; the others in k's shape).
  std::optional<bool> segments;
  bool packed = false, backward = false, rope = false;
  int64_t heads = 0, kvHeads = 0, window = 0;
  bool softcap = false;
  auto unpacked = [&](auto attention, bool isBackward, bool isRope) {
    segments = static_cast<bool>(attention.getSegmentIds());
    window = static_cast<int64_t>(attention.getWindow().value_or(0));
    softcap = static_cast<bool>(attention.getSoftcapAttr());
    backward = isBackward, rope = isRope;
  };
  auto packedForm = [&](auto attention, bool isBackward) {
    segments = static_cast<bool>(attention.getSegmentIds());
    window = static_cast<int64_t>(attention.getWindow().value_or(0));
    softcap = static_cast<bool>(attention.getSoftcapAttr());
    packed = true, backward = isBackward;
    heads = static_cast<int64_t>(attention.getHeads());
    kvHeads = static_cast<int64_t>(attention.getKvHeads());
  };
  llvm::TypeSwitch<Operation *>(&op)
      .Case([&](llm::AttentionOp a) { unpacked(a, false, false); })
      .Case([&](llm::AttentionGradOp a) { unpacked(a, true, false); })
      .Case([&](llm::AttentionRopeOp a) { unpacked(a, false, true); })
      .Case([&](llm::AttentionRopeGradOp a) { unpacked(a, true, true); })
      .Case([&](llm::AttentionPackedOp a) { packedForm(a, false); })
      .Case([&](llm::AttentionPackedGradOp a) { packedForm(a, true); });
  if (!segments)
    return 0;
  auto q = cast<RankedTensorType>(op.getOperand(0).getType());
  contracts::CudnnAttentionShape shape;
  Type element = q.getElementType();
  shape.halfPrecision = element.isBF16() || element.isF16();
  shape.elementBytes = element.getIntOrFloatBitWidth() / 8;
  shape.backward = backward, shape.rope = rope, shape.segments = *segments;
  shape.window = window;
  shape.softcap = softcap;
  shape.b = q.getDimSize(0), shape.t = q.getDimSize(1);
  if (packed) {
    shape.s = shape.t, shape.h = heads, shape.kv = kvHeads;
    shape.d = q.getDimSize(2) / (heads + 2 * kvHeads);
  } else {
    auto k = cast<RankedTensorType>(op.getOperand(1).getType());
    shape.h = q.getDimSize(2), shape.d = q.getDimSize(3);
    shape.s = k.getDimSize(1), shape.kv = k.getDimSize(2);
  }
  return contracts::cudnnAttentionWorkspaceBytes(shape);
}

namespace {

/// Codes reach the kernel as bytes (KV-cache codes, fp8 operands): their
/// formats travel beside them.
void setCodeFormats(Operation &op, exec::KernelOp kernel, OpBuilder &pb) {
  if (std::optional<int64_t> format = llm::cacheCodeFormat(&op))
    kernel->setAttr("format", pb.getI64IntegerAttr(*format));
  if (auto fp8 = dyn_cast<qat::MatmulFp8Op>(op)) {
    kernel->setAttr("a_format", pb.getI64IntegerAttr(fp8FormatOf(fp8.getA())));
    kernel->setAttr("b_format", pb.getI64IntegerAttr(fp8FormatOf(fp8.getB())));
  } else if (auto grouped = dyn_cast<qat::GroupedMatmulFp8Op>(op)) {
    kernel->setAttr("x_format", pb.getI64IntegerAttr(fp8FormatOf(grouped.getX())));
    kernel->setAttr("w_format", pb.getI64IntegerAttr(fp8FormatOf(grouped.getW())));
  } else if (auto grad = dyn_cast<qat::GroupedMatmulWeightGradFp8Op>(op)) {
    kernel->setAttr("x_format", pb.getI64IntegerAttr(fp8FormatOf(grad.getX())));
    kernel->setAttr("dy_format", pb.getI64IntegerAttr(fp8FormatOf(grad.getDy())));
  }
}

/// Rank-dependent terms travel with the kernel; their targets must be
/// explicit even where the op leaves them at the default (0).
void setRankOffsets(Operation &op, exec::KernelOp kernel, OpBuilder &pb) {
  if (Attribute terms = op.getAttr(dist::DistDialect::kRankOffsetsAttrName)) {
    kernel->setAttr(dist::DistDialect::kRankOffsetsAttrName, terms);
    for (auto term : cast<ArrayAttr>(terms).getAsRange<dist::RankOffsetAttr>())
      if (!op.getAttr(term.getAttr()))
        kernel->setAttr(term.getAttr(), pb.getI64IntegerAttr(0));
  }
}

/// A #qat.scheme as the kernels' integers (common/QuantScheme.h).
void setScheme(qat::SchemeAttr scheme, exec::KernelOp kernel, OpBuilder &pb) {
  quant::Scheme k = kernelScheme(scheme);
  kernel->setAttr("format", pb.getI64IntegerAttr(static_cast<int64_t>(k.format)));
  kernel->setAttr("granularity", pb.getI64IntegerAttr(static_cast<int64_t>(k.granularity)));
  kernel->setAttr("axis", pb.getI64IntegerAttr(k.axis));
  kernel->setAttr("block", pb.getI64IntegerAttr(k.block));
  kernel->setAttr("symmetric", pb.getI64IntegerAttr(k.symmetric));
  // A threshold only where there is one: absent reads as none.
  if (k.outlier > 0)
    kernel->setAttr("outlier", pb.getF64FloatAttr(k.outlier));
  // Delayed scaling's history update (common/DelayedScaling.h).
  if (scheme.getObserver() == "delayed") {
    kernel->setAttr("margin", pb.getI64IntegerAttr(scheme.getMargin()));
    kernel->setAttr("most_recent", pb.getI64IntegerAttr(scheme.getAlgo() == "most_recent"));
  }
}

/// Attribute `name` = `value` of an op as the kernel reads it: integers
/// and floats widened, units and booleans as 0/1, strings as the kernels'
/// integers; null when it has no encoding.
Attribute kernelValue(StringRef name, Attribute value, OpBuilder &pb) {
  if (isa<UnitAttr>(value))
    return pb.getI64IntegerAttr(1);
  if (auto b = dyn_cast<BoolAttr>(value))
    return pb.getI64IntegerAttr(b.getValue());
  if (auto i = dyn_cast<IntegerAttr>(value))
    return pb.getI64IntegerAttr(i.getInt());
  if (auto f = dyn_cast<FloatAttr>(value))
    return pb.getF64FloatAttr(f.getValueAsDouble());
  if (auto text = dyn_cast<StringAttr>(value))
    if (std::optional<int64_t> code = kernelStringAttr(name, text.getValue()))
      return pb.getI64IntegerAttr(*code);
  if (isa<DenseI64ArrayAttr>(value))
    return value;
  return {};
}

} // namespace

LogicalResult setKernelAttributes(Operation &op, exec::KernelOp kernel, OpBuilder &pb) {
  setCodeFormats(op, kernel, pb);
  setRankOffsets(op, kernel, pb);
  for (NamedAttribute attr : op.getAttrDictionary()) {
    StringRef name = attr.getName().getValue();
    if (name.contains('.'))
      continue;
    Attribute value = attr.getValue();
    // Which optional operands are present: two optional operands of one
    // type (attention_rope's positions and segment ids) cannot be told
    // apart by the number of inputs alone.
    if (name == "operandSegmentSizes") {
      ArrayRef<int32_t> sizes = cast<DenseI32ArrayAttr>(value).asArrayRef();
      kernel->setAttr("operand_segments",
                      pb.getDenseI64ArrayAttr(SmallVector<int64_t>(sizes.begin(), sizes.end())));
      continue;
    }
    // A result type (multi_tensor_adamw's cast_type): the output buffers
    // carry it.
    if (isa<TypeAttr>(value))
      continue;
    if (auto scheme = dyn_cast<qat::SchemeAttr>(value)) {
      setScheme(scheme, kernel, pb);
      continue;
    }
    Attribute encoded = kernelValue(name, value, pb);
    if (!encoded)
      return op.emitOpError("attribute '") << name << "' has no kernel encoding";
    kernel->setAttr(name, encoded);
  }
  return success();
}

std::string kernelName(Operation &op) {
  // llm ops name their kernel; qat ops are "qat_<op>".
  StringRef dialect = op.getDialect()->getNamespace();
  return dialect == "qat" ? ("qat_" + op.getName().stripDialect()).str()
                          : op.getName().stripDialect().str();
}

StringAttr stepPartOf(Operation &op, Builder &b) {
  if (auto action = op.getAttrOfType<StringAttr>(kActionAttr))
    return action;
  auto mb = op.getAttrOfType<IntegerAttr>(kMicrobatchAttr);
  if (!mb)
    return {};
  return b.getStringAttr((op.hasAttr(kBackwardAttr) ? "B" : "F") + Twine(mb.getInt()));
}

LogicalResult emitCollective(OpBuilder &pb, Operation *op,
                             llvm::function_ref<Value(Value)> bufferFor) {
  auto dim0 = [&](IntegerAttr dim) -> LogicalResult {
    if (dim.getInt() != 0)
      return op->emitOpError("gathers or scatters dimension ")
             << dim.getInt() << "; the exec lowering supports dimension 0 only";
    return success();
  };
  Location loc = op->getLoc();
  // One ordered list; llmc-place-streams moves communication to stream 1.
  constexpr int64_t kOneStream = 0;
  auto inOut = [&]() {
    return std::make_pair(bufferFor(op->getOperand(0)), bufferFor(op->getResult(0)));
  };
  if (auto c = dyn_cast<dist::AllReduceOp>(op)) {
    auto [in, out] = inOut();
    exec::AllReduceOp::create(pb, loc, in, out, c.getAxes(), c.getReduction(), 0, kOneStream);
  } else if (auto c = dyn_cast<dist::ReduceScatterOp>(op)) {
    if (failed(dim0(c.getDimAttr())))
      return failure();
    auto [in, out] = inOut();
    exec::ReduceScatterOp::create(pb, loc, in, out, c.getAxes(), c.getReduction(), 0, kOneStream);
  } else if (auto c = dyn_cast<dist::AllGatherOp>(op)) {
    if (failed(dim0(c.getDimAttr())))
      return failure();
    auto [in, out] = inOut();
    exec::AllGatherOp::create(pb, loc, in, out, c.getAxes(), "sum", 0, kOneStream);
  } else if (auto c = dyn_cast<dist::AllSliceOp>(op)) {
    if (failed(dim0(c.getDimAttr())))
      return failure();
    auto [in, out] = inOut();
    exec::AllSliceOp::create(pb, loc, in, out, c.getAxes(), "sum", 0, kOneStream);
  } else if (auto c = dyn_cast<dist::AllToAllOp>(op)) {
    if (failed(dim0(c.getSplitDimAttr())) || failed(dim0(c.getConcatDimAttr())))
      return failure();
    auto [in, out] = inOut();
    exec::AllToAllOp::create(pb, loc, in, out, c.getAxes(), "sum", 0, kOneStream);
  } else if (auto c = dyn_cast<dist::ReduceOp>(op)) {
    auto [in, out] = inOut();
    exec::ReduceOp::create(pb, loc, in, out, c.getAxes(), c.getReduction(),
                           c.getRootAttr().getInt(), kOneStream);
  } else if (auto c = dyn_cast<dist::BroadcastOp>(op)) {
    auto [in, out] = inOut();
    exec::BroadcastOp::create(pb, loc, in, out, c.getAxes(), "sum", c.getRootAttr().getInt(),
                              kOneStream);
  } else if (auto c = dyn_cast<dist::SendOp>(op)) {
    exec::SendOp::create(pb, loc, bufferFor(c.getInput()), c.getAxis(), c.getShift(), c.getTag(),
                         kOneStream);
  } else if (auto c = dyn_cast<dist::RecvOp>(op)) {
    exec::RecvOp::create(pb, loc, bufferFor(c.getResult()), c.getAxis(), c.getShift(), c.getTag(),
                         kOneStream);
  } else {
    return op->emitOpError("has no exec lowering yet");
  }
  return success();
}

bool isFaultSite(Operation &op) {
  if (!isa<llm::EmbeddingOp, dist::RecvOp>(op))
    return false;
  auto type = dyn_cast<ShapedType>(op.getResult(0).getType());
  return type && isa<FloatType>(type.getElementType());
}

} // namespace llmc
