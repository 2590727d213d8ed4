//===- ArtifactWriter.h - exec module -> .llmc FlatBuffer -------*- C++ -*-===//
#ifndef LLMC_COMPILER_ARTIFACTWRITER_H
#define LLMC_COMPILER_ARTIFACTWRITER_H

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>
#include <vector>

namespace llmc {

/// Serializes a lowered module (exec.programs + memory plan attributes) into
/// artifact bytes. `metadata` is stored verbatim (model config, optimizer and
/// schedule defaults). Fails with a diagnostic on anything it cannot encode.
mlir::FailureOr<std::vector<uint8_t>>
writeArtifact(mlir::ModuleOp module, const std::map<std::string, std::string> &metadata);

} // namespace llmc

#endif
