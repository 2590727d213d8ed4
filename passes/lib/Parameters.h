//===- Parameters.h - reading the model's parameters ------------*- C++ -*-===//
//
// Which parameter an op reads, whether a product feeds the loss, and which
// parameters a user's --lora/--qat/... entry names.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_PARAMETERS_H
#define LLMC_PASSES_LIB_PARAMETERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/StringRef.h"

namespace llmc {

/// The parameter argument of `func` that `v` is (through llm.cast, as mixed
/// precision reads weights, and qat.fake_quant), or null.
mlir::BlockArgument parameterRead(mlir::func::FuncOp func, mlir::Value v);

/// Whether `v` reaches the loss through shape ops, casts, bias adds and
/// all-reduces: the output head's matmul.
bool feedsLoss(mlir::Value v);

/// Whether a user's entry names parameter `name`: the name itself or a
/// dotted prefix of it ("h.0.mlp" names "h.0.mlp.c_fc.weight").
inline bool namesParameter(llvm::StringRef name, llvm::StringRef entry) {
  return name == entry ||
         (name.starts_with(entry) && name.drop_front(entry.size()).starts_with("."));
}

} // namespace llmc

#endif
