//===- EntryPoints.h - the functions lowered to programs --------*- C++ -*-===//
//
// The functions the pipelines build (@train_step, @forward, ...), the programs
// lowering makes of them, and the modules that hold them.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_ENTRYPOINTS_H
#define LLMC_PASSES_LIB_ENTRYPOINTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace llmc {

/// A function lowered to a program, and the program's name.
struct EntryPoint {
  llvm::StringLiteral function, program;
};
/// Every entry point, in the order lowering lays out their programs.
inline constexpr EntryPoint kEntryPoints[] = {
    {"train_step", "train_step"}, {"forward", "eval"},    {"logits", "logits"}, {"grad", "grad"},
    {"calibrate", "calibrate"},   {"prefill", "prefill"}, {"decode", "decode"}};

/// The function named `name` in `module`, or null.
mlir::func::FuncOp lookupFunc(mlir::ModuleOp module, llvm::StringRef name);

/// The modules holding programs: a pipeline's stage modules (nested, with
/// kStageRanksAttr) when there are any, else `module` itself.
llvm::SmallVector<mlir::ModuleOp> programModules(mlir::ModuleOp module);

} // namespace llmc

#endif
