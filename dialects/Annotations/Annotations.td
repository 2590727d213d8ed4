//===- Annotations.td - the llmc annotation namespace ------*- tablegen -*-===//
//
// Discardable attributes the passes use to tell each other about ops,
// arguments, results and modules (`llmc.block_name`, `llmc.role`, ...).
// They share one prefix, `llmc.`, owned by this op-less dialect, whose
// verifier checks that every `llmc.*` attribute is a known one, in a place
// it may stand, with a value of the right kind. The list is in
// Annotations.cpp; the names are constants in Annotations.h.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_ANNOTATIONS
#define LLMC_ANNOTATIONS

include "mlir/IR/DialectBase.td"

def LLMC_AnnotationsDialect : Dialect {
  let name = "llmc";
  let cppNamespace = "::llmc::annotations";
  let summary = "The llmc.* attributes passes annotate the IR with";
  let description = [{
    No ops: only the discardable attributes under the `llmc.` prefix, and
    a verifier for them. For example, every op autodiff emits carries
    `llmc.backward`, every op of a layer `llmc.block_name = "h.3"`, and
    each argument of `@train_step` its `llmc.role` ("param", "adam_m", ...).
  }];
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

#endif // LLMC_ANNOTATIONS
