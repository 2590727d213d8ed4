//===- ElementwiseProgramSyntax.cpp - fused_elementwise's program as text -===//
//
// Part of llmc: see ElementwiseProgramSyntax.h.
//
//===----------------------------------------------------------------------===//

#include "dialects/LLM/ElementwiseProgramSyntax.h"

#include "common/ElementwiseProgram.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;

namespace llmc::llm {
namespace {

constexpr const char *kDtypeNames[] = {"f32", "bf16", "f16"};

/// `rN`, a register name, into `reg`.
ParseResult parseRegister(OpAsmParser &parser, int64_t &reg) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef name;
  if (parser.parseKeyword(&name))
    return failure();
  if (!name.consume_front("r") || name.empty() || name.getAsInteger(10, reg))
    return parser.emitError(loc, "expected a register (r0, r1, ...), got '") << name << "'";
  return success();
}

/// A double written as a float literal, as its bit pattern.
ParseResult parseDoubleBits(OpAsmParser &parser, int64_t &bits) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  bits = ew::bitsOf(value);
  return success();
}

/// One instruction after `rN =`: the opcode, its operand words, its dtype.
ParseResult parseInstruction(OpAsmParser &parser, SmallVectorImpl<int64_t> &words) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef name;
  if (parser.parseKeyword(&name))
    return failure();
  int64_t opcode = -1;
  for (int64_t i = 0; i < ew::kNumOpcodes; ++i)
    if (name == ew::opcodeName(i))
      opcode = i;
  if (opcode < 0)
    return parser.emitError(loc, "unknown elementwise opcode '") << name << "'";
  auto op = static_cast<ew::Opcode>(opcode);
  int64_t operands[3] = {0, 0, 0};
  switch (op) {
  case ew::Opcode::Load:
    if (parser.parseInteger(operands[0]))
      return failure();
    break;
  case ew::Opcode::Const:
    if (parseDoubleBits(parser, operands[0]))
      return failure();
    break;
  case ew::Opcode::Dropout:
    if (parseRegister(parser, operands[0]) || parser.parseKeyword("seed") ||
        parser.parseInteger(operands[1]) || parser.parseKeyword("rate") ||
        parseDoubleBits(parser, operands[2]))
      return failure();
    break;
  default:
    for (int k = 0; k < ew::registerOperands(op); ++k)
      if ((k > 0 && parser.parseComma()) || parseRegister(parser, operands[k]))
        return failure();
  }
  int64_t dtype = 0;
  if (succeeded(parser.parseOptionalColon())) {
    SMLoc typeLoc = parser.getCurrentLocation();
    StringRef type;
    if (parser.parseKeyword(&type))
      return failure();
    auto *found = llvm::find(kDtypeNames, type);
    if (found == std::end(kDtypeNames))
      return parser.emitError(typeLoc, "expected f32, bf16 or f16, got '") << type << "'";
    dtype = found - std::begin(kDtypeNames);
  }
  words.append({opcode, dtype, operands[0], operands[1], operands[2]});
  return success();
}

void printDouble(OpAsmPrinter &printer, int64_t bits) {
  printer.printFloat(llvm::APFloat(ew::doubleOf(bits)));
}

} // namespace

ParseResult parseElementwiseProgram(OpAsmParser &parser, DenseI64ArrayAttr &program,
                                    DenseI64ArrayAttr &yields) {
  SmallVector<int64_t> words, results;
  if (parser.parseLSquare())
    return failure();
  int64_t next = 0;
  do {
    SMLoc loc = parser.getCurrentLocation();
    int64_t reg;
    if (parseRegister(parser, reg))
      return failure();
    if (reg != next)
      return parser.emitError(loc, "expected r") << next << ": instruction " << next
                                                  << " defines register " << next;
    if (parser.parseEqual() || parseInstruction(parser, words))
      return failure();
    ++next;
  } while (succeeded(parser.parseOptionalComma()));
  if (parser.parseRSquare() || parser.parseKeyword("yields"))
    return failure();
  do {
    if (parseRegister(parser, results.emplace_back()))
      return failure();
  } while (succeeded(parser.parseOptionalComma()));
  program = parser.getBuilder().getDenseI64ArrayAttr(words);
  yields = parser.getBuilder().getDenseI64ArrayAttr(results);
  return success();
}

void printElementwiseProgram(OpAsmPrinter &printer, Operation *, DenseI64ArrayAttr program,
                             DenseI64ArrayAttr yields) {
  ArrayRef<int64_t> words = program.asArrayRef();
  printer << "[";
  for (size_t i = 0; i + ew::kFields <= words.size(); i += ew::kFields) {
    ew::Instruction in = ew::instructionAt(words.data(), static_cast<int64_t>(i / ew::kFields));
    printer << (i ? ", r" : "r") << i / ew::kFields << " = "
            << ew::opcodeName(static_cast<int64_t>(in.op));
    switch (in.op) {
    case ew::Opcode::Load:
      printer << " " << in.a;
      break;
    case ew::Opcode::Const:
      printer << " ";
      printDouble(printer, in.a);
      break;
    case ew::Opcode::Dropout:
      printer << " r" << in.a << " seed " << in.b << " rate ";
      printDouble(printer, in.c);
      break;
    default: {
      const int64_t operands[3] = {in.a, in.b, in.c};
      for (int k = 0; k < ew::registerOperands(in.op); ++k)
        printer << (k ? ", r" : " r") << operands[k];
    }
    }
    if (in.dtype > 0 && in.dtype < 3)
      printer << " : " << kDtypeNames[in.dtype];
  }
  printer << "] yields ";
  llvm::interleaveComma(yields.asArrayRef(), printer, [&](int64_t r) { printer << "r" << r; });
}

} // namespace llmc::llm
