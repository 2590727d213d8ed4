//===- llmc-opt.cpp - mlir-opt with llmc's dialects and passes ------------===//

#include "dialects/Registration.h"
#include "passes/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  llmc::registerDialects(registry);
  mlir::registerTransformsPasses();
  llmc::registerPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "llmc optimizer driver\n", registry));
}
