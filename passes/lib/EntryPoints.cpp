//===- EntryPoints.cpp - the functions lowered to programs ----------------===//
//
// Part of llmc: see EntryPoints.h.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/EntryPoints.h"

#include "dialects/Annotations/Annotations.h"

using namespace mlir;
using namespace llmc;

func::FuncOp llmc::lookupFunc(ModuleOp module, StringRef name) {
  return module.lookupSymbol<func::FuncOp>(name);
}

SmallVector<ModuleOp> llmc::programModules(ModuleOp module) {
  SmallVector<ModuleOp> stages;
  for (auto nested : module.getOps<ModuleOp>())
    if (nested->hasAttr(kStageRanksAttr))
      stages.push_back(nested);
  if (stages.empty())
    stages.push_back(module);
  return stages;
}
