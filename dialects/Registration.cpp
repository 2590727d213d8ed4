//===- Registration.cpp - every dialect llmc's tools load -----------------===//

#include "dialects/Registration.h"

#include "dialects/Exec/ExecDialect.h"
#include "dialects/LLM/LLMDialect.h"
#ifdef LLMC_HAVE_Dist
#include "dialects/Dist/DistDialect.h"
#endif
#ifdef LLMC_HAVE_QAT
#include "dialects/QAT/QATDialect.h"
#endif
#include "mlir/Dialect/Func/Extensions/AllExtensions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

void llmc::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<llm::LLMDialect, exec::ExecDialect, mlir::func::FuncDialect>();
#ifdef LLMC_HAVE_Dist
  registry.insert<dist::DistDialect>();
#endif
#ifdef LLMC_HAVE_QAT
  registry.insert<qat::QATDialect>();
#endif
  mlir::func::registerAllExtensions(registry);
}
