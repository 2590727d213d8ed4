// RUN: llmc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// The sliding window of the attention ops (`window`: query i sees keys in
// (i − window, i]) round-trips, and is >= 1 and causal only.

// CHECK-LABEL: func.func @windowed
// CHECK: llm.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64, window = 4 : i64}
// CHECK: llm.attention_grad {{.*}} {causal, scale = 2.500000e-01 : f64, window = 4 : i64}
// CHECK: llm.paged_attention {{.*}} {scale = 2.500000e-01 : f64, window = 4 : i64}
func.func @windowed(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %c: tensor<6x4x2x16xf32>,
                    %t: tensor<2x3xi32>, %p: tensor<2x8xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) {
  %o, %lse = llm.attention %q, %k, %k {causal, scale = 0.25 : f64, window = 4 : i64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
  %dq, %dk, %dv = llm.attention_grad %q, %k, %k, %o, %lse, %o {causal, scale = 0.25 : f64, window = 4 : i64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x4x8xf32>
  %po = llm.paged_attention %q, %c, %c, %t, %p {scale = 0.25 : f64, window = 4 : i64} : tensor<2x8x4x16xf32>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x8xi32>
  return %dq, %po : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{window must be >= 1, got 0}}
  %o, %l = llm.attention %q, %q, %q {causal, scale = 1.0 : f64, window = 0 : i64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{a window needs causal attention}}
  %o, %l = llm.attention %q, %q, %q {scale = 1.0 : f64, window = 4 : i64} : tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%qkv: tensor<2x8x96xf32>) {
  // expected-error @+1 {{a window needs causal attention}}
  %o, %l = llm.attention_packed %qkv {heads = 2 : i64, kv_heads = 2 : i64, scale = 1.0 : f64, window = 4 : i64} : tensor<2x8x96xf32>
  return
}

// -----

func.func @f(%q: tensor<2x1x4x16xf32>, %c: tensor<6x4x2x16xf32>, %t: tensor<2x3xi32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{window must be >= 1, got -3}}
  %0 = llm.paged_attention %q, %c, %c, %t, %p {scale = 0.25 : f64, window = -3 : i64} : tensor<2x1x4x16xf32>, tensor<6x4x2x16xf32>, tensor<2x3xi32>, tensor<2x1xi32>
  return
}
