// RUN: llmc-opt %s -split-input-file -verify-diagnostics
// Every diagnostic of llm.fused_elementwise's verifier (its program's
// checks are common/ElementwiseProgram.h's, shared with the kernels),
// written in the generic form, which takes any program words, and of the
// program's assembly (dialects/LLM/ElementwiseProgramSyntax.h).
func.func @f(%a: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{input 1 'tensor<4xf32>' must have the results' shape or a suffix of it (4x8)}}
  %y = "llm.fused_elementwise"(%a, %b) <{program = array<i64: 0, 0, 0, 0, 0>, yields = array<i64: 0>}> : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{results must all have one shape, got 'tensor<4x8xf32>' and 'tensor<8xf32>'}}
  %y:2 = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0, 0>, yields = array<i64: 0, 0>}> : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{program must be a non-empty list of 5-word instructions, got 4 words}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0>, yields = array<i64: 0>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{instruction 1: unknown opcode 42}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0, 0, 42, 0, 0, 0, 0>, yields = array<i64: 1>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{instruction 1: dtype must be 0 (f32), 1 (bf16) or 2 (f16), got 3}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0, 0, 7, 3, 0, 0, 0>, yields = array<i64: 1>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{instruction 1: add reads register 1, which is not defined before it}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0, 0, 3, 0, 0, 1, 0>, yields = array<i64: 1>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{instruction 0: load of input 1, but the op has 1 inputs}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 1, 0, 0>, yields = array<i64: 0>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xbf16>) {
  // expected-error @+1 {{instruction 0: load's dtype must be input 0's}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0, 0>, yields = array<i64: 0>}> : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{instruction 1: dropout rate must be in [0, 1), got 1.000000}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0, 0, 18, 0, 0, 7, 4607182418800017408>, yields = array<i64: 1>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{yields names 2 registers for 1 results}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0, 0>, yields = array<i64: 0, 0>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{result 0 yields register 3, which the program does not define}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0, 0>, yields = array<i64: 3>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{result 0's element type is not register 0's dtype}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0, 0>, yields = array<i64: 0>}> : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{must have at least one result}}
  "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 0, 0>, yields = array<i64>}> : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{instruction 0: load uses 1 operand words; word 1 must be 0, got 5}}
  %y = "llm.fused_elementwise"(%a) <{program = array<i64: 0, 0, 0, 5, 0>, yields = array<i64: 0>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{unknown elementwise opcode 'fma'}}
  %y = llm.fused_elementwise(%a) [r0 = load 0, r1 = fma r0, r0] yields r1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{expected r1: instruction 1 defines register 1}}
  %y = llm.fused_elementwise(%a) [r0 = load 0, r2 = exp r0] yields r2 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{expected a register (r0, r1, ...), got 'x'}}
  %y = llm.fused_elementwise(%a) [r0 = load 0, r1 = exp x] yields r1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{expected f32, bf16 or f16, got 'f64'}}
  %y = llm.fused_elementwise(%a) [r0 = load 0, r1 = exp r0 : f64] yields r1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // A well-formed text can still name a register that is not defined yet:
  // the verifier's diagnostic.
  // expected-error @+1 {{instruction 1: mul reads register 1, which is not defined before it}}
  %y = llm.fused_elementwise(%a) [r0 = load 0, r1 = mul r0, r1] yields r1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}
