//===- WeightSites.cpp - the ops that read a weight -----------------------===//
//
// Part of llmc: see WeightSites.h.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/WeightSites.h"
#include "passes/lib/Parameters.h"

#include "dialects/LLM/LLMDialect.h"

using namespace mlir;
using namespace llmc;

SmallVector<WeightSite> llmc::findWeightSites(func::FuncOp forward) {
  SmallVector<WeightSite> sites;
  forward.walk([&](Operation *op) {
    WeightSite site;
    site.op = op;
    if (auto matmul = dyn_cast<llm::MatmulOp>(op)) {
      site.weight = parameterRead(forward, matmul.getB());
      site.head = feedsLoss(matmul.getResult());
      site.outputAxis = matmul.getTransposeB() ? 0 : 1;
    } else if (auto embedding = dyn_cast<llm::EmbeddingOp>(op)) {
      site.weight = parameterRead(forward, embedding.getTable());
      site.embedding = true;
    } else {
      return;
    }
    sites.push_back(site);
  });
  return sites;
}
