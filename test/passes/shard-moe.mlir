// RUN: llmc-opt %s --llmc-shard="mesh=dp=2" | FileCheck %s
// Data parallelism over a mixture-of-experts layer: every op runs on a
// rank's rows (positions and offsets index that rank's copies; the tokens
// reshape back to [B, T, C] by rows), and llm.router_loss sums the counts
// over the batch axes and counts its terms twice, so that the two ranks'
// losses average to the whole batch's.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{.*}}: tensor<1x4xi32>
// CHECK: llm.moe_route %{{.*}} {top_k = 2 : i64} : tensor<4x4xf32>
// CHECK: llm.moe_dispatch %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x2xi32>
// CHECK: llm.grouped_matmul {{.*}} : tensor<8x8xf32>, tensor<5xi32>, tensor<4x8x8xf32>
// CHECK: llm.moe_combine {{.*}} : tensor<8x8xf32>, tensor<4x2xi32> weights tensor<4x2xf32>
// CHECK: llm.reshape %{{.*}} : tensor<4x8xf32> to tensor<1x4x8xf32>
// CHECK: %[[TOTAL:.*]] = dist.all_reduce %[[COUNTS:.*]] on @mesh axes ["dp"] reduction "sum" : tensor<4xf32> -> tensor<4xf32>
// CHECK: llm.router_loss %{{.*}}, %[[TOTAL]], %{{.*}} {aux_scale = 1.000000e+00 : f64, z_scale = 5.000000e-01 : f64}
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
  %y = llm.moe_combine %h, %pos weights %rw : tensor<16x8xf32>, tensor<8x2xi32> weights tensor<8x2xf32>
  %b = llm.reshape %y : tensor<8x8xf32> to tensor<2x4x8xf32>
  %head = llm.matmul %b, %table {transpose_b} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %s = llm.cross_entropy %head, %tokens : tensor<2x4x16xf32>, tensor<2x4xi32>
  %aux = llm.router_loss %ps, %cnt, %z {aux_scale = 0.5 : f64, z_scale = 0.25 : f64} : tensor<4xf32>, tensor<4xf32>
  %l = llm.add %s, %aux : tensor<f32>, tensor<f32>
  return %l : tensor<f32>
}
