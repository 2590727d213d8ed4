//===- Models.h - model builders --------------------------------*- C++ -*-===//
#ifndef LLMC_MODELS_MODELS_H
#define LLMC_MODELS_MODELS_H

#include "models/ModelConfig.h"
#include "mlir/IR/BuiltinOps.h"

namespace llmc {

/// Builds `func.func @forward(params..., tokens, targets) -> loss` for the
/// config's family. The config must be valid (ModelConfig::validate).
mlir::OwningOpRef<mlir::ModuleOp> buildModel(mlir::MLIRContext *context,
                                             const ModelConfig &config);

mlir::OwningOpRef<mlir::ModuleOp> buildGPT2(mlir::MLIRContext *context,
                                            const ModelConfig &config);
mlir::OwningOpRef<mlir::ModuleOp> buildLlama(mlir::MLIRContext *context,
                                             const ModelConfig &config);
/// Gemma 2 and Gemma 3's text model (models/Gemma.cpp).
mlir::OwningOpRef<mlir::ModuleOp> buildGemma(mlir::MLIRContext *context, const ModelConfig &config);

/// Parameter statistics of a @forward: total, trainable, and tensor count.
struct ParamStats {
  int64_t total = 0, trainable = 0, tensors = 0;
};
ParamStats countParameters(mlir::ModuleOp module);

} // namespace llmc

#endif
