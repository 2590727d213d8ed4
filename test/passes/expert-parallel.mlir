// RUN: llmc-opt %s -split-input-file --llmc-shard="mesh=ep=2" -verify-diagnostics | FileCheck %s
// Expert parallelism: the batch splits over ep (a batch axis), each rank
// keeps two of the four experts (the stacked weights split along
// dimension 0), and the routed rows go to their experts' ranks and back:
// packed into one slot of all 8 local rows per peer (dropless: the worst
// case), the per-expert counts and the rows exchanged by all-to-all,
// regrouped by local expert for the grouped matmul, then ungrouped, sent
// home and unpacked before the combine. The router's counts are summed
// over ep like any batch axis.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[W:[^:]*]]: tensor<2x8x8xf32> {llm.param = #llm.param<name = "w"{{.*}}llmc.shard = {global_shape = array<i64: 4, 8, 8>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// CHECK-SAME: %{{.*}}: tensor<1x4xi32>
// CHECK: %[[XS:.*]] = llm.moe_dispatch %{{.*}}, %[[POS:.*]] : tensor<4x8xf32>, tensor<4x2xi32>
// CHECK: %[[PACKED:.*]], %[[KEPT:.*]] = llm.moe_pack %[[XS]], %[[OFF:.*]] : tensor<8x8xf32>, tensor<5xi32> -> tensor<16x8xf32>, tensor<2x2xi32>
// CHECK: %[[COUNTS:.*]] = dist.all_to_all %[[KEPT]] on @mesh axes ["ep"] split 0 concat 0 : tensor<2x2xi32> -> tensor<2x2xi32>
// CHECK: %[[RECV:.*]] = dist.all_to_all %[[PACKED]] on @mesh axes ["ep"] split 0 concat 0 : tensor<16x8xf32> -> tensor<16x8xf32>
// CHECK: %[[G:.*]], %[[LOFF:.*]] = llm.moe_regroup %[[RECV]], %[[COUNTS]] : tensor<16x8xf32>, tensor<2x2xi32>
// CHECK: %[[H:.*]] = llm.grouped_matmul %[[G]], %[[LOFF]], %[[W]] : tensor<16x8xf32>, tensor<3xi32>, tensor<2x8x8xf32>
// CHECK: %[[A:.*]] = llm.silu %[[H]] : tensor<16x8xf32>
// CHECK: %[[BACK:.*]] = llm.moe_ungroup %[[A]], %[[COUNTS]] : tensor<16x8xf32>, tensor<2x2xi32>
// CHECK: %[[HOME:.*]] = dist.all_to_all %[[BACK]] on @mesh axes ["ep"] split 0 concat 0 : tensor<16x8xf32> -> tensor<16x8xf32>
// CHECK: %[[YS:.*]] = llm.moe_unpack %[[HOME]], %[[OFF]], %[[KEPT]] : tensor<16x8xf32>, tensor<5xi32>, tensor<2x2xi32> -> tensor<8x8xf32>
// CHECK: llm.moe_combine %[[YS]], %[[POS]] weights %{{.*}} : tensor<8x8xf32>, tensor<4x2xi32> weights tensor<4x2xf32>
// CHECK: dist.all_reduce %{{.*}} on @mesh axes ["ep"] reduction "sum" : tensor<4xf32>
func.func @forward(%w: tensor<4x8x8xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %r: tensor<8x4xf32> {llm.param = #llm.param<name = "r", init = "normal", scale = 1.0>},
                   %table: tensor<16x8xf32> {llm.param = #llm.param<name = "t", init = "normal", scale = 1.0>},
                   %tokens: tensor<2x4xi32>) -> tensor<f32> {
  %e = llm.embedding %table, %tokens : tensor<16x8xf32>, tensor<2x4xi32>
  %x = llm.reshape %e : tensor<2x4x8xf32> to tensor<8x8xf32>
  %logits = llm.matmul %x, %r : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %rw, %ex, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits {top_k = 2 : i64} : tensor<8x4xf32>
  %xs = llm.moe_dispatch %x, %pos : tensor<8x8xf32>, tensor<8x2xi32>
  %h = llm.grouped_matmul %xs, %off, %w : tensor<16x8xf32>, tensor<5xi32>, tensor<4x8x8xf32>
  %a = llm.silu %h : tensor<16x8xf32>
  %y = llm.moe_combine %a, %pos weights %rw : tensor<16x8xf32>, tensor<8x2xi32> weights tensor<8x2xf32>
  %b = llm.reshape %y : tensor<8x8xf32> to tensor<2x4x8xf32>
  %head = llm.matmul %b, %table {transpose_b} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %s = llm.cross_entropy %head, %tokens : tensor<2x4x16xf32>, tensor<2x4xi32>
  %aux = llm.router_loss %ps, %cnt, %z {aux_scale = 0.5 : f64, z_scale = 0.25 : f64} : tensor<4xf32>, tensor<4xf32>
  %l = llm.add %s, %aux : tensor<f32>, tensor<f32>
  return %l : tensor<f32>
}

// -----

// Three experts do not split over two ranks.
func.func @forward(%w: tensor<3x8x8xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<8x8xf32>, %logits: tensor<8x3xf32>) -> tensor<8x8xf32> {
  %rw, %ex, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits {top_k = 2 : i64} : tensor<8x3xf32>
  // expected-error @+1 {{expert parallelism: 3 experts do not split evenly over 2 ranks of ep}}
  %xs = llm.moe_dispatch %x, %pos : tensor<8x8xf32>, tensor<8x2xi32>
  %h = llm.grouped_matmul %xs, %off, %w : tensor<16x8xf32>, tensor<4xi32>, tensor<3x8x8xf32>
  %y = llm.moe_combine %h, %pos : tensor<16x8xf32>, tensor<8x2xi32>
  return %y : tensor<8x8xf32>
}

// -----

// Rows regrouped by expert cannot be reshaped as if they were the tokens.
func.func @forward(%w: tensor<4x8x8xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<8x8xf32>, %logits: tensor<8x4xf32>) -> tensor<2x8x8xf32> {
  %rw, %ex, %pos, %off, %ps, %cnt, %z = llm.moe_route %logits {top_k = 2 : i64} : tensor<8x4xf32>
  %xs = llm.moe_dispatch %x, %pos : tensor<8x8xf32>, tensor<8x2xi32>
  %h = llm.grouped_matmul %xs, %off, %w : tensor<16x8xf32>, tensor<5xi32>, tensor<4x8x8xf32>
  // expected-error @+1 {{expert parallelism: cannot run on the rows an expert receives}}
  %s = llm.reshape %h : tensor<16x8xf32> to tensor<2x8x8xf32>
  return %s : tensor<2x8x8xf32>
}

// -----

// A dense model has no experts to spread.
// expected-error @+1 {{shard: expert parallelism (ep) needs a mixture-of-experts model; @forward has no llm.moe_dispatch}}
func.func @forward(%w: tensor<8x8xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = llm.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
