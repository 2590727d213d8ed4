//===- ElementwiseProgramSyntax.h - fused_elementwise's program as text -*- C++ -*-===//
//
// The custom<ElementwiseProgram> directive of llm.fused_elementwise's
// assembly: the program and yields arrays (common/ElementwiseProgram.h)
// written one instruction per register,
//
//   [r0 = load 0, r1 = load 1 : bf16, r2 = add r0, r1 : bf16,
//    r3 = const 0.5, r4 = mul r2, r3, r5 = dropout r4 seed 7 rate 0.1]
//   yields r5
//
// `rN` is register N (instruction N: they are written in order), `: bf16`
// or `: f16` the dtype the instruction rounds to (none: f32), load's
// operand the input's index, const's and dropout's rate a double. The
// words an opcode does not use are 0, which the verifier requires, so the
// text holds every word of the program.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_DIALECTS_LLM_ELEMENTWISEPROGRAMSYNTAX_H
#define LLMC_DIALECTS_LLM_ELEMENTWISEPROGRAMSYNTAX_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

namespace llmc::llm {

mlir::ParseResult parseElementwiseProgram(mlir::OpAsmParser &parser,
                                          mlir::DenseI64ArrayAttr &program,
                                          mlir::DenseI64ArrayAttr &yields);
void printElementwiseProgram(mlir::OpAsmPrinter &printer, mlir::Operation *op,
                             mlir::DenseI64ArrayAttr program, mlir::DenseI64ArrayAttr yields);

} // namespace llmc::llm

#endif
