//===- GraphBuilder.cpp - a small DSL for writing llm graphs --------------===//

#include "models/GraphBuilder.h"
#include "dialects/Annotations/Annotations.h"

using namespace mlir;

namespace llmc {

GraphBuilder::GraphBuilder(MLIRContext *context, StringRef modelName)
    : context(context), builder(context), modelName(modelName.str()) {
  context->loadDialect<llm::LLMDialect, func::FuncDialect>();
  module = ModuleOp::create(builder.getUnknownLoc());
  builder.setInsertionPointToEnd(module->getBody());
  func = func::FuncOp::create(builder, loc("forward"), "forward",
                              builder.getFunctionType({}, {}));
  Block *entry = func.addEntryBlock();
  builder.setInsertionPointToStart(entry);
}

Location GraphBuilder::loc(StringRef what) {
  std::string name = modelName;
  if (!currentBlock.empty())
    name += "." + currentBlock;
  return NameLoc::get(builder.getStringAttr(name + "." + what));
}

RankedTensorType GraphBuilder::type(ArrayRef<int64_t> shape, Type element) {
  return RankedTensorType::get(shape, element);
}

Value GraphBuilder::param(StringRef name, ArrayRef<int64_t> shape, StringRef init, double scale,
                          bool trainable) {
  auto t = type(shape, builder.getF32Type());
  auto attr = llm::ParamAttr::get(context, name, init, APFloat(scale), trainable);
  auto attrs = builder.getDictionaryAttr(builder.getNamedAttr(llm::kParamAttrName, attr));
  (void)func.insertArgument(paramCount, t, attrs, loc(name));
  return func.getArgument(paramCount++);
}

Value GraphBuilder::input(StringRef name, ArrayRef<int64_t> shape) {
  unsigned index = func.getNumArguments();
  auto t = type(shape, builder.getI32Type());
  auto attrs = builder.getDictionaryAttr(
      builder.getNamedAttr(kNameAttr, builder.getStringAttr(name)));
  (void)func.insertArgument(index, t, attrs, loc(name));
  return func.getArgument(index);
}

Value GraphBuilder::matmul(Value a, Value b, bool transposeB) {
  return llm::MatmulOp::create(builder, loc("matmul"), a, b, false, transposeB);
}

Value GraphBuilder::add(Value a, Value b) {
  return llm::AddOp::create(builder, loc("add"), a, b);
}

Value GraphBuilder::zeros(ArrayRef<int64_t> shape) {
  return llm::FillOp::create(builder, loc("zeros"), type(shape, builder.getF32Type()),
                             APFloat(0.0));
}

Value GraphBuilder::gelu(Value x) { return llm::GeluOp::create(builder, loc("gelu"), x); }

Value GraphBuilder::sigmoid(Value x) { return llm::SigmoidOp::create(builder, loc("sigmoid"), x); }

Value GraphBuilder::swiglu(Value gate, Value up) {
  return llm::SwigluOp::create(builder, loc("swiglu"), gate, up);
}

Value GraphBuilder::geglu(Value gate, Value up) {
  return llm::GegluOp::create(builder, loc("geglu"), gate, up);
}

Value GraphBuilder::scale(Value x, double factor) {
  return llm::ScaleOp::create(builder, loc("scale"), x, APFloat(factor));
}

Value GraphBuilder::softcap(Value x, double cap) {
  return llm::SoftcapOp::create(builder, loc("softcap"), x, APFloat(cap));
}

Value GraphBuilder::dropout(Value x, double rate) {
  if (rate == 0.0)
    return x;
  return llm::DropoutOp::create(builder, loc("dropout"), x, APFloat(rate),
                                static_cast<int64_t>(1000 + dropoutSites++), nullptr, nullptr);
}

Value GraphBuilder::layernorm(Value x, Value gamma, Value beta, double eps) {
  return llm::LayerNormOp::create(builder, loc("layernorm"), x, gamma, beta, APFloat(eps));
}

Value GraphBuilder::rmsnorm(Value x, Value gamma, double eps, bool unitOffset) {
  return llm::RMSNormOp::create(builder, loc("rmsnorm"), x, gamma, APFloat(eps), unitOffset);
}

Value GraphBuilder::embedding(Value table, Value ids) {
  return llm::EmbeddingOp::create(builder, loc("embedding"), table, ids);
}

Value GraphBuilder::rope(Value x, Value positions, double theta, const RopeScaling &scaling) {
  FloatAttr factor, low, high;
  IntegerAttr original;
  if (scaling.scaled()) {
    factor = builder.getF64FloatAttr(scaling.factor);
    low = builder.getF64FloatAttr(scaling.lowFreqFactor);
    high = builder.getF64FloatAttr(scaling.highFreqFactor);
    original = builder.getI64IntegerAttr(scaling.originalMaxPositions);
  }
  return llm::RopeOp::create(builder, loc("rope"), x, positions, APFloat(theta), false,
                             /*position_limit=*/nullptr, factor, low, high, original);
}

Value GraphBuilder::attention(Value q, Value k, Value v, Value segments, double scale,
                              int64_t window, double softcap) {
  auto op = llm::AttentionOp::create(builder, loc("attention"), q, k, v, segments, APFloat(scale),
                                     true, window > 0 ? builder.getI64IntegerAttr(window) : nullptr,
                                     softcap > 0 ? builder.getF64FloatAttr(softcap) : nullptr);
  return op.getOut();
}

Value GraphBuilder::crossEntropy(Value logits, Value targets) {
  return llm::CrossEntropyOp::create(builder, loc("cross_entropy"), logits, targets, -1);
}

GraphBuilder::MoeRouting GraphBuilder::moeRoute(Value logits, int64_t topK, bool normalize,
                                                const RouterScoring &scoring) {
  auto op = llm::MoERouteOp::create(builder, loc("moe_route"), logits, scoring.bias, topK,
                                    normalize, StringRef(scoring.sigmoid ? "sigmoid" : "softmax"),
                                    APFloat(scoring.scale));
  return {op.getWeights(), op.getExperts(), op.getPositions(), op.getOffsets(),
          op.getProbSum(), op.getCounts(),  op.getZSum()};
}

Value GraphBuilder::moeDispatch(Value x, Value positions) {
  return llm::MoEDispatchOp::create(builder, loc("moe_dispatch"), x, positions, Value());
}

Value GraphBuilder::moeCombine(Value ys, Value positions, Value weights) {
  return llm::MoECombineOp::create(builder, loc("moe_combine"), ys, positions, weights);
}

std::pair<Value, Value> GraphBuilder::moePack(Value xs, Value offsets, int64_t capacity,
                                              int64_t parts, int64_t slot) {
  auto x = cast<RankedTensorType>(xs.getType());
  const int64_t experts = cast<RankedTensorType>(offsets.getType()).getDimSize(0) - 1;
  auto packed = RankedTensorType::get({parts * slot, x.getDimSize(1)}, x.getElementType());
  auto kept = RankedTensorType::get({parts, experts / parts}, builder.getI32Type());
  Operation *pack = llm::MoEPackOp::create(
      builder, loc("moe_pack"), TypeRange{packed, kept}, ValueRange{xs, offsets},
      {builder.getNamedAttr("capacity", builder.getI64IntegerAttr(capacity))});
  return {pack->getResult(0), pack->getResult(1)};
}

std::pair<Value, Value> GraphBuilder::moeRegroup(Value received, Value counts) {
  auto regroup = llm::MoERegroupOp::create(builder, loc("moe_regroup"), received, counts);
  return {regroup.getGrouped(), regroup.getLocalOffsets()};
}

Value GraphBuilder::moeUngroup(Value grouped, Value counts) {
  return llm::MoEUngroupOp::create(builder, loc("moe_ungroup"), grouped, counts);
}

Value GraphBuilder::moeUnpack(Value packed, Value offsets, Value kept, int64_t rows) {
  auto p = cast<RankedTensorType>(packed.getType());
  return llm::MoEUnpackOp::create(
      builder, loc("moe_unpack"),
      RankedTensorType::get({rows, p.getDimSize(1)}, p.getElementType()), packed, offsets, kept);
}

Value GraphBuilder::routerLoss(Value probSum, Value counts, Value zSum, double auxScale,
                               double zScale) {
  return llm::RouterLossOp::create(builder, loc("router_loss"), probSum, counts, zSum,
                                   APFloat(auxScale), APFloat(zScale));
}

Value GraphBuilder::groupedMatmul(Value x, Value offsets, Value weights, bool transposeB) {
  return llm::GroupedMatmulOp::create(builder, loc("grouped_matmul"), x, offsets, weights,
                                      transposeB);
}

Value GraphBuilder::reshape(Value x, ArrayRef<int64_t> shape) {
  auto element = cast<RankedTensorType>(x.getType()).getElementType();
  return llm::ReshapeOp::create(builder, loc("reshape"), type(shape, element), x);
}

Value GraphBuilder::slice(Value x, ArrayRef<int64_t> offsets, ArrayRef<int64_t> sizes) {
  auto element = cast<RankedTensorType>(x.getType()).getElementType();
  return llm::SliceOp::create(builder, loc("slice"), type(sizes, element), x, offsets);
}

Value GraphBuilder::block(StringRef name, const std::function<Value()> &body) {
  return blockValues(name, [&] { return SmallVector<Value>{body()}; })[0];
}

SmallVector<Value> GraphBuilder::blockValues(StringRef name,
                                             const std::function<SmallVector<Value>()> &body) {
  auto op = llm::BlockOp::create(builder, loc(name), TypeRange{}, name);
  Block *inner = new Block();
  op.getBody().push_back(inner);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(inner);
  currentBlock = name.str();
  SmallVector<Value> results = body();
  llm::YieldOp::create(builder, loc("yield"), results);
  currentBlock.clear();
  // Results are known only now: rebuild the op with them.
  builder.setInsertionPoint(op);
  auto typed = llm::BlockOp::create(builder, op.getLoc(), ValueRange(results).getTypes(), name);
  typed.getBody().takeBody(op.getBody());
  op.erase();
  return SmallVector<Value>(typed.getResults());
}

OwningOpRef<ModuleOp> GraphBuilder::finish(Value loss) {
  func::ReturnOp::create(builder, loc("return"), loss);
  func.setFunctionType(builder.getFunctionType(func.getBody().front().getArgumentTypes(),
                                               {loss.getType()}));
  return std::move(module);
}

} // namespace llmc
