//===- Registration.h - every dialect llmc's tools load ---------*- C++ -*-===//
#ifndef LLMC_DIALECTS_REGISTRATION_H
#define LLMC_DIALECTS_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace llmc {
/// Inserts llm, dist, qat, exec and the upstream dialects they build on.
void registerDialects(mlir::DialectRegistry &registry);
} // namespace llmc

#endif
