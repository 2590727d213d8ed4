//===- KvCache.cpp - @prefill / @decode over a paged KV cache -------------===//
//
// Generation runs the model on a few new tokens per sequence while every
// earlier token's keys and values stay cached. This pass turns @logits (the
// model's logits, derived from @forward) into such a step: each causal
// llm.attention becomes two llm.kv_cache_write (the new keys and values
// into the layer's block pools, state tied to the result so they are
// updated in place) and an llm.paged_attention over the pools. The step
// returns the logits of each row's last column only, so the head's matmul
// runs on one token per row. The graph must take `positions` (the model
// builders add it for inference; rotary embeddings reading it get tables for
// the whole context); the step adds `block_table` [B, M] and
// `cache_positions` [B, T] (−1: padding) inputs.
//
// The pools may be narrower than the keys (`cache-type`): a 16-bit float
// under f32, or one-byte codes, int8 (i8) or fp8 E4M3 (f8E4M3FN), with one
// f32 scale per token slot and kv head, kept in scale pools beside the code
// pools. Decode reads the whole cache
// every step, so its bytes are the step's time once the weights are small.
//
//===----------------------------------------------------------------------===//

#include "dialects/Annotations/Annotations.h"
#include "dialects/Dist/DistDialect.h"
#include "passes/Passes.h"
#include "passes/lib/EntryPoints.h"
#include "passes/lib/Inlining.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSwitch.h"

namespace llmc {
#define GEN_PASS_DEF_KVCACHE
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

/// The named input of `func`, or null.
BlockArgument inputNamed(func::FuncOp func, StringRef name) {
  for (BlockArgument arg : func.getArguments())
    if (auto n = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
        n && n.getValue() == name)
      return arg;
  return nullptr;
}

struct KvCachePass : llmc::impl::KvCacheBase<KvCachePass> {
  using KvCacheBase::KvCacheBase;

  /// Appends an argument with `role` and `name`; returns it.
  BlockArgument addArgument(func::FuncOp func, Type type, StringRef role, StringRef name) {
    MLIRContext *ctx = func.getContext();
    unsigned index = func.getNumArguments();
    NamedAttribute attrs[] = {NamedAttribute(StringAttr::get(ctx, kRoleAttr), StringAttr::get(ctx, role)),
                              NamedAttribute(StringAttr::get(ctx, kNameAttr), StringAttr::get(ctx, name))};
    if (failed(func.insertArgument(index, type, DictionaryAttr::get(ctx, attrs), func.getLoc())))
      return nullptr;
    return func.getArgument(index);
  }

  /// Runs the head on the last column only: walks from the returned logits
  /// [B, T, V] through casts, vocabulary gathers, slices and soft-caps
  /// (Gemma 2's, elementwise) to the matmul
  /// producing them, slices its input to [B, 1, C] and narrows every type
  /// on the way back. Returns the [B, V] logits.
  FailureOr<Value> lastColumnLogits(OpBuilder &b, Value logits) {
    SmallVector<Operation *> chain;
    Value v = logits;
    auto isProduct = [](Operation *op) {
      return isa<llm::MatmulOp, llm::MatmulNf4Op, llm::MatmulIntOp>(op);
    };
    while (Operation *def = v.getDefiningOp()) {
      chain.push_back(def);
      if (isProduct(def))
        break;
      if (!isa<llm::CastOp, llm::SliceOp, dist::AllGatherOp, llm::SoftcapOp>(def) ||
          def->getNumOperands() != 1)
        return def->emitOpError("kv-cache: expected the logits to come from the head's "
                                "llm.matmul through casts, gathers, slices and soft-caps");
      v = def->getOperand(0);
    }
    // llm.matmul, or llm.matmul_nf4 / matmul_int over a quantized head: x is
    // operand 0 of each.
    Operation *matmul = chain.empty() || !isProduct(chain.back()) ? nullptr : chain.back();
    if (!matmul)
      return emitError(logits.getLoc(), "kv-cache: the logits do not come from an llm.matmul");
    auto hidden = cast<RankedTensorType>(matmul->getOperand(0).getType());
    if (hidden.getRank() != 3)
      return matmul->emitOpError("kv-cache: expected the head's input to be [B, T, C], got ")
             << hidden;
    int64_t B = hidden.getDimSize(0), T = hidden.getDimSize(1), C = hidden.getDimSize(2);
    auto narrow = [&](Value value) {
      auto type = cast<RankedTensorType>(value.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[1] = 1;
      value.setType(RankedTensorType::get(shape, type.getElementType()));
    };
    if (T != 1) {
      b.setInsertionPoint(matmul);
      Value last = llm::SliceOp::create(b, matmul->getLoc(),
                                        RankedTensorType::get({B, 1, C}, hidden.getElementType()),
                                        matmul->getOperand(0), ArrayRef<int64_t>{0, T - 1, 0});
      matmul->setOperand(0, last);
      for (Operation *op : llvm::reverse(chain))
        narrow(op->getResult(0));
    }
    auto type = cast<RankedTensorType>(logits.getType());
    b.setInsertionPointAfterValue(logits);
    return llm::ReshapeOp::create(b, logits.getLoc(),
                                  RankedTensorType::get({B, type.getDimSize(2)},
                                                        type.getElementType()),
                                  logits)
        .getResult();
  }

  /// Whether pools of `element` hold codes with scale pools (int8, fp8).
  static bool isCodes(Type element) {
    return element.isInteger(8) || isa<Float8E4M3FNType>(element);
  }

  /// The pools' element type for keys of type `keys`: `cache-type`, or
  /// the keys' own when it is empty.
  FailureOr<Type> cacheElementType(func::FuncOp func, Type keys) {
    Builder b(func.getContext());
    Type element = llvm::StringSwitch<Type>(cacheType)
                       .Case("", keys)
                       .Case("f32", b.getF32Type())
                       .Case("bf16", b.getBF16Type())
                       .Case("f16", b.getF16Type())
                       .Case("int8", b.getIntegerType(8))
                       .Case("fp8_e4m3", b.getType<Float8E4M3FNType>())
                       .Default(nullptr);
    if (!element)
      return func.emitError("kv-cache: cache-type must be f32, bf16, f16, int8 or fp8_e4m3, got '")
             << cacheType << "'";
    // A float wider than the keys holds nothing they do not.
    if (element != keys && !isCodes(element) &&
        !(keys.isF32() && (element.isBF16() || element.isF16())))
      return func.emitError("kv-cache: a ")
             << element << " cache cannot hold " << keys
             << " keys: use the keys' type, a 16-bit float under f32, int8 or fp8_e4m3";
    return element;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (program != "prefill" && program != "decode") {
      module.emitError("kv-cache: program must be prefill or decode, got '") << program << "'";
      return signalPassFailure();
    }
    if (page <= 0 || blocks <= 0 || maxBlocks <= 0) {
      module.emitError("kv-cache: page, blocks and max-blocks must be > 0");
      return signalPassFailure();
    }
    func::FuncOp func = lookupFunc(module, "logits");
    if (!func) {
      module.emitError("kv-cache: no @logits (run llmc-inference-entry-points first)");
      return signalPassFailure();
    }
    // The step replaces every training and evaluation entry point.
    for (StringRef name : {"forward", "calibrate"})
      if (func::FuncOp f = lookupFunc(module, name))
        f.erase();
    func.setSymName(program);
    flattenBlocks(func);

    BlockArgument tokens = inputNamed(func, "tokens");
    BlockArgument positions = inputNamed(func, "positions");
    if (!tokens || !positions) {
      func.emitError("kv-cache: @logits must take `tokens` and `positions` inputs (build the "
                     "model with position inputs, as llmc compile --inference does)");
      return signalPassFailure();
    }
    auto tokensType = cast<RankedTensorType>(tokens.getType());
    int64_t B = tokensType.getDimSize(0), T = tokensType.getDimSize(1);
    OpBuilder b(func.getContext());
    Type i32 = b.getI32Type();
    BlockArgument table =
        addArgument(func, RankedTensorType::get({B, maxBlocks}, i32), "input", "block_table");
    BlockArgument cachePositions =
        addArgument(func, RankedTensorType::get({B, T}, i32), "input", "cache_positions");

    // Rotary tables must reach the longest context, not this step's T.
    func.walk([&](llm::RopeOp rope) {
      if (rope.getPositions())
        rope.setPositionLimitAttr(b.getI64IntegerAttr(maxBlocks * page));
    });
    SmallVector<llm::AttentionOp> attentions;
    func.walk([&](llm::AttentionOp op) { attentions.push_back(op); });
    if (attentions.empty()) {
      func.emitError("kv-cache: the model has no llm.attention to cache");
      return signalPassFailure();
    }
    CacheResults caches;
    for (auto [layer, attention] : llvm::enumerate(attentions))
      if (failed(cacheAttention(func, attention, layer, table, cachePositions, caches)))
        return signalPassFailure();
    if (failed(returnLogitsAndCaches(func, caches)))
      return signalPassFailure();
  }

  /// The caches a step writes: each updated pool (and scale pool) and the
  /// argument it is tied to.
  struct CacheResults {
    SmallVector<Value> updated;
    SmallVector<unsigned> tiedTo;
  };

  /// Replaces `attention` (layer `layer`) by writes of its keys and values
  /// into their pools and a paged attention over them.
  LogicalResult cacheAttention(func::FuncOp func, llm::AttentionOp attention, size_t layer,
                               Value table, Value cachePositions, CacheResults &caches) {
    if (!attention.getCausal() || attention.getSegmentIds() || !attention.getLse().use_empty())
      return attention.emitOpError("kv-cache: only causal attention without segment ids can "
                                   "read a cache");
    auto block = attention->getAttrOfType<StringAttr>(kBlockNameAttr);
    std::string prefix = "kv/" + (block ? block.getValue().str() : "layer" + std::to_string(layer));
    auto keys = cast<RankedTensorType>(attention.getK().getType());
    FailureOr<Type> element = cacheElementType(func, keys.getElementType());
    if (failed(element))
      return failure();
    const bool quantized = isCodes(*element);
    int64_t kv = keys.getDimSize(2), d = keys.getDimSize(3);
    OpBuilder b(attention);
    auto poolType = RankedTensorType::get({blocks, page, kv, d}, *element);
    auto scaleType = RankedTensorType::get({blocks, page, kv}, b.getF32Type());
    Location loc = attention.getLoc();
    SmallVector<Operation *> created;
    // One pool (and with codes its scale pool) per input, written in place.
    auto cacheOf = [&](Value rows, StringRef which) -> std::pair<Value, Value> {
      BlockArgument pool = addArgument(func, poolType, "kv_cache", prefix + "." + which.str());
      BlockArgument scales = quantized ? addArgument(func, scaleType, "kv_cache",
                                                     prefix + "." + which.str() + "_scale")
                                       : nullptr;
      auto write = llm::KvCacheWriteOp::create(b, loc, pool, rows, table, cachePositions,
                                               scales ? Value(scales) : Value());
      created.push_back(write);
      caches.updated.push_back(write.getResult());
      caches.tiedTo.push_back(pool.getArgNumber());
      if (!scales)
        return {write.getResult(), nullptr};
      caches.updated.push_back(write.getNewScales());
      caches.tiedTo.push_back(scales.getArgNumber());
      return {write.getResult(), write.getNewScales()};
    };
    auto [k, kScales] = cacheOf(attention.getK(), "k");
    auto [v, vScales] = cacheOf(attention.getV(), "v");
    SmallVector<Value> scales;
    if (quantized)
      scales = {kScales, vScales};
    auto out = llm::PagedAttentionOp::create(b, loc, attention.getQ(), k, v, table, cachePositions,
                                             scales, attention.getScaleAttr(),
                                             attention.getWindowAttr(), attention.getSoftcapAttr());
    created.push_back(out);
    if (block)
      for (Operation *op : created) op->setAttr(kBlockNameAttr, block);
    attention.getOut().replaceAllUsesWith(out.getOut());
    attention.erase();
    return success();
  }

  /// The step returns the last column's logits, then every updated cache
  /// tied to the argument it replaces.
  LogicalResult returnLogitsAndCaches(func::FuncOp func, const CacheResults &caches) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    OpBuilder b(ret);
    FailureOr<Value> logits = lastColumnLogits(b, ret.getOperand(0));
    if (failed(logits))
      return failure();
    SmallVector<Value> results{*logits};
    results.append(caches.updated);
    b.setInsertionPoint(ret);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> types;
    for (Value value : results)
      types.push_back(value.getType());
    func.setFunctionType(b.getFunctionType(func.getArgumentTypes(), types));
    func.setAllResultAttrs(SmallVector<DictionaryAttr>(types.size(), b.getDictionaryAttr({})));
    func.setResultAttr(0, kRoleAttr, b.getStringAttr("output"));
    func.setResultAttr(0, kNameAttr, b.getStringAttr("logits"));
    for (auto [i, arg] : llvm::enumerate(caches.tiedTo))
      func.setResultAttr(1 + i, kTiedToAttr, b.getI64IntegerAttr(arg));
    return success();
  }
};

} // namespace
