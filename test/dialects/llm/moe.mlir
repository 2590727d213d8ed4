// RUN: llmc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// The mixture-of-experts ops round-trip with the shapes their rules give
// (N tokens, k copies each, E experts); each rule's error names what is
// wrong.

// CHECK-LABEL: func.func @layer
// CHECK: llm.moe_route %{{.*}} {normalize, top_k = 2 : i64} : tensor<6x4xf32>
// CHECK: llm.moe_dispatch %{{.*}}, %{{.*}} : tensor<6x8xbf16>, tensor<6x2xi32>
// CHECK: llm.grouped_matmul {{.*}} {transpose_b} : tensor<12x8xbf16>, tensor<5xi32>, tensor<4x16x8xbf16>
// CHECK: llm.moe_combine %{{.*}}, %{{.*}} weights %{{.*}} : tensor<12x16xbf16>, tensor<6x2xi32> weights tensor<6x2xf32>
// CHECK: llm.moe_dispatch %{{.*}}, %{{.*}} weights %{{.*}} : tensor<6x16xbf16>, tensor<6x2xi32> weights tensor<6x2xf32>
// CHECK: llm.moe_combine_weight_grad {{.*}} : tensor<12x16xbf16>, tensor<6x2xi32>, tensor<6x16xbf16>
// CHECK: llm.grouped_matmul_weight_grad {{.*}} {transpose_b} : tensor<12x8xbf16>, tensor<12x16xbf16>, tensor<5xi32> -> tensor<4x16x8xbf16>
// CHECK: llm.moe_route_grad {{.*}} {normalize} : tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<4xf32>
func.func @layer(%logits: tensor<6x4xf32>, %x: tensor<6x8xbf16>, %w: tensor<4x16x8xbf16>)
    -> (tensor<6x16xbf16>, tensor<12x16xbf16>, tensor<6x2xf32>, tensor<4x16x8xbf16>, tensor<6x4xf32>) {
  %rw, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits {top_k = 2 : i64, normalize} : tensor<6x4xf32>
  %xs = llm.moe_dispatch %x, %pos : tensor<6x8xbf16>, tensor<6x2xi32>
  %h = llm.grouped_matmul %xs, %off, %w {transpose_b} : tensor<12x8xbf16>, tensor<5xi32>, tensor<4x16x8xbf16>
  %y = llm.moe_combine %h, %pos weights %rw : tensor<12x16xbf16>, tensor<6x2xi32> weights tensor<6x2xf32>
  %dh = llm.moe_dispatch %y, %pos weights %rw : tensor<6x16xbf16>, tensor<6x2xi32> weights tensor<6x2xf32>
  %dw = llm.moe_combine_weight_grad %h, %pos, %y : tensor<12x16xbf16>, tensor<6x2xi32>, tensor<6x16xbf16>
  %g = llm.grouped_matmul_weight_grad %xs, %dh, %off {transpose_b} : tensor<12x8xbf16>, tensor<12x16xbf16>, tensor<5xi32> -> tensor<4x16x8xbf16>
  %dl = llm.moe_route_grad %logits, %e, %dw, %ps, %z {normalize} : tensor<6x4xf32>, tensor<6x2xi32>, tensor<6x2xf32>, tensor<4xf32>
  return %y, %dh, %dw, %g, %dl : tensor<6x16xbf16>, tensor<12x16xbf16>, tensor<6x2xf32>, tensor<4x16x8xbf16>, tensor<6x4xf32>
}

// -----

func.func @f(%logits: tensor<6x4xf32>) {
  // expected-error @+1 {{top_k must be in [1, 4] for 4 experts, got 5}}
  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits {top_k = 5 : i64} : tensor<6x4xf32>
  return
}

// -----

func.func @f(%logits: tensor<2x6x4xf32>) {
  // expected-error @+1 {{logits must be rank 2}}
  %w, %e, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits {top_k = 2 : i64} : tensor<2x6x4xf32>
  return
}

// -----

func.func @f(%x: tensor<6x8xf32>, %pos: tensor<5x2xi32>) {
  // expected-error @+1 {{positions must have 6 rows (one per token), got 'tensor<5x2xi32>'}}
  %xs = llm.moe_dispatch %x, %pos : tensor<6x8xf32>, tensor<5x2xi32>
  return
}

// -----

func.func @f(%x: tensor<6x8xf32>, %pos: tensor<6x2xi32>, %w: tensor<6x2xbf16>) {
  // expected-error @+1 {{weights must be f32 of positions' shape 6x2}}
  %xs = llm.moe_dispatch %x, %pos weights %w : tensor<6x8xf32>, tensor<6x2xi32> weights tensor<6x2xbf16>
  return
}

// -----

func.func @f(%ys: tensor<10x8xf32>, %pos: tensor<6x2xi32>) {
  // expected-error @+1 {{ys must have 12 rows (tokens × top_k)}}
  %y = llm.moe_combine %ys, %pos : tensor<10x8xf32>, tensor<6x2xi32>
  return
}

// -----

func.func @f(%ys: tensor<12x8xf32>, %pos: tensor<6x2xi32>, %dy: tensor<6x4xf32>) {
  // expected-error @+1 {{dy must be 'tensor<6x8xf32>' (moe_combine's result)}}
  %dw = llm.moe_combine_weight_grad %ys, %pos, %dy : tensor<12x8xf32>, tensor<6x2xi32>, tensor<6x4xf32>
  return
}

// -----

func.func @f(%x: tensor<12x8xf32>, %off: tensor<1xi32>, %w: tensor<1x16x8xf32>) {
  // expected-error @+1 {{offsets must be [G + 1] for G >= 1 groups, got 'tensor<1xi32>'}}
  %h = llm.grouped_matmul %x, %off, %w {transpose_b} : tensor<12x8xf32>, tensor<1xi32>, tensor<1x16x8xf32>
  return
}

// -----

func.func @f(%x: tensor<12x8xf32>, %off: tensor<4xi32>, %w: tensor<2x16x8xf32>) {
  // expected-error @+1 {{weights must be stacked [G, F, K] with G = 3 and K = 8 (x 'tensor<12x8xf32>'), got 'tensor<2x16x8xf32>'}}
  %h = llm.grouped_matmul %x, %off, %w {transpose_b} : tensor<12x8xf32>, tensor<4xi32>, tensor<2x16x8xf32>
  return
}

// -----

func.func @f(%x: tensor<12x8xf32>, %off: tensor<3xi32>, %w: tensor<2x16x8xf32>) {
  // expected-error @+1 {{weights must be stacked [G, K, F] with G = 2 and K = 8}}
  %h = llm.grouped_matmul %x, %off, %w : tensor<12x8xf32>, tensor<3xi32>, tensor<2x16x8xf32>
  return
}

// -----

func.func @f(%x: tensor<12x8xf32>, %off: tensor<3xi32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{weights must be stacked [G, F, K]}}
  %h = llm.grouped_matmul %x, %off, %w {transpose_b} : tensor<12x8xf32>, tensor<3xi32>, tensor<16x8xf32>
  return
}

// -----

func.func @f(%x: tensor<12x8xf32>, %off: tensor<3xi32>, %w: tensor<2x16x8xbf16>) {
  // expected-error @+1 {{x and the weights must share an element type, got 'f32' and 'bf16'}}
  %h = llm.grouped_matmul %x, %off, %w {transpose_b} : tensor<12x8xf32>, tensor<3xi32>, tensor<2x16x8xbf16>
  return
}

// -----

func.func @f(%x: tensor<12x8xf32>, %dy: tensor<12x16xf32>, %off: tensor<3xi32>) {
  // expected-error @+1 {{the result must be 'tensor<2x8x16xf32>', got 'tensor<2x16x8xf32>'}}
  %g = llm.grouped_matmul_weight_grad %x, %dy, %off : tensor<12x8xf32>, tensor<12x16xf32>, tensor<3xi32> -> tensor<2x16x8xf32>
  return
}

// -----

func.func @f(%x: tensor<12x8xf32>, %dy: tensor<12x16xf32>, %off: tensor<4xi32>) {
  // expected-error @+1 {{the result must be 'tensor<3x16x8xf32>', got 'tensor<2x16x8xf32>'}}
  %g = llm.grouped_matmul_weight_grad %x, %dy, %off {transpose_b} : tensor<12x8xf32>, tensor<12x16xf32>, tensor<4xi32> -> tensor<2x16x8xf32>
  return
}

// -----

// CHECK-LABEL: func.func @losses
// CHECK: llm.router_loss %{{.*}}, %{{.*}}, %{{.*}} {aux_scale = 1.000000e-03 : f64, z_scale = 0.000000e+00 : f64} : tensor<8xf32>, tensor<8xf32>
func.func @losses(%ps: tensor<8xf32>, %c: tensor<8xf32>, %z: tensor<f32>) -> tensor<f32> {
  %l = llm.router_loss %ps, %c, %z {aux_scale = 1.0e-03 : f64, z_scale = 0.0 : f64} : tensor<8xf32>, tensor<8xf32>
  return %l : tensor<f32>
}

// -----

func.func @f(%ps: tensor<8xf32>, %c: tensor<4xf32>, %z: tensor<f32>) {
  // expected-error @+1 {{counts must be 'tensor<8xf32>' (prob_sum's type), got 'tensor<4xf32>'}}
  %l = "llm.router_loss"(%ps, %c, %z) {aux_scale = 1.0 : f64, z_scale = 0.0 : f64} : (tensor<8xf32>, tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return
}
