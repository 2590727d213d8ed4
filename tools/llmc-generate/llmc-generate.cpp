//===- llmc-generate.cpp - text from an inference artifact ----------------===//
//
// `llmc generate` without the compiler: plain C++ on top of libllmc_runtime
// (no MLIR, no LLVM), for machines that run artifacts compiled elsewhere.
//
//===----------------------------------------------------------------------===//

#include "runtime/generate/GenerateCommand.h"

int main(int argc, char **argv) { return llmc::generateMain("llmc-generate", argc, argv); }
