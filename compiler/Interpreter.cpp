//===- Interpreter.cpp - evaluate llm IR in double precision --------------===//
//
// Structure (func, llm.block) is walked here; every other op is evaluated
// by the reference evaluator registered under its name
// (kernels/reference/Evaluator.h), which reads the op through a RefCall:
// its operand values, its attributes encoded as the exec lowering encodes
// kernel attributes, and its result shapes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Interpreter.h"

#include "dialects/LLM/LLMDialect.h"
#include "dialects/QAT/QATDialect.h"
#include "kernels/reference/Evaluator.h"
#include "passes/lib/QATScheme.h"

using namespace mlir;
using namespace llmc::llm;
using llmc::ref::RefTensor;

namespace llmc {
namespace {

std::vector<int64_t> shapeOf(Type type) {
  auto t = cast<RankedTensorType>(type);
  return std::vector<int64_t>(t.getShape().begin(), t.getShape().end());
}

/// Adds attribute `name` = `value` to `call` in the kernels' encoding;
/// attributes no evaluator reads (types, other strings) are left out.
void addAttribute(ref::RefCall &call, StringRef name, Attribute value) {
  std::string key = name.str();
  if (name == "operandSegmentSizes") {
    for (int32_t size : cast<DenseI32ArrayAttr>(value).asArrayRef()) call.segments.push_back(size);
  } else if (isa<UnitAttr>(value)) {
    call.ints[key] = 1;
  } else if (auto b = dyn_cast<BoolAttr>(value)) {
    call.ints[key] = b.getValue();
  } else if (auto i = dyn_cast<IntegerAttr>(value)) {
    call.ints[key] = i.getInt();
  } else if (auto f = dyn_cast<FloatAttr>(value)) {
    call.floats[key] = f.getValueAsDouble();
  } else if (auto text = dyn_cast<StringAttr>(value)) {
    if (std::optional<int64_t> code = kernelStringAttr(name, text.getValue()))
      call.ints[key] = *code;
  } else if (auto a = dyn_cast<DenseI64ArrayAttr>(value)) {
    call.arrays[key] = std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end());
  } else if (auto scheme = dyn_cast<qat::SchemeAttr>(value)) {
    quant::Scheme k = kernelScheme(scheme);
    call.ints["format"] = static_cast<int64_t>(k.format);
    call.ints["granularity"] = static_cast<int64_t>(k.granularity);
    call.ints["axis"] = k.axis;
    call.ints["block"] = k.block;
    call.ints["symmetric"] = k.symmetric;
    if (k.outlier > 0)
      call.floats["outlier"] = k.outlier;
    if (scheme.getObserver() == "delayed") {
      call.ints["margin"] = scheme.getMargin();
      call.ints["most_recent"] = scheme.getAlgo() == "most_recent";
    }
  }
}

class Interpreter {
public:
  explicit Interpreter(int64_t step) : step(step) {}

  LogicalResult runBlock(Block &block);
  const RefTensor &get(Value v) { return values[v]; }
  void set(Value v, RefTensor t) { values[v] = std::move(t); }

private:
  LogicalResult runOp(Operation *op);
  LogicalResult runNested(BlockOp block);
  ref::RefCall callOf(Operation *op);
  llvm::DenseMap<Value, RefTensor> values;
  int64_t step;
};

LogicalResult Interpreter::runBlock(Block &block) {
  for (Operation &op : block)
    if (failed(runOp(&op)))
      return failure();
  return success();
}

LogicalResult Interpreter::runNested(BlockOp b) {
  if (failed(runBlock(b.getBody().front())))
    return failure();
  auto yield = cast<YieldOp>(b.getBody().front().getTerminator());
  for (auto [r, v] : llvm::zip(b.getResults(), yield.getValues())) values[r] = values[v];
  return success();
}

ref::RefCall Interpreter::callOf(Operation *op) {
  ref::RefCall call;
  call.op = op->getName().getStringRef().str();
  call.step = step;
  // Entries are made first: a pointer into the map lasts until it grows.
  for (Value v : op->getOperands()) values.try_emplace(v);
  for (Value v : op->getOperands()) call.operands.push_back(&values.find(v)->second);
  for (NamedAttribute attr : op->getAttrDictionary())
    if (!attr.getName().getValue().contains('.'))
      addAttribute(call, attr.getName().getValue(), attr.getValue());
  // As the exec lowering adds it: which codes a KV cache's pools hold.
  if (std::optional<int64_t> format = cacheCodeFormat(op))
    call.ints["format"] = *format;
  for (Type t : op->getResultTypes()) call.resultShapes.push_back(shapeOf(t));
  return call;
}

LogicalResult Interpreter::runOp(Operation *op) {
  if (isa<YieldOp, func::ReturnOp>(op))
    return success();
  if (auto block = dyn_cast<BlockOp>(op))
    return runNested(block);
  ref::Evaluator evaluate = ref::findEvaluator(op->getName().getStringRef().str());
  if (!evaluate)
    return op->emitOpError("is not supported by the reference interpreter");
  std::vector<RefTensor> results = evaluate(callOf(op));
  if (results.size() != op->getNumResults())
    return op->emitOpError("reference evaluator gave ")
           << results.size() << " results for " << op->getNumResults();
  for (auto [result, value] : llvm::zip(op->getResults(), results))
    values[result] = std::move(value);
  return success();
}

} // namespace

FailureOr<std::vector<RefTensor>> interpret(func::FuncOp func, const std::vector<RefTensor> &args,
                                            int64_t step) {
  if (args.size() != func.getNumArguments())
    return func.emitError() << "interpreter: " << args.size() << " arguments for "
                            << func.getNumArguments() << " parameters";
  Interpreter interp(step);
  for (auto [arg, value] : llvm::zip(func.getArguments(), args)) interp.set(arg, value);
  Block &body = func.getBody().front();
  if (failed(interp.runBlock(body)))
    return failure();
  std::vector<RefTensor> results;
  for (Value v : body.getTerminator()->getOperands()) results.push_back(interp.get(v));
  return results;
}

} // namespace llmc
