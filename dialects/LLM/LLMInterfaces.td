//===- LLMInterfaces.td - how llm ops shard ----------------*- tablegen -*-===//

#ifndef LLMC_LLM_INTERFACES
#define LLMC_LLM_INTERFACES

include "mlir/IR/OpBase.td"

def LLM_RowSplitOpInterface : OpInterface<"RowSplitOpInterface"> {
  let cppNamespace = "::llmc::llm";
  let description = [{
    The data-parallel sharding rule of an op. Data parallelism splits
    dimension 0 (the batch rows) of every batch-derived value into `parts`
    blocks, one per rank, and each rank runs the op on its block. Most ops
    compute each row from that row alone and need no rule; an op that may
    mix rows, or use a batch-derived value where a replicated one belongs,
    implements this interface and says when that split is wrong. Ops that
    always mix rows carry the MixesBatchRows trait instead.
  }];
  let methods = [
    InterfaceMethod<[{
        Fails with an error at the op when running it on each rank's rows
        would not give those rows of the unsplit result. `rowSplit[i]` says
        whether operand i is split; when this is asked the operands already
        have their local types and the results still have the global ones.
      }],
      "::mlir::LogicalResult", "verifyRowSplit",
      (ins "::llvm::ArrayRef<bool>":$rowSplit, "int64_t":$parts)>,
  ];
}

#endif // LLMC_LLM_INTERFACES
