// RUN: llmc-opt %s -split-input-file --llmc-shard="mesh=ep=2 shared-tokens=1" | FileCheck %s
// Expert parallelism in a generation step: every rank holds all 8 tokens
// (ep is not a batch axis), each keeps two of the four experts. Nothing
// travels to compute an expert's rows: a rank packs the routed rows by
// peer as training's exchange does, takes its own slot (dist.all_slice,
// no communication), computes its experts, places their rows back at its
// slot of a zero buffer (llm.pad, offset 16·rank) so the unpack sees every
// other expert's rows as zero, and one all-reduce over ep adds the ranks'
// partial outputs.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[W:[^:]*]]: tensor<2x8x8xf32> {llm.param = #llm.param<name = "w"{{.*}}llmc.shard = {global_shape = array<i64: 4, 8, 8>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// CHECK-SAME: %{{.*}}: tensor<2x4xi32>
// CHECK: %[[XS:.*]] = llm.moe_dispatch %{{.*}}, %[[POS:.*]] : tensor<8x8xf32>, tensor<8x2xi32>
// CHECK: %[[PACKED:.*]], %[[KEPT:.*]] = llm.moe_pack %[[XS]], %[[OFF:.*]] : tensor<16x8xf32>, tensor<5xi32> -> tensor<32x8xf32>, tensor<2x2xi32>
// CHECK: %[[MINE:.*]] = dist.all_slice %[[KEPT]] on @mesh axes ["ep"] dim 0 : tensor<2x2xi32> -> tensor<1x2xi32>
// CHECK: %[[SLOT:.*]] = dist.all_slice %[[PACKED]] on @mesh axes ["ep"] dim 0 : tensor<32x8xf32> -> tensor<16x8xf32>
// CHECK: %[[G:.*]], %[[LOFF:.*]] = llm.moe_regroup %[[SLOT]], %[[MINE]] : tensor<16x8xf32>, tensor<1x2xi32>
// CHECK: %[[H:.*]] = llm.grouped_matmul %[[G]], %[[LOFF]], %[[W]] : tensor<16x8xf32>, tensor<3xi32>, tensor<2x8x8xf32>
// CHECK: %[[A:.*]] = llm.silu %[[H]] : tensor<16x8xf32>
// CHECK: %[[BACK:.*]] = llm.moe_ungroup %[[A]], %[[MINE]] : tensor<16x8xf32>, tensor<1x2xi32>
// CHECK: %[[HOME:.*]] = llm.pad %[[BACK]] {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "offsets", index = 0, axes = ["ep"], stride = 16>], offsets = array<i64: 0, 0>} : tensor<16x8xf32> to tensor<32x8xf32>
// CHECK: %[[YS:.*]] = llm.moe_unpack %[[HOME]], %[[OFF]], %[[KEPT]] : tensor<32x8xf32>, tensor<5xi32>, tensor<2x2xi32> -> tensor<16x8xf32>
// CHECK: %[[Y:.*]] = llm.moe_combine %[[YS]], %[[POS]] weights %{{.*}} : tensor<16x8xf32>, tensor<8x2xi32> weights tensor<8x2xf32>
// CHECK: %[[SUM:.*]] = dist.all_reduce %[[Y]] on @mesh axes ["ep"] reduction "sum" : tensor<8x8xf32> -> tensor<8x8xf32>
// CHECK: llm.reshape %[[SUM]]
// The router's counts stay whole: the batch is not split.
// CHECK-NOT: dist.all_reduce
// CHECK: return
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

// A capacity factor keeps each expert's first 4 copies of the whole
// batch, as one rank does: the one-slot pack becomes two slots of
// min(16, 2 experts × 4) = 8 rows, the rank computes its own, and the
// model's unpack reads them back from its slot with every peer's kept
// count.

// CHECK-LABEL: func.func @forward
// CHECK: %[[PACKED:.*]], %[[KEPT:.*]] = llm.moe_pack %{{.*}}, %[[OFF:.*]] {capacity = 4 : i64} : tensor<16x8xf32>, tensor<5xi32> -> tensor<16x8xf32>, tensor<2x2xi32>
// CHECK: %[[MINE:.*]] = dist.all_slice %[[KEPT]] on @mesh axes ["ep"] dim 0 : tensor<2x2xi32> -> tensor<1x2xi32>
// CHECK: %[[SLOT:.*]] = dist.all_slice %[[PACKED]] on @mesh axes ["ep"] dim 0 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK: %[[G:.*]], %[[LOFF:.*]] = llm.moe_regroup %[[SLOT]], %[[MINE]] : tensor<8x8xf32>, tensor<1x2xi32>
// CHECK: llm.grouped_matmul %[[G]], %[[LOFF]], %{{.*}} : tensor<8x8xf32>, tensor<3xi32>, tensor<2x8x8xf32>
// CHECK: %[[BACK:.*]] = llm.moe_ungroup %{{.*}}, %[[MINE]] : tensor<8x8xf32>, tensor<1x2xi32>
// CHECK: %[[HOME:.*]] = llm.pad %[[BACK]] {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "offsets", index = 0, axes = ["ep"], stride = 8>], offsets = array<i64: 0, 0>} : tensor<8x8xf32> to tensor<16x8xf32>
// CHECK: %[[YS:.*]] = llm.moe_unpack %[[HOME]], %[[OFF]], %[[KEPT]] : tensor<16x8xf32>, tensor<5xi32>, tensor<2x2xi32> -> tensor<16x8xf32>
// CHECK: %[[Y:.*]] = llm.moe_combine %[[YS]]
// CHECK: dist.all_reduce %[[Y]] on @mesh axes ["ep"] reduction "sum" : tensor<8x8xf32> -> tensor<8x8xf32>
func.func @forward(%w: tensor<4x8x8xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %r: tensor<8x4xf32> {llm.param = #llm.param<name = "r", init = "normal", scale = 1.0>},
                   %table: tensor<16x8xf32> {llm.param = #llm.param<name = "t", init = "normal", scale = 1.0>},
                   %tokens: tensor<2x4xi32>) -> tensor<f32> {
  %e = llm.embedding %table, %tokens : tensor<16x8xf32>, tensor<2x4xi32>
  %x = llm.reshape %e : tensor<2x4x8xf32> to tensor<8x8xf32>
  %logits = llm.matmul %x, %r : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %rw, %ex, %pos, %offsets, %ps, %counts, %z = llm.moe_route %logits {top_k = 2 : i64} : tensor<8x4xf32>
  %xs = llm.moe_dispatch %x, %pos : tensor<8x8xf32>, tensor<8x2xi32>
  %packed, %kept = llm.moe_pack %xs, %offsets {capacity = 4 : i64} : tensor<16x8xf32>, tensor<5xi32> -> tensor<16x8xf32>, tensor<1x4xi32>
  %g, %loff = llm.moe_regroup %packed, %kept : tensor<16x8xf32>, tensor<1x4xi32>
  %h = llm.grouped_matmul %g, %loff, %w : tensor<16x8xf32>, tensor<5xi32>, tensor<4x8x8xf32>
  %back = llm.moe_ungroup %h, %kept : tensor<16x8xf32>, tensor<1x4xi32>
  %ys = llm.moe_unpack %back, %offsets, %kept : tensor<16x8xf32>, tensor<5xi32>, tensor<1x4xi32> -> tensor<16x8xf32>
  %y = llm.moe_combine %ys, %pos weights %rw : tensor<16x8xf32>, tensor<8x2xi32> weights tensor<8x2xf32>
  %b = llm.reshape %y : tensor<8x8xf32> to tensor<2x4x8xf32>
  %head = llm.matmul %b, %table {transpose_b} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %s = llm.cross_entropy %head, %tokens : tensor<2x4x16xf32>, tensor<2x4xi32>
  return %s : tensor<f32>
}
