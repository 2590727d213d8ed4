//===- ElementwiseProgram.h - the program of llm.fused_elementwise --------===//
//
// A fused elementwise op carries its computation as a small straight-line
// program that every consumer reads alike: the op's verifier, the kernel
// contract, the double-precision reference (the IR interpreter) and the
// CPU and CUDA kernels, which evaluate it per element. New combinations of
// elementwise ops therefore need no new kernel.
//
// The program is a flat int64 array of instructions of kFields words each,
//   { opcode, dtype, a, b, c }
// and instruction i defines register i (single assignment: operands name
// earlier registers only). Every instruction computes in fp32 and then
// rounds its value to `dtype` (f32, bf16 or f16 as kernels/Tensor.h's
// DType numbers them): that is where the unfused op stored its result, so
// the program rounds exactly where the unfused graph did. `yields` lists
// the register each result of the op is.
//
// Each opcode is one unfused kernel's per-element formula, in that
// kernel's order of operations, so in fp32 the fused result equals the
// unfused ops' bit for bit (kernels/cpu/Common.h holds the shared scalar
// functions). Keep this header free of anything but the standard library:
// the dialect, the runtime's kernels and nvcc all include it.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_ELEMENTWISEPROGRAM_H
#define LLMC_COMMON_ELEMENTWISEPROGRAM_H

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace llmc::ew {

/// Words per instruction: opcode, dtype, then up to three operands.
constexpr int kFields = 5;
/// Registers (instructions) per program: bounds the CPU kernel's scratch
/// and the CUDA kernel's per-thread register array.
constexpr int kMaxInstructions = 64;
/// Inputs and results per op (the CUDA kernel passes pointers by value).
constexpr int kMaxInputs = 16;
constexpr int kMaxResults = 8;

enum class Opcode : int64_t {
  Load = 0,     ///< a = input index; the value of that input (dtype: the input's)
  Const = 1,    ///< a = the value's double bit pattern (llm.scale's factor;
                ///< the kernels use it as fp32, as scale's kernel does)
  Cast = 2,     ///< r[a] rounded to dtype (llm.cast)
  Add = 3,      ///< r[a] + r[b]  (llm.add)
  Sub = 4,      ///< r[a] − r[b]
  Mul = 5,      ///< r[a] · r[b]  (llm.mul; llm.scale is a Const factor times x)
  Div = 6,      ///< r[a] / r[b]
  Neg = 7,      ///< −r[a]
  Exp = 8,      ///< exp r[a] (each backend's exp, as its softmax kernels use)
  Tanh = 9,     ///< tanh r[a]
  Sigmoid = 10, ///< σ(r[a])
  Gelu = 11,    ///< llm.gelu (tanh approximation)
  GeluGrad = 12, ///< llm.gelu_grad: x = r[a], dy = r[b]
  Silu = 13,     ///< llm.silu
  SiluGrad = 14, ///< llm.silu_grad: x = r[a], dy = r[b]
  Swiglu = 15,   ///< llm.swiglu: gate = r[a], up = r[b]
  SwigluGradGate = 16, ///< llm.swiglu_grad's dgate: gate r[a], up r[b], dy r[c]
  SwigluGradUp = 17,   ///< llm.swiglu_grad's dup: gate r[a], dy r[b]
  Dropout = 18, ///< llm.dropout of r[a]: b = seed, c = the rate's double bits;
                ///< the mask's element index is the flat index of the result
  Select = 19,  ///< r[a] != 0 ? r[b] : r[c]
  Sqrt = 20,    ///< √r[a] (llm.sqrt)
};
constexpr int64_t kNumOpcodes = 21;

/// The mnemonic of an opcode, for diagnostics and dumps.
inline const char *opcodeName(int64_t op) {
  static const char *const names[kNumOpcodes] = {
      "load", "const", "cast", "add", "sub", "mul", "div", "neg", "exp", "tanh", "sigmoid",
      "gelu", "gelu_grad", "silu", "silu_grad", "swiglu", "swiglu_grad_gate",
      "swiglu_grad_up", "dropout", "select", "sqrt"};
  return op >= 0 && op < kNumOpcodes ? names[op] : "?";
}

/// How many register operands an opcode reads (Load, Const: none;
/// Dropout's b and c are attributes, not registers).
inline int registerOperands(Opcode op) {
  switch (op) {
  case Opcode::Load:
  case Opcode::Const:
    return 0;
  case Opcode::Cast:
  case Opcode::Neg:
  case Opcode::Exp:
  case Opcode::Tanh:
  case Opcode::Sigmoid:
  case Opcode::Gelu:
  case Opcode::Silu:
  case Opcode::Dropout:
  case Opcode::Sqrt:
    return 1;
  case Opcode::SwigluGradGate:
  case Opcode::Select:
    return 3;
  default:
    return 2;
  }
}

/// How many operand words (a, b, c) an opcode uses: its registers, or
/// Load's input index, Const's value, Dropout's register, seed and rate.
/// The words past them are 0, so a program has one spelling.
inline int operandWords(Opcode op) {
  switch (op) {
  case Opcode::Load:
  case Opcode::Const:
    return 1;
  case Opcode::Dropout:
    return 3;
  default:
    return registerOperands(op);
  }
}

/// One decoded instruction.
struct Instruction {
  Opcode op;
  int64_t dtype, a, b, c;
};

inline Instruction instructionAt(const int64_t *program, int64_t i) {
  const int64_t *w = program + i * kFields;
  return {static_cast<Opcode>(w[0]), w[1], w[2], w[3], w[4]};
}

/// A double carried in an instruction word (Const's value, Dropout's rate).
inline double doubleOf(int64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}
inline int64_t bitsOf(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

/// Whether any instruction of the program (`words` int64s) is `op`.
inline bool usesOpcode(const int64_t *program, size_t words, Opcode op) {
  for (size_t i = 0; i < words; i += kFields)
    if (program[i] == static_cast<int64_t>(op)) return true;
  return false;
}

/// Checks a program against its op: `inputDtypes` and `resultDtypes` are
/// DType numbers (0 f32, 1 bf16, 2 f16). Returns "" when well formed, else
/// the first problem, naming the instruction.
inline std::string validateProgram(const std::vector<int64_t> &program,
                                   const std::vector<int64_t> &yields,
                                   const std::vector<int64_t> &inputDtypes,
                                   const std::vector<int64_t> &resultDtypes) {
  auto at = [](int64_t i) { return "instruction " + std::to_string(i) + ": "; };
  if (program.empty() || program.size() % kFields != 0)
    return "program must be a non-empty list of " + std::to_string(kFields) +
           "-word instructions, got " + std::to_string(program.size()) + " words";
  int64_t count = static_cast<int64_t>(program.size()) / kFields;
  if (count > kMaxInstructions)
    return "program has " + std::to_string(count) + " instructions, at most " +
           std::to_string(kMaxInstructions) + " are supported";
  if (inputDtypes.size() > static_cast<size_t>(kMaxInputs))
    return "at most " + std::to_string(kMaxInputs) + " inputs are supported";
  if (resultDtypes.empty() || resultDtypes.size() > static_cast<size_t>(kMaxResults))
    return "between 1 and " + std::to_string(kMaxResults) + " results are supported";
  for (int64_t i = 0; i < count; ++i) {
    Instruction in = instructionAt(program.data(), i);
    int64_t op = static_cast<int64_t>(in.op);
    if (op < 0 || op >= kNumOpcodes) return at(i) + "unknown opcode " + std::to_string(op);
    if (in.dtype < 0 || in.dtype > 2)
      return at(i) + "dtype must be 0 (f32), 1 (bf16) or 2 (f16), got " +
             std::to_string(in.dtype);
    const int64_t operands[3] = {in.a, in.b, in.c};
    for (int k = operandWords(in.op); k < 3; ++k)
      if (operands[k] != 0)
        return at(i) + opcodeName(op) + " uses " + std::to_string(operandWords(in.op)) +
               " operand words; word " + std::to_string(k) + " must be 0, got " +
               std::to_string(operands[k]);
    for (int k = 0; k < registerOperands(in.op); ++k)
      if (operands[k] < 0 || operands[k] >= i)
        return at(i) + opcodeName(op) + " reads register " + std::to_string(operands[k]) +
               ", which is not defined before it";
    if (in.op == Opcode::Load) {
      if (in.a < 0 || in.a >= static_cast<int64_t>(inputDtypes.size()))
        return at(i) + "load of input " + std::to_string(in.a) + ", but the op has " +
               std::to_string(inputDtypes.size()) + " inputs";
      if (inputDtypes[static_cast<size_t>(in.a)] != in.dtype)
        return at(i) + "load's dtype must be input " + std::to_string(in.a) + "'s";
    }
    if (in.op == Opcode::Dropout) {
      double rate = doubleOf(in.c);
      if (!(rate >= 0.0 && rate < 1.0))
        return at(i) + "dropout rate must be in [0, 1), got " + std::to_string(rate);
    }
  }
  if (yields.size() != resultDtypes.size())
    return "yields names " + std::to_string(yields.size()) + " registers for " +
           std::to_string(resultDtypes.size()) + " results";
  for (size_t r = 0; r < yields.size(); ++r) {
    if (yields[r] < 0 || yields[r] >= count)
      return "result " + std::to_string(r) + " yields register " + std::to_string(yields[r]) +
             ", which the program does not define";
    if (program[static_cast<size_t>(yields[r] * kFields + 1)] != resultDtypes[r])
      return "result " + std::to_string(r) + "'s element type is not register " +
             std::to_string(yields[r]) + "'s dtype";
  }
  return "";
}

} // namespace llmc::ew

#endif
