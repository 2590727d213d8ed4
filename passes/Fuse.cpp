//===- Fuse.cpp - op groups into fused kernels ----------------------------===//
//
// The driver of llmc-fuse: it reads the `fusions` list (`llmc compile
// --fuse`) and runs the fusions it names, one per file in passes/fuse/
// (passes/fuse/Fusions.h), in an order where each finds what those before
// it left. docs/fusion.md says what each fusion rewrites, what it leaves
// alone, and how each is tested.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/fuse/Fusions.h"

#include "llvm/ADT/StringExtras.h"

#include <set>
#include <string>

namespace llmc {
#define GEN_PASS_DEF_FUSE
#include "passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc;

namespace {

const std::set<std::string> kFusions = {kFuseAddNorm,
                                        kFuseBias,
                                        kFuseBiasGelu,
                                        kFuseBiasGrad,
                                        kFuseElementwise,
                                        kFuseGeluGrad,
                                        kFuseMultiTensorAdamW,
                                        kFuseQkvSplit,
                                        kFuseLinearCrossEntropy,
                                        kFuseRope,
                                        kFuseResidual,
                                        kFuseSwigluGrad};

/// The fusions `spec` enables on `target`, or failure with `error` set.
/// `all` leaves bias-grad out on the CPU, where it gains nothing; named,
/// it applies there too (its CPU kernel is the two kernels it replaces).
FailureOr<std::set<std::string>> parseFusions(StringRef spec, StringRef target,
                                              std::string &error) {
  if (spec == "all") {
    std::set<std::string> all = kFusions;
    if (target != "cuda")
      all.erase(kFuseBiasGrad);
    return all;
  }
  std::set<std::string> enabled;
  if (spec == "none" || spec.empty())
    return enabled;
  SmallVector<StringRef> names;
  spec.split(names, ',');
  for (StringRef raw : names) {
    std::string name = raw.trim().str();
    if (!kFusions.count(name)) {
      error = "unknown fusion '" + name + "' (expected all, none or a list of: " +
              llvm::join(kFusions, ", ") + ")";
      return failure();
    }
    enabled.insert(name);
  }
  return enabled;
}

/// Runs the `enabled` fusions on `module`, in their order.
void runFusions(ModuleOp module, const std::set<std::string> &enabled, double chunkBytes,
                StringRef target) {
  auto on = [&](const char *name) { return enabled.count(name) > 0; };
  if (on(kFuseLinearCrossEntropy))
    fuseLinearCrossEntropy(module, chunkBytes, target);
  // bias-gelu first: a biased product a GELU reads takes the GELU into its
  // epilogue too; bias takes the adds left.
  if (on(kFuseBiasGelu))
    fuseBiasGelu(module);
  if (on(kFuseBias))
    fuseBias(module);
  // Before add-norm: a residual add in the epilogue saves a pass more
  // than the add beside the norm (the product is never stored alone).
  if (on(kFuseResidual))
    fuseResidual(module);
  if (on(kFuseGeluGrad))
    fuseGeluGrad(module);
  if (on(kFuseSwigluGrad))
    fuseSwigluGrad(module);
  if (on(kFuseAddNorm))
    fuseAddNorm(module);
  if (on(kFuseQkvSplit))
    fuseQkvSplit(module);
  if (on(kFuseRope))
    fuseRope(module);
  if (on(kFuseBiasGrad))
    fuseBiasGrad(module);
  // Before the chains: the casts around the updates join them instead.
  if (on(kFuseMultiTensorAdamW))
    fuseMultiTensorAdamW(module);
  // Last: the chains are whatever elementwise ops the fusions above left.
  if (on(kFuseElementwise))
    fuseElementwise(module);
}

struct FusePass : public llmc::impl::FuseBase<FusePass> {
  using FuseBase::FuseBase;

  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      getOperation().emitError() << "llmc-fuse: target must be cpu or cuda, got '" << target
                                 << "'";
      return signalPassFailure();
    }
    std::string error;
    FailureOr<std::set<std::string>> enabled = parseFusions(fusions, target, error);
    if (failed(enabled)) {
      getOperation().emitError() << "llmc-fuse: " << error;
      return signalPassFailure();
    }
    if (chunkMb <= 0) {
      getOperation().emitError() << "llmc-fuse: chunk-mb (--fuse-chunk-mb) must be positive, got "
                                 << chunkMb;
      return signalPassFailure();
    }
    runFusions(getOperation(), *enabled, chunkMb * 1024.0 * 1024.0, target);
  }
};

} // namespace
