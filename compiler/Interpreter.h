//===- Interpreter.h - evaluate llm IR in double precision ------*- C++ -*-===//
//
// A slow, exact evaluator for functions of llm ops, built on the naive
// double-precision reference kernels (kernels/reference). It is the oracle
// for compiler tests: VJP rules against finite differences, and whole
// training steps against the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_INTERPRETER_H
#define LLMC_COMPILER_INTERPRETER_H

#include "kernels/reference/Reference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <vector>

namespace llmc {

/// Runs `func` on `args` (one per argument; integer tensors hold integral
/// values). `step` feeds dropout masks. Fails with a diagnostic on an op it
/// does not know.
mlir::FailureOr<std::vector<ref::RefTensor>>
interpret(mlir::func::FuncOp func, const std::vector<ref::RefTensor> &args, int64_t step = 1);

} // namespace llmc

#endif
