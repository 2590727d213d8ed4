// RUN: llmc-opt %s --llmc-shard="mesh=dp=2" | FileCheck %s --check-prefix=DP
// RUN: llmc-opt %s --llmc-shard="mesh=ep=2" | FileCheck %s --check-prefix=EP
// A mixture of experts with a capacity factor: each expert takes at most 4
// of the batch's 16 copies, counted over the whole batch as one rank
// counts them. Split over two ranks (data or expert parallel), each rank
// all-gathers every rank's per-expert counts and keeps what the ranks
// before it left (group_position: its place among them); under ep the
// one-slot pack becomes two slots of min(8 rows, 2 experts × 4) rows,
// exchanged by all-to-all and regrouped by local expert, and the ungroup
// sends the rows home before the unpack.

// DP-LABEL: func.func @forward
// DP: %[[ROW:.*]] = llm.reshape %counts : tensor<4xf32> to tensor<1x4xf32>
// DP: %[[ALL:.*]] = dist.all_gather %[[ROW]] on @mesh axes ["dp"] dim 0 : tensor<1x4xf32> -> tensor<2x4xf32>
// DP: llm.moe_pack %{{.*}}, %offsets group %[[ALL]] {capacity = 4 : i64, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "group_position", index = 0, axes = ["dp"], stride = 1>], group_position = array<i64: 0>} : tensor<8x8xf32>, tensor<5xi32> group tensor<2x4xf32> -> tensor<8x8xf32>, tensor<1x4xi32>
// DP: llm.moe_regroup %{{.*}} : tensor<8x8xf32>, tensor<1x4xi32>
// DP: llm.grouped_matmul {{.*}} : tensor<8x8xf32>, tensor<5xi32>, tensor<4x8x8xf32>
// DP: llm.moe_unpack {{.*}} -> tensor<8x8xf32>
// DP-NOT: dist.all_to_all

// EP-LABEL: func.func @forward
// EP: dist.all_gather %{{.*}} on @mesh axes ["ep"] dim 0 : tensor<1x4xf32> -> tensor<2x4xf32>
// EP: %[[PACKED:.*]], %[[KEPT:.*]] = llm.moe_pack {{.*}} group {{.*}} -> tensor<16x8xf32>, tensor<2x2xi32>
// EP: %[[COUNTS:.*]] = dist.all_to_all %[[KEPT]] on @mesh axes ["ep"] split 0 concat 0 : tensor<2x2xi32>
// EP: %[[RECV:.*]] = dist.all_to_all %[[PACKED]] on @mesh axes ["ep"] split 0 concat 0 : tensor<16x8xf32>
// EP: %[[G:.*]], %[[LOFF:.*]] = llm.moe_regroup %[[RECV]], %[[COUNTS]] : tensor<16x8xf32>, tensor<2x2xi32>
// EP: llm.grouped_matmul %[[G]], %[[LOFF]], %{{.*}} : tensor<16x8xf32>, tensor<3xi32>, tensor<2x8x8xf32>
// EP: %[[BACK:.*]] = llm.moe_ungroup %{{.*}}, %[[COUNTS]] : tensor<16x8xf32>, tensor<2x2xi32>
// EP: %[[HOME:.*]] = dist.all_to_all %[[BACK]] on @mesh axes ["ep"] split 0 concat 0 : tensor<16x8xf32>
// EP: llm.moe_unpack %[[HOME]], %offsets, %[[KEPT]] : tensor<16x8xf32>, tensor<5xi32>, tensor<2x2xi32> -> tensor<8x8xf32>
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
