// RUN: llmc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// Sigmoid routers (DeepSeek-V3's scoring_func): moe_route with `score`,
// `scale` and a bias that only chooses, and its gradient with the same
// attributes, round-trip; softmax stays the default and is not printed;
// each bad combination is an error that names it.

// CHECK-LABEL: func.func @sigmoid
// CHECK: llm.moe_route %{{.*}} bias %{{.*}} {normalize, scale = 2.500000e+00 : f64, score = "sigmoid", top_k = 2 : i64} : tensor<6x4xf32> bias tensor<4xf32>
// CHECK: llm.moe_route %{{.*}} {score = "sigmoid", top_k = 1 : i64} : tensor<6x4xbf16>
// CHECK: llm.moe_route %{{.*}} {scale = 1.500000e+00 : f64, top_k = 2 : i64} : tensor<6x4xf32>
// CHECK: llm.moe_route_grad {{.*}} {normalize, scale = 2.500000e+00 : f64, score = "sigmoid"} : tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<4xf32>
func.func @sigmoid(%logits: tensor<6x4xf32>, %b: tensor<4xf32>, %half: tensor<6x4xbf16>)
    -> (tensor<6x2xf32>, tensor<6x1xf32>, tensor<6x2xf32>, tensor<6x4xf32>) {
  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits bias %b {top_k = 2 : i64, normalize, score = "sigmoid", scale = 2.5 : f64} : tensor<6x4xf32> bias tensor<4xf32>
  %w1, %e1, %pos1, %off1, %ps1, %cnt1, %z1 = llm.moe_route %half {top_k = 1 : i64, score = "sigmoid"} : tensor<6x4xbf16>
  %w2, %e2, %pos2, %off2, %ps2, %cnt2, %z2 = llm.moe_route %logits {top_k = 2 : i64, score = "softmax", scale = 1.5 : f64} : tensor<6x4xf32>
  %dl = llm.moe_route_grad %logits, %e, %w, %ps, %z {normalize, score = "sigmoid", scale = 2.5 : f64} : tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<4xf32>
  return %w, %w1, %w2, %dl : tensor<6x2xf32>, tensor<6x1xf32>, tensor<6x2xf32>, tensor<6x4xf32>
}

// -----

func.func @f(%logits: tensor<6x4xf32>) {
  // expected-error @+1 {{score must be "softmax" or "sigmoid", got "sparsemax"}}
  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits {top_k = 2 : i64, score = "sparsemax"} : tensor<6x4xf32>
  return
}

// -----

func.func @f(%logits: tensor<6x4xf32>) {
  // expected-error @+1 {{scale must be a finite number > 0, got -1}}
  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits {top_k = 2 : i64, score = "sigmoid", scale = -1.0 : f64} : tensor<6x4xf32>
  return
}

// -----

func.func @f(%logits: tensor<6x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{a bias needs score = "sigmoid" (it corrects sigmoid scores before the top-k)}}
  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits bias %b {top_k = 2 : i64} : tensor<6x4xf32> bias tensor<4xf32>
  return
}

// -----

func.func @f(%logits: tensor<6x4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{bias must be f32 [4] (one per expert), got 'tensor<5xf32>'}}
  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits bias %b {top_k = 2 : i64, score = "sigmoid"} : tensor<6x4xf32> bias tensor<5xf32>
  return
}

// -----

func.func @f(%logits: tensor<6x4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{bias must be f32 [4] (one per expert), got 'tensor<4xbf16>'}}
  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits bias %b {top_k = 2 : i64, score = "sigmoid"} : tensor<6x4xf32> bias tensor<4xbf16>
  return
}

// -----

func.func @f(%logits: tensor<6x4xf32>, %e: tensor<6x2xi32>, %dw: tensor<6x2xf32>, %dps: tensor<4xf32>, %dz: tensor<f32>) {
  // expected-error @+1 {{score must be "softmax" or "sigmoid", got "relu"}}
  %dl = llm.moe_route_grad %logits, %e, %dw, %dps, %dz {score = "relu"} : tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%logits: tensor<6x4xf32>, %e: tensor<6x2xi32>, %dw: tensor<6x2xf32>, %dps: tensor<4xf32>, %dz: tensor<f32>) {
  // expected-error @+1 {{scale must be a finite number > 0, got 0}}
  %dl = llm.moe_route_grad %logits, %e, %dw, %dps, %dz {score = "sigmoid", scale = 0.0 : f64} : tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<4xf32>
  return
}
