//===- Parameters.cpp - reading the model's parameters --------------------===//
//
// Part of llmc: see Parameters.h.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/Parameters.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "dialects/QAT/QATDialect.h"

using namespace mlir;
using namespace llmc;

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
