//===- Interpreter.cpp - evaluate llm IR in double precision --------------===//

#include "compiler/Interpreter.h"

#include "dialects/LLM/LLMDialect.h"
#include "dialects/QAT/QATDialect.h"
#include "passes/lib/QATScheme.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace llmc::llm;
using llmc::ref::RefTensor;

namespace llmc {
namespace {

std::vector<int64_t> shapeOf(Type type) {
  auto t = cast<RankedTensorType>(type);
  return std::vector<int64_t>(t.getShape().begin(), t.getShape().end());
}

/// q [B, T, H, D], k and v [B, T, KV, D]: the column blocks of a packed
/// qkv [B, T, (H + 2·KV)·D].
std::vector<RefTensor> unpackQkv(const RefTensor &qkv, int64_t heads, int64_t kvHeads) {
  const int64_t b = qkv.shape[0], t = qkv.shape[1], d = qkv.shape[2] / (heads + 2 * kvHeads);
  std::vector<RefTensor> pieces;
  int64_t offset = 0;
  for (int64_t n : {heads, kvHeads, kvHeads}) {
    RefTensor piece = ref::slice(qkv, {0, 0, offset}, {b, t, n * d});
    piece.shape = {b, t, n, d};
    pieces.push_back(std::move(piece));
    offset += n * d;
  }
  return pieces;
}

/// The Llama 3 scaling of a rope or attention_rope op (unscaled without it).
template <typename Op> llmc::RopeScaling scalingOf(Op o) {
  if (!o.getScalingFactorAttr())
    return {};
  return {o.getScalingFactorAttr().getValueAsDouble(), o.getLowFreqFactorAttr().getValueAsDouble(),
          o.getHighFreqFactorAttr().getValueAsDouble(), o.getOriginalMaxPositionsAttr().getInt()};
}

class Interpreter {
public:
  explicit Interpreter(int64_t step) : step(step) {}

  LogicalResult runBlock(Block &block);
  const RefTensor &get(Value v) { return values[v]; }
  void set(Value v, RefTensor t) { values[v] = std::move(t); }

private:
  LogicalResult runOp(Operation *op);
  llvm::DenseMap<Value, RefTensor> values;
  int64_t step;
};

LogicalResult Interpreter::runBlock(Block &block) {
  for (Operation &op : block)
    if (failed(runOp(&op)))
      return failure();
  return success();
}

LogicalResult Interpreter::runOp(Operation *op) {
  auto in = [&](unsigned i) -> const RefTensor & { return values[op->getOperand(i)]; };
  auto out = [&](unsigned i, RefTensor t) { values[op->getResult(i)] = std::move(t); };
  auto outs = [&](std::vector<RefTensor> ts) {
    for (unsigned i = 0; i < ts.size(); ++i) out(i, std::move(ts[i]));
  };
  auto d = [](APFloat f) { return f.convertToDouble(); };
  auto vec = [](ArrayRef<int64_t> a) { return std::vector<int64_t>(a.begin(), a.end()); };
  auto optional = [&](Value v) -> const RefTensor * { return v ? &values[v] : nullptr; };

  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](BlockOp b) {
        if (failed(runBlock(b.getBody().front())))
          return failure();
        auto yield = cast<YieldOp>(b.getBody().front().getTerminator());
        for (auto [r, v] : llvm::zip(b.getResults(), yield.getValues()))
          values[r] = values[v];
        return success();
      })
      .Case([&](YieldOp) { return success(); })
      .Case([&](func::ReturnOp) { return success(); })
      .Case([&](FillOp f) {
        RefTensor t = RefTensor::zeros(shapeOf(f.getType()));
        std::fill(t.data.begin(), t.data.end(), d(f.getValue()));
        out(0, t);
        return success();
      })
      .Case([&](MatmulOp m) {
        out(0, ref::matmul(in(0), in(1), m.getTransposeA(), m.getTransposeB()));
        return success();
      })
      .Case([&](AddOp) { out(0, ref::add(in(0), in(1))); return success(); })
      .Case([&](MulOp) { out(0, ref::mul(in(0), in(1))); return success(); })
      .Case([&](ScaleOp s) { out(0, ref::scale(in(0), d(s.getFactor()))); return success(); })
      .Case([&](GeluOp) { out(0, ref::gelu(in(0))); return success(); })
      .Case([&](SiluOp) { out(0, ref::silu(in(0))); return success(); })
      .Case([&](SwigluOp) { out(0, ref::swiglu(in(0), in(1))); return success(); })
      .Case([&](GeluGradOp) { out(0, ref::geluGrad(in(0), in(1))); return success(); })
      .Case([&](SiluGradOp) { out(0, ref::siluGrad(in(0), in(1))); return success(); })
      .Case([&](SwigluGradOp) { outs(ref::swigluGrad(in(0), in(1), in(2))); return success(); })
      .Case([&](DropoutOp o) {
        out(0, ref::dropout(in(0), d(o.getRate()), o.getSeed(), step,
                            vec(o.getGlobalShape().value_or(ArrayRef<int64_t>{})),
                            vec(o.getOffsets().value_or(ArrayRef<int64_t>{}))));
        return success();
      })
      .Case([&](CastOp) { out(0, in(0)); return success(); })
      .Case([&](FusedElementwiseOp o) {
        std::vector<RefTensor> inputs;
        for (size_t i = 0; i < o.getInputs().size(); ++i)
          inputs.push_back(in(i));
        outs(ref::fusedElementwise(inputs, shapeOf(o.getOuts()[0].getType()), vec(o.getProgram()),
                                   vec(o.getYields()), step,
                                   vec(o.getGlobalShape().value_or(ArrayRef<int64_t>{})),
                                   vec(o.getOffsets().value_or(ArrayRef<int64_t>{}))));
        return success();
      })
      .Case([&](LayerNormOp o) {
        out(0, ref::layernorm(in(0), in(1), in(2), d(o.getEpsilon())));
        return success();
      })
      .Case([&](LayerNormGradOp o) {
        outs(ref::layernormGrad(in(0), in(1), in(2), d(o.getEpsilon())));
        return success();
      })
      .Case([&](RMSNormOp o) {
        out(0, ref::rmsnorm(in(0), in(1), d(o.getEpsilon())));
        return success();
      })
      .Case([&](RMSNormGradOp o) {
        outs(ref::rmsnormGrad(in(0), in(1), in(2), d(o.getEpsilon())));
        return success();
      })
      .Case([&](AddLayerNormOp o) {
        outs(ref::addLayernorm(in(0), in(1), in(2), in(3), d(o.getEpsilon()),
                               optional(o.getBias())));
        return success();
      })
      .Case([&](AddRMSNormOp o) {
        outs(ref::addRmsnorm(in(0), in(1), in(2), d(o.getEpsilon())));
        return success();
      })
      .Case([&](LayerNormGradAddOp o) {
        outs(ref::layernormGradAdd(in(0), in(1), in(2), in(3), d(o.getEpsilon())));
        return success();
      })
      .Case([&](RMSNormGradAddOp o) {
        outs(ref::rmsnormGradAdd(in(0), in(1), in(2), in(3), d(o.getEpsilon())));
        return success();
      })
      .Case([&](EmbeddingOp o) {
        out(0, ref::embedding(in(0), in(1), o.getRowOffset(), o.getVocabSize()));
        return success();
      })
      .Case([&](EmbeddingGradOp o) {
        out(0, ref::embeddingGrad(in(0), in(1), o.getType().getDimSize(0), o.getRowOffset(),
                                  o.getVocabSize()));
        return success();
      })
      .Case([&](RopeOp o) {
        out(0, ref::rope(in(0), optional(o.getPositions()), d(o.getTheta()), o.getInverse(),
                         scalingOf(o)));
        return success();
      })
      // attention_rope(_grad): the references of rope, attention(_grad)
      // and the inverse rope in turn.
      .Case([&](AttentionRopeOp o) {
        const RefTensor *positions = optional(o.getPositions());
        double theta = d(o.getTheta());
        outs(ref::attention(ref::rope(in(0), positions, theta, false, scalingOf(o)),
                            ref::rope(in(1), positions, theta, false, scalingOf(o)), in(2),
                            optional(o.getSegmentIds()), d(o.getScale()), o.getCausal()));
        return success();
      })
      .Case([&](AttentionRopeGradOp o) {
        const RefTensor *positions = optional(o.getPositions());
        double theta = d(o.getTheta());
        std::vector<RefTensor> grads = ref::attentionGrad(
            ref::rope(in(0), positions, theta, false, scalingOf(o)),
            ref::rope(in(1), positions, theta, false, scalingOf(o)), in(2), in(3), in(4), in(5),
            optional(o.getSegmentIds()), d(o.getScale()), o.getCausal());
        for (int i = 0; i < 2; ++i)
          grads[i] = ref::rope(grads[i], positions, theta, true, scalingOf(o));
        outs(std::move(grads));
        return success();
      })
      .Case([&](AttentionOp o) {
        const RefTensor *seg = o.getSegmentIds() ? &values[o.getSegmentIds()] : nullptr;
        outs(ref::attention(in(0), in(1), in(2), seg, d(o.getScale()), o.getCausal()));
        return success();
      })
      // The packed forms: the same references on qkv's column blocks.
      .Case([&](AttentionPackedOp o) {
        const RefTensor *seg = o.getSegmentIds() ? &values[o.getSegmentIds()] : nullptr;
        std::vector<RefTensor> qkv = unpackQkv(in(0), o.getHeads(), o.getKvHeads());
        outs(ref::attention(qkv[0], qkv[1], qkv[2], seg, d(o.getScale()), o.getCausal()));
        return success();
      })
      .Case([&](AttentionPackedGradOp o) {
        const RefTensor *seg = o.getSegmentIds() ? &values[o.getSegmentIds()] : nullptr;
        std::vector<RefTensor> qkv = unpackQkv(in(0), o.getHeads(), o.getKvHeads());
        std::vector<RefTensor> grads = ref::attentionGrad(qkv[0], qkv[1], qkv[2], in(1), in(2),
                                                          in(3), seg, d(o.getScale()),
                                                          o.getCausal());
        for (RefTensor &g : grads)
          g.shape = {g.shape[0], g.shape[1], g.shape[2] * g.shape[3]};
        out(0, ref::concat(grads, -1));
        return success();
      })
      // Float caches hold the values as casts do here (exactly); an int8
      // cache holds what its codes and scales say.
      .Case([&](KvCacheWriteOp o) {
        if (o.getScales())
          outs(ref::kvCacheWriteInt8(in(0), in(4), in(1), in(2), in(3)));
        else
          out(0, ref::kvCacheWrite(in(0), in(1), in(2), in(3)));
        return success();
      })
      .Case([&](PagedAttentionOp o) {
        double scale = d(o.getScale());
        if (o.getScales().empty()) {
          out(0, ref::pagedAttention(in(0), in(1), in(2), in(3), in(4), scale));
          return success();
        }
        out(0, ref::pagedAttention(in(0), ref::dequantizeCache(in(1), in(5)),
                                   ref::dequantizeCache(in(2), in(6)), in(3), in(4), scale));
        return success();
      })
      .Case([&](AttentionGradOp o) {
        const RefTensor *seg = o.getSegmentIds() ? &values[o.getSegmentIds()] : nullptr;
        outs(ref::attentionGrad(in(0), in(1), in(2), in(3), in(4), in(5), seg,
                                d(o.getScale()), o.getCausal()));
        return success();
      })
      .Case([&](CrossEntropyOp o) {
        out(0, ref::crossEntropy(in(0), in(1), o.getIgnoreIndex(), o.getNumClasses()));
        return success();
      })
      .Case([&](CrossEntropyGradOp o) {
        out(0, ref::crossEntropyGrad(in(0), in(1), in(2).data.at(0), o.getIgnoreIndex(),
                                     o.getNumClasses()));
        return success();
      })
      .Case([&](LinearCrossEntropyOp o) {
        out(0, ref::linearCrossEntropy(in(0), in(1), in(2), o.getTransposeB(),
                                       o.getIgnoreIndex(), nullptr, o.getNumClasses())[0]);
        out(1, RefTensor::zeros(shapeOf(o.getScratch().getType())));
        return success();
      })
      .Case([&](LinearCrossEntropyTrainOp o) {
        double dloss = in(3).data.at(0);
        std::vector<RefTensor> results = ref::linearCrossEntropy(
            in(0), in(1), in(2), o.getTransposeB(), o.getIgnoreIndex(), &dloss,
            o.getNumClasses());
        if (o.getFrozenWeight())
          results.pop_back(); // no dw
        outs(std::move(results));
        values[o.getScratch()] = RefTensor::zeros(shapeOf(o.getScratch().getType()));
        return success();
      })
      .Case([&](LinearCrossEntropyPartialOp o) {
        outs(ref::linearCrossEntropyPartial(in(0), in(1), in(2), o.getTransposeB(),
                                            o.getClassOffset(), o.getNumClasses(),
                                            o.getIgnoreIndex()));
        out(3, RefTensor::zeros(shapeOf(o.getScratch().getType())));
        return success();
      })
      .Case([&](LinearCrossEntropyPartialGradOp o) {
        std::vector<RefTensor> results = ref::linearCrossEntropyPartialGrad(
            in(0), in(1), in(2), in(3), in(4), in(5), o.getTransposeB(), o.getClassOffset(),
            o.getNumClasses(), o.getIgnoreIndex());
        if (o.getFrozenWeight())
          results.pop_back(); // no dw
        outs(std::move(results));
        values[o.getScratch()] = RefTensor::zeros(shapeOf(o.getScratch().getType()));
        return success();
      })
      .Case([&](MatmulNf4Op o) {
        out(0, ref::matmulNf4(in(0), in(1), in(2), in(3), in(4).data.at(0),
                              vec(o.getWeightShape()), o.getBlock(), o.getTransposeB()));
        return success();
      })
      .Case([&](MatmulIntOp o) {
        RefTensor zeroPoint = o.getZeroPoint() ? in(3) : RefTensor();
        out(0, ref::matmulInt(in(0), in(1), in(2), zeroPoint, vec(o.getWeightShape()),
                              static_cast<int>(o.getBits()), o.getBlock().value_or(0),
                              o.getChannelAxis().value_or(-1), o.getTransposeB()));
        return success();
      })
      .Case([&](LinearOp o) {
        std::vector<RefTensor> results =
            ref::linear(in(0), in(1), o.getBias() ? &values[o.getBias()] : nullptr,
                        o.getResidual() ? &values[o.getResidual()] : nullptr, o.getTransposeB(),
                        o.getGelu());
        out(0, results[0]);
        if (o.getKeepPre())
          out(1, results[1]);
        return success();
      })
      .Case([&](MatmulGeluGradOp o) {
        RefTensor dpre = ref::geluGrad(in(2), ref::matmul(in(0), in(1), false, o.getTransposeB()));
        if (o.getDb())
          out(1, ref::reduceSum(dpre, shapeOf(o.getDb().getType())));
        out(0, std::move(dpre));
        return success();
      })
      .Case([&](MatmulSwigluGradOp o) {
        outs(ref::swigluGrad(in(2), in(3), ref::matmul(in(0), in(1), false, o.getTransposeB())));
        return success();
      })
      .Case([&](LinearWeightGradOp) {
        outs(ref::linearWeightGrad(in(0), in(1)));
        return success();
      })
      .Case([&](ReduceMaxOp op) {
        out(0, ref::reduceMax(in(0), op.getClassOffset(), op.getNumClasses()));
        return success();
      })
      .Case([&](StopGradientOp) { out(0, in(0)); return success(); })
      .Case([&](CrossEntropyPartialOp o) {
        outs(ref::crossEntropyPartial(in(0), in(1), in(2), o.getClassOffset(), o.getNumClasses(),
                                      o.getIgnoreIndex()));
        return success();
      })
      .Case([&](CrossEntropyPartialGradOp o) {
        out(0, ref::crossEntropyPartialGrad(in(0), in(1), in(2), in(3), in(4), o.getClassOffset(),
                                            o.getNumClasses(), o.getIgnoreIndex()));
        return success();
      })
      .Case([&](CrossEntropyFinishOp o) {
        out(0, ref::crossEntropyFinish(in(0), in(1), in(2), in(3), o.getIgnoreIndex()));
        return success();
      })
      .Case([&](CrossEntropyFinishGradOp o) {
        outs(ref::crossEntropyFinishGrad(in(0), in(1), in(2).data.at(0), o.getIgnoreIndex()));
        return success();
      })
      .Case([&](ReshapeOp r) {
        RefTensor t = in(0);
        t.shape = shapeOf(r.getType());
        out(0, t);
        return success();
      })
      .Case([&](TransposeOp t) { out(0, ref::transpose(in(0), vec(t.getPermutation()))); return success(); })
      .Case([&](SliceOp s) {
        out(0, ref::slice(in(0), vec(s.getOffsets()), shapeOf(s.getType())));
        return success();
      })
      .Case([&](PadOp p) {
        out(0, ref::pad(in(0), vec(p.getOffsets()), shapeOf(p.getType())));
        return success();
      })
      .Case([&](ConcatOp c) {
        std::vector<RefTensor> xs;
        for (Value v : c.getInputs()) xs.push_back(values[v]);
        out(0, ref::concat(xs, c.getDim()));
        return success();
      })
      .Case([&](ReduceSumOp r) { out(0, ref::reduceSum(in(0), shapeOf(r.getType()))); return success(); })
      .Case([&](GlobalNormOp g) {
        std::vector<RefTensor> xs;
        for (Value v : g.getInputs()) xs.push_back(values[v]);
        RefTensor n = ref::globalNorm(xs);
        if (g.getSquared())
          n.data[0] *= n.data[0];
        out(0, n);
        return success();
      })
      .Case([&](SqrtOp) {
        RefTensor t = in(0);
        for (double &v : t.data) v = std::sqrt(v);
        out(0, t);
        return success();
      })
      .Case([&](AdamWOp a) {
        double norm = a.getGradNorm() ? values[a.getGradNorm()].data.at(0) : 0.0;
        outs(ref::adamw(in(0), in(1), in(2), in(3), in(4).data.at(0), in(5).data.at(0),
                        a.getGradNorm() ? &norm : nullptr, d(a.getBeta1()), d(a.getBeta2()),
                        d(a.getEpsilon()), d(a.getWeightDecay()), d(a.getMaxGradNorm()),
                        a.getLossScale() ? values[a.getLossScale()].data.at(0) : 1.0));
        return success();
      })
      .Case([&](MultiTensorAdamWOp a) {
        auto tensors = [&](ValueRange vs) {
          std::vector<RefTensor> ts;
          for (Value v : vs) ts.push_back(values[v]);
          return ts;
        };
        double norm = a.getGradNorm() ? values[a.getGradNorm()].data.at(0) : 0.0;
        outs(ref::multiTensorAdamw(
            tensors(a.getParams()), tensors(a.getGrads()), tensors(a.getM()), tensors(a.getV()),
            values[a.getLr()].data.at(0), values[a.getStep()].data.at(0),
            a.getGradNorm() ? &norm : nullptr, d(a.getBeta1()), d(a.getBeta2()),
            d(a.getEpsilon()), d(a.getWeightDecay()), d(a.getMaxGradNorm()),
            a.getLossScale() ? values[a.getLossScale()].data.at(0) : 1.0, vec(a.getDecay()),
            vec(a.getCastOf())));
        return success();
      })
      .Case([&](qat::ObserveOp o) {
        out(0, ref::quantObserve(in(0), kernelScheme(o.getScheme()), optional(o.getColumns())));
        return success();
      })
      .Case([&](qat::FakeQuantOp o) {
        out(0, ref::fakeQuant(in(0), in(1), kernelScheme(o.getScheme()), optional(o.getColumns())));
        return success();
      })
      .Case([&](qat::FakeQuantGradOp o) {
        out(0, ref::fakeQuantGrad(in(0), in(1), in(2), kernelScheme(o.getScheme()),
                                  optional(o.getColumns())));
        return success();
      })
      .Case([&](qat::EmaOp o) {
        out(0, ref::quantEma(in(0), in(1), d(o.getMomentum())));
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError("is not supported by the reference interpreter");
      });
}

} // namespace

FailureOr<std::vector<RefTensor>> interpret(func::FuncOp func,
                                            const std::vector<RefTensor> &args,
                                            int64_t step) {
  if (args.size() != func.getNumArguments())
    return func.emitError() << "interpreter: " << args.size() << " arguments for "
                            << func.getNumArguments() << " parameters";
  Interpreter interp(step);
  for (auto [arg, value] : llvm::zip(func.getArguments(), args))
    interp.set(arg, value);
  Block &body = func.getBody().front();
  if (failed(interp.runBlock(body)))
    return failure();
  std::vector<RefTensor> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(interp.get(v));
  return results;
}

} // namespace llmc
