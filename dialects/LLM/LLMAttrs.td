//===- LLMAttrs.td - llm dialect attributes ----------------*- tablegen -*-===//

#ifndef LLMC_LLM_ATTRS
#define LLMC_LLM_ATTRS

include "dialects/LLM/LLMDialect.td"
include "dialects/Common.td"

def LLM_ParamAttr : AttrDef<LLM_Dialect, "Param"> {
  let mnemonic = "param";
  let summary = "Marks a function argument as a model parameter";
  let description = [{
    Attached to a `@forward` argument as `llm.param`. `name` is the stable
    name checkpoints use; `init` is one of `normal` (mean 0, standard
    deviation `scale`), `uniform` (in [-scale, scale]), `zeros`, `ones`.
    `trainable = false` freezes the parameter: autodiff gives it no gradient
    and the optimizer no state.

    ```mlir
    func.func @forward(%wte: tensor<256x64xf32>
        {llm.param = #llm.param<name = "wte", init = "normal", scale = 0.02>}, ...)
    ```
  }];
  let parameters = (ins
    StringRefParameter<"checkpoint name">:$name,
    StringRefParameter<"initializer kind">:$init,
    LLMC_F64Parameter<"initializer scale">:$scale,
    DefaultValuedParameter<"bool", "true">:$trainable
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // LLMC_LLM_ATTRS
