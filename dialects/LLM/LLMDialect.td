//===- LLMDialect.td - the llm dialect definition ----------*- tablegen -*-===//
//
// The `llm` dialect holds the model graph: the ops a transformer language
// model is written in, their backward counterparts (produced by autodiff) and
// the optimizer update.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_LLM_DIALECT
#define LLMC_LLM_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def LLM_Dialect : Dialect {
  let name = "llm";
  let cppNamespace = "::llmc::llm";
  let summary = "Transformer model graph ops on ranked tensors";
  let description = [{
    A model is a `func.func @forward` whose arguments are the parameters (each
    with an `llm.param` argument attribute naming it and saying how it is
    initialised) followed by the batch (`tokens`, `targets`), and whose single
    result is the scalar loss. Values are builtin ranked tensors with static
    shapes. Transformer layers are `llm.block` regions.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

class LLM_Op<string mnemonic, list<Trait> traits = []>
    : Op<LLM_Dialect, mnemonic, traits>;

// Element-type constraints used by the ops.
def LLM_FloatTensor : RankedTensorOf<[AnyFloat]>;
def LLM_IndexTensor : RankedTensorOf<[I32, I64]>;
def LLM_F32Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

#endif // LLMC_LLM_DIALECT
