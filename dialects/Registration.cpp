//===- Registration.cpp - every dialect llmc's tools load -----------------===//

#include "dialects/Registration.h"

#include "dialects/Annotations/Annotations.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/Exec/ExecDialect.h"
#include "dialects/LLM/LLMDialect.h"
#include "dialects/QAT/QATDialect.h"
#include "mlir/Dialect/Func/Extensions/AllExtensions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

void llmc::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<annotations::LLMCAnnotationsDialect, llm::LLMDialect, dist::DistDialect, qat::QATDialect, exec::ExecDialect,
                  mlir::func::FuncDialect>();
  mlir::func::registerAllExtensions(registry);
}
