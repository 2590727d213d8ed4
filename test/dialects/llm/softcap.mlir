// RUN: llmc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// Gemma 2's soft-caps: the attention ops' `softcap` (scores s become
// c·tanh(s / c)) and llm.softcap / softcap_grad round-trip; every cap is > 0;
// llm.geglu / geglu_grad round-trip.

// CHECK-LABEL: func.func @capped
// CHECK: llm.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 6.250000e-02 : f64, softcap = 5.000000e+01 : f64, window = 4 : i64}
// CHECK: llm.attention_grad {{.*}} {causal, scale = 6.250000e-02 : f64, softcap = 5.000000e+01 : f64}
// CHECK: llm.paged_attention {{.*}} {scale = 6.250000e-02 : f64, softcap = 5.000000e+01 : f64}
// CHECK: llm.softcap %{{.*}} {cap = 3.000000e+01 : f64}
// CHECK: llm.softcap_grad %{{.*}}, %{{.*}} {cap = 3.000000e+01 : f64}
// CHECK: llm.geglu
// CHECK: llm.geglu_grad
func.func @capped(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %c: tensor<6x4x2x16xf32>,
                  %t: tensor<2x3xi32>, %p: tensor<2x8xi32>, %x: tensor<2x8x64xf32>)
    -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  %o, %lse = llm.attention %q, %k, %k {causal, scale = 0.0625 : f64, softcap = 50.0 : f64, window = 4 : i64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
  %dq, %dk, %dv = llm.attention_grad %q, %k, %k, %o, %lse, %o {causal, scale = 0.0625 : f64, softcap = 50.0 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x4x8xf32>
  %po = llm.paged_attention %q, %c, %c, %t, %p {scale = 0.0625 : f64, softcap = 50.0 : f64} : tensor<2x8x4x16xf32>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x8xi32>
  %y = llm.softcap %x {cap = 30.0 : f64} : tensor<2x8x64xf32>
  %dx = llm.softcap_grad %x, %y {cap = 30.0 : f64} : tensor<2x8x64xf32>
  %g = llm.geglu %x, %y : tensor<2x8x64xf32>
  %dg, %du = llm.geglu_grad %x, %y, %g : tensor<2x8x64xf32>
  return %dq, %po, %dx, %dg, %du : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{softcap must be > 0, got 0}}
  %o, %l = llm.attention %q, %q, %q {causal, scale = 1.0 : f64, softcap = 0.0 : f64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x1x4x16xf32>, %c: tensor<6x4x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{softcap must be > 0, got -3}}
  %0 = llm.paged_attention %q, %c, %c, %t, %p {scale = 0.25 : f64, softcap = -3.0 : f64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{cap must be > 0, got -1}}
  %0 = llm.softcap %x {cap = -1.0 : f64} : tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{cap must be > 0, got 0}}
  %0 = llm.softcap_grad %x, %x {cap = 0.0 : f64} : tensor<4x8xf32>
  return
}
