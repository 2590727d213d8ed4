//===- WeightSites.h - the ops that read a weight ---------------*- C++ -*-===//
//
// QAT fake-quantizes the weights (and activations) of the matmuls and
// embeddings it is asked to; LoRA adds adapters beside matmul weights;
// weight-only quantization stores matmul weights quantized; `llmc
// quantize` exports the weights those ops read. All four start from the
// same list: each llm.matmul and llm.embedding of @forward, with the
// parameter it reads as its weight. (A mixture of experts' stacked
// weights, read by llm.grouped_matmul, each pass finds on its own.)
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_WEIGHTSITES_H
#define LLMC_PASSES_LIB_WEIGHTSITES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

namespace llmc {

/// An llm.matmul or llm.embedding and the parameter it reads as its weight:
/// a matmul's b operand, an embedding's table (through llm.cast and
/// qat.fake_quant, as parameterRead follows them).
struct WeightSite {
  mlir::Operation *op = nullptr;
  /// The parameter; null when the operand is not one (a matmul of two
  /// activations, a table computed in the graph).
  mlir::BlockArgument weight;
  bool embedding = false; ///< an llm.embedding (else an llm.matmul)
  /// A matmul whose product reaches the loss (feedsLoss): the output head.
  bool head = false;
  /// The weight's output-channel dimension: the one a matmul does not
  /// contract (0 with transpose_b, else 1); an embedding table's rows (0).
  int64_t outputAxis = 0;
};

/// Every llm.matmul and llm.embedding of `forward` (inside llm.block
/// regions too), in the order func::FuncOp::walk visits them.
llvm::SmallVector<WeightSite> findWeightSites(mlir::func::FuncOp forward);

} // namespace llmc

#endif
