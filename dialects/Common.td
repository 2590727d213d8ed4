//===- Common.td - TableGen pieces shared by llmc's dialects --*- tablegen -*-===//

#ifndef LLMC_DIALECTS_COMMON
#define LLMC_DIALECTS_COMMON

include "mlir/IR/AttrTypeBase.td"

// An fp64 attribute parameter written as a plain number (`scale = 0.02`),
// `default` when omitted.
class LLMC_F64Parameter<string desc, string default = "0.0">
    : AttrOrTypeParameter<"::llvm::APFloat", desc> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double value;
    if ($_parser.parseFloat(value))
      return ::mlir::failure();
    return ::llvm::APFloat(value);
  }() }];
  let printer = [{ $_printer << $_self.convertToDouble(); }];
  let defaultValue = "::llvm::APFloat(" # default # ")";
}

#endif // LLMC_DIALECTS_COMMON
