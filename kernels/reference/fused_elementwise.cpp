//===- fused_elementwise.cpp - the generated elementwise op's reference ---===//
//
// Evaluates a common/ElementwiseProgram.h program in double with the
// references of the ops it fuses (add, gelu_grad, dropout, ...), one whole
// tensor per register, so the IR interpreter computes a fused chain exactly
// as it computes the unfused ops. Like the interpreter's cast, the dtype
// roundings are the identity here: references compute in double.
//
//===----------------------------------------------------------------------===//

#include "common/ElementwiseProgram.h"
#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

namespace {

/// `x` with `fn` applied per element.
template <typename Fn> RefTensor map(const RefTensor &x, Fn fn) {
  RefTensor out = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = fn(x.data[i]);
  return out;
}

template <typename Fn> RefTensor zip(const RefTensor &x, const RefTensor &y, Fn fn) {
  RefTensor out = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = fn(x.data[i], y.data[i]);
  return out;
}

} // namespace

std::vector<RefTensor> fusedElementwise(const std::vector<RefTensor> &inputs,
                                        const std::vector<int64_t> &shape,
                                        const std::vector<int64_t> &program,
                                        const std::vector<int64_t> &yields, int64_t step,
                                        const std::vector<int64_t> &globalShape,
                                        const std::vector<int64_t> &offsets) {
  const char *fn = "fusedElementwise";
  require(program.size() % ew::kFields == 0, fn, "program is not whole instructions");
  int64_t count = static_cast<int64_t>(program.size()) / ew::kFields;
  int64_t n = product(shape);
  std::vector<RefTensor> regs;
  for (int64_t i = 0; i < count; ++i) {
    ew::Instruction in = ew::instructionAt(program.data(), i);
    auto r = [&](int64_t k) -> const RefTensor & {
      require(k >= 0 && k < i, fn, "operand register not defined before its use");
      return regs[static_cast<size_t>(k)];
    };
    RefTensor value;
    switch (in.op) {
    case ew::Opcode::Load: {
      require(in.a >= 0 && in.a < static_cast<int64_t>(inputs.size()), fn, "no such input");
      const RefTensor &x = inputs[static_cast<size_t>(in.a)];
      require(isSuffix(x.shape, shape), fn, "input is not a suffix of the shape");
      value = RefTensor::zeros(shape);
      int64_t inner = x.numel();
      for (int64_t e = 0; e < n; ++e) value.data[e] = x.data[e % inner];
      break;
    }
    case ew::Opcode::Const:
      value = RefTensor::zeros(shape);
      for (double &v : value.data) v = ew::doubleOf(in.a);
      break;
    case ew::Opcode::Cast: value = r(in.a); break;
    case ew::Opcode::Add: value = add(r(in.a), r(in.b)); break;
    case ew::Opcode::Sub: value = zip(r(in.a), r(in.b), [](double a, double b) { return a - b; }); break;
    case ew::Opcode::Mul: value = mul(r(in.a), r(in.b)); break;
    case ew::Opcode::Div: value = zip(r(in.a), r(in.b), [](double a, double b) { return a / b; }); break;
    case ew::Opcode::Neg: value = map(r(in.a), [](double a) { return -a; }); break;
    case ew::Opcode::Exp: value = map(r(in.a), [](double a) { return std::exp(a); }); break;
    case ew::Opcode::Tanh: value = map(r(in.a), [](double a) { return std::tanh(a); }); break;
    case ew::Opcode::Sigmoid:
      value = map(r(in.a), [](double a) { return 1.0 / (1.0 + std::exp(-a)); });
      break;
    case ew::Opcode::Gelu: value = gelu(r(in.a)); break;
    case ew::Opcode::GeluGrad: value = geluGrad(r(in.a), r(in.b)); break;
    case ew::Opcode::Silu: value = silu(r(in.a)); break;
    case ew::Opcode::SiluGrad: value = siluGrad(r(in.a), r(in.b)); break;
    case ew::Opcode::Swiglu: value = swiglu(r(in.a), r(in.b)); break;
    case ew::Opcode::SwigluGradGate: value = swigluGrad(r(in.a), r(in.b), r(in.c))[0]; break;
    case ew::Opcode::SwigluGradUp:
      // swiglu_grad's dup = dy · silu(gate) needs no `up`: the gate stands in.
      value = swigluGrad(r(in.a), r(in.a), r(in.b))[1];
      break;
    case ew::Opcode::Dropout:
      value = dropout(r(in.a), ew::doubleOf(in.c), in.b, step, globalShape, offsets);
      break;
    case ew::Opcode::Select: {
      const RefTensor &c = r(in.a), &a = r(in.b), &b = r(in.c);
      value = like(c);
      for (int64_t e = 0; e < n; ++e) value.data[e] = c.data[e] != 0.0 ? a.data[e] : b.data[e];
      break;
    }
    case ew::Opcode::Sqrt: value = map(r(in.a), [](double a) { return std::sqrt(a); }); break;
    default: fail(fn, "unknown opcode " + std::to_string(static_cast<int64_t>(in.op)));
    }
    regs.push_back(std::move(value));
  }
  std::vector<RefTensor> results;
  for (int64_t y : yields) {
    require(y >= 0 && y < count, fn, "yields a register the program does not define");
    results.push_back(regs[static_cast<size_t>(y)]);
  }
  return results;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.fused_elementwise", [](const RefCall &c) -> Results {
  return fusedElementwise(c.variadic(0), c.zeroResult(0).shape, c.array("program"),
                          c.array("yields"), c.step, c.array("global_shape"), c.array("offsets"));
});

} // namespace llmc::ref
