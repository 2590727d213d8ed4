// RUN: llmc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// Expert parallelism's local ops round-trip (P ranks from kept and counts
// [P, El], slots of S rows from a packed buffer's P·S rows); each shape
// rule's error names the operand and the shape it expects.

// CHECK-LABEL: func.func @exchange
// CHECK: %[[P:.*]], %[[K:.*]] = llm.moe_pack %{{.*}}, %{{.*}} {capacity = 6 : i64} : tensor<24x32xbf16>, tensor<9xi32> -> tensor<32x32xbf16>, tensor<2x4xi32>
// CHECK: %[[G:.*]], %[[L:.*]] = llm.moe_regroup %[[P]], %[[K]] : tensor<32x32xbf16>, tensor<2x4xi32>
// CHECK: llm.moe_ungroup %[[G]], %[[K]] : tensor<32x32xbf16>, tensor<2x4xi32>
// CHECK: llm.moe_unpack %{{.*}}, %{{.*}}, %[[K]] : tensor<32x32xbf16>, tensor<9xi32>, tensor<2x4xi32> -> tensor<24x32xbf16>
// CHECK: llm.moe_pack %{{.*}}, %{{.*}} : tensor<24x32xbf16>, tensor<9xi64> -> tensor<32x32xbf16>, tensor<2x4xi32>
func.func @exchange(%xs: tensor<24x32xbf16>, %off: tensor<9xi32>, %off64: tensor<9xi64>)
    -> (tensor<24x32xbf16>, tensor<5xi32>, tensor<32x32xbf16>) {
  %packed, %kept = llm.moe_pack %xs, %off {capacity = 6 : i64} : tensor<24x32xbf16>, tensor<9xi32> -> tensor<32x32xbf16>, tensor<2x4xi32>
  %g, %loff = llm.moe_regroup %packed, %kept : tensor<32x32xbf16>, tensor<2x4xi32>
  %back = llm.moe_ungroup %g, %kept : tensor<32x32xbf16>, tensor<2x4xi32>
  %ys = llm.moe_unpack %back, %off, %kept : tensor<32x32xbf16>, tensor<9xi32>, tensor<2x4xi32> -> tensor<24x32xbf16>
  %unlimited, %k2 = llm.moe_pack %xs, %off64 : tensor<24x32xbf16>, tensor<9xi64> -> tensor<32x32xbf16>, tensor<2x4xi32>
  return %ys, %loff, %unlimited : tensor<24x32xbf16>, tensor<5xi32>, tensor<32x32xbf16>
}

// -----

func.func @f(%xs: tensor<2x12x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{xs must be rank 2}}
  %p, %k = llm.moe_pack %xs, %off : tensor<2x12x32xf32>, tensor<9xi32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<8xi32>) {
  // expected-error @+1 {{offsets must be [9] for 2 ranks × 4 experts, got 'tensor<8xi32>'}}
  %p, %k = llm.moe_pack %xs, %off : tensor<24x32xf32>, tensor<8xi32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{packed must be [2·S, width] (one slot of S rows per rank), got 'tensor<31x32xf32>'}}
  %p, %k = llm.moe_pack %xs, %off : tensor<24x32xf32>, tensor<9xi32> -> tensor<31x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{packed must have xs's width 32 and element type 'f32', got 'tensor<32x32xbf16>'}}
  %p, %k = llm.moe_pack %xs, %off : tensor<24x32xf32>, tensor<9xi32> -> tensor<32x32xbf16>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{kept must be [ranks, experts per rank] with both ≥ 1, got 'tensor<8xi32>'}}
  %p, %k = llm.moe_pack %xs, %off : tensor<24x32xf32>, tensor<9xi32> -> tensor<32x32xf32>, tensor<8xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{result #1 must be ranked tensor of 32-bit signless integer values}}
  %p, %k = llm.moe_pack %xs, %off : tensor<24x32xf32>, tensor<9xi32> -> tensor<32x32xf32>, tensor<2x4xi64>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{capacity must be ≥ 0 (0: unlimited), got -1}}
  %p, %k = llm.moe_pack %xs, %off {capacity = -1 : i64} : tensor<24x32xf32>, tensor<9xi32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

// The batch's capacity over 4 ranks: group counts [4, E], this rank's
// position (absent: 0), and the rank offset that moves it.
// CHECK: dist.mesh @mesh axes ["dp", "ep"] shape [2, 2]
// CHECK-LABEL: func.func @batch_capacity
// CHECK: llm.moe_pack %{{.*}}, %{{.*}} group %{{.*}} {capacity = 24 : i64, group_position = array<i64: 1>} : tensor<24x32xbf16>, tensor<9xi32> group tensor<4x8xf32> -> tensor<32x32xbf16>, tensor<2x4xi32>
// CHECK: llm.moe_pack %{{.*}}, %{{.*}} group %{{.*}} {capacity = 24 : i64, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "group_position", index = 0, axes = ["dp", "ep"], stride = 1>], group_position = array<i64: 0>} : tensor<24x32xbf16>, tensor<9xi64> group tensor<4x8xf32> -> tensor<32x32xbf16>, tensor<2x4xi32>
// CHECK: llm.moe_pack %{{.*}}, %{{.*}} group %{{.*}} {capacity = 24 : i64} : tensor<24x32xbf16>, tensor<9xi32> group tensor<1x8xf32> -> tensor<32x32xbf16>, tensor<2x4xi32>
dist.mesh @mesh axes ["dp", "ep"] shape [2, 2]
func.func @batch_capacity(%xs: tensor<24x32xbf16>, %off: tensor<9xi32>, %off64: tensor<9xi64>,
                          %counts: tensor<4x8xf32>, %one: tensor<1x8xf32>)
    -> (tensor<32x32xbf16>, tensor<32x32xbf16>, tensor<32x32xbf16>) {
  %p1, %k1 = llm.moe_pack %xs, %off group %counts {capacity = 24 : i64, group_position = array<i64: 1>} : tensor<24x32xbf16>, tensor<9xi32> group tensor<4x8xf32> -> tensor<32x32xbf16>, tensor<2x4xi32>
  %p2, %k2 = llm.moe_pack %xs, %off64 group %counts {capacity = 24 : i64, group_position = array<i64: 0>, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "group_position", index = 0, axes = ["dp", "ep"], stride = 1>]} : tensor<24x32xbf16>, tensor<9xi64> group tensor<4x8xf32> -> tensor<32x32xbf16>, tensor<2x4xi32>
  %p3, %k3 = llm.moe_pack %xs, %off group %one {capacity = 24 : i64} : tensor<24x32xbf16>, tensor<9xi32> group tensor<1x8xf32> -> tensor<32x32xbf16>, tensor<2x4xi32>
  return %p1, %p2, %p3 : tensor<32x32xbf16>, tensor<32x32xbf16>, tensor<32x32xbf16>
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>, %counts: tensor<4x8xf32>) {
  // expected-error @+1 {{group_counts need a capacity > 0 (they count tokens against it)}}
  %p, %k = llm.moe_pack %xs, %off group %counts : tensor<24x32xf32>, tensor<9xi32> group tensor<4x8xf32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>, %counts: tensor<4x8xbf16>) {
  // expected-error @+1 {{group_counts must be f32 [ranks ≥ 1, 8] (each rank's counts of the offsets' 8 experts), got 'tensor<4x8xbf16>'}}
  %p, %k = llm.moe_pack %xs, %off group %counts {capacity = 6 : i64} : tensor<24x32xf32>, tensor<9xi32> group tensor<4x8xbf16> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>, %counts: tensor<4x7xf32>) {
  // expected-error @+1 {{group_counts must be f32 [ranks ≥ 1, 8] (each rank's counts of the offsets' 8 experts), got 'tensor<4x7xf32>'}}
  %p, %k = llm.moe_pack %xs, %off group %counts {capacity = 6 : i64} : tensor<24x32xf32>, tensor<9xi32> group tensor<4x7xf32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>, %counts: tensor<0x8xf32>) {
  // expected-error @+1 {{group_counts must be f32 [ranks ≥ 1, 8] (each rank's counts of the offsets' 8 experts), got 'tensor<0x8xf32>'}}
  %p, %k = llm.moe_pack %xs, %off group %counts {capacity = 6 : i64} : tensor<24x32xf32>, tensor<9xi32> group tensor<0x8xf32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>, %counts: tensor<32xf32>) {
  // expected-error @+1 {{group_counts must be f32 [ranks ≥ 1, 8] (each rank's counts of the offsets' 8 experts), got 'tensor<32xf32>'}}
  %p, %k = llm.moe_pack %xs, %off group %counts {capacity = 6 : i64} : tensor<24x32xf32>, tensor<9xi32> group tensor<32xf32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>, %counts: tensor<4x8xf32>) {
  // expected-error @+1 {{group_position must lie in [0, 4) (group_counts' ranks), got 4}}
  %p, %k = llm.moe_pack %xs, %off group %counts {capacity = 6 : i64, group_position = array<i64: 4>} : tensor<24x32xf32>, tensor<9xi32> group tensor<4x8xf32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>, %counts: tensor<4x8xf32>) {
  // expected-error @+1 {{group_position must lie in [0, 4) (group_counts' ranks), got -1}}
  %p, %k = llm.moe_pack %xs, %off group %counts {capacity = 6 : i64, group_position = array<i64: -1>} : tensor<24x32xf32>, tensor<9xi32> group tensor<4x8xf32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>, %counts: tensor<4x8xf32>) {
  // expected-error @+1 {{group_position must have one element (this rank's index among the batch's ranks), got 2}}
  %p, %k = llm.moe_pack %xs, %off group %counts {capacity = 6 : i64, group_position = array<i64: 1, 2>} : tensor<24x32xf32>, tensor<9xi32> group tensor<4x8xf32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%xs: tensor<24x32xf32>, %off: tensor<9xi32>) {
  // expected-error @+1 {{group_position needs group_counts}}
  %p, %k = llm.moe_pack %xs, %off {capacity = 6 : i64, group_position = array<i64: 0>} : tensor<24x32xf32>, tensor<9xi32> -> tensor<32x32xf32>, tensor<2x4xi32>
  return
}

// -----

func.func @f(%p: tensor<32x32xf32>, %off: tensor<9xi32>, %k: tensor<2x4x1xi32>) {
  // expected-error @+1 {{kept must be [ranks, experts per rank] with both ≥ 1, got 'tensor<2x4x1xi32>'}}
  %y = llm.moe_unpack %p, %off, %k : tensor<32x32xf32>, tensor<9xi32>, tensor<2x4x1xi32> -> tensor<24x32xf32>
  return
}

// -----

func.func @f(%p: tensor<32x32xf32>, %off: tensor<5xi32>, %k: tensor<2x4xi32>) {
  // expected-error @+1 {{offsets must be [9] for 2 ranks × 4 experts, got 'tensor<5xi32>'}}
  %y = llm.moe_unpack %p, %off, %k : tensor<32x32xf32>, tensor<5xi32>, tensor<2x4xi32> -> tensor<24x32xf32>
  return
}

// -----

func.func @f(%p: tensor<33x32xf32>, %off: tensor<9xi32>, %k: tensor<2x4xi32>) {
  // expected-error @+1 {{packed must be [2·S, width] (one slot of S rows per rank), got 'tensor<33x32xf32>'}}
  %y = llm.moe_unpack %p, %off, %k : tensor<33x32xf32>, tensor<9xi32>, tensor<2x4xi32> -> tensor<24x32xf32>
  return
}

// -----

func.func @f(%p: tensor<32x32xf32>, %off: tensor<9xi32>, %k: tensor<2x4xi32>) {
  // expected-error @+1 {{result must be [rows, 32] of 'f32' (packed's width and type), got 'tensor<24x16xf32>'}}
  %y = llm.moe_unpack %p, %off, %k : tensor<32x32xf32>, tensor<9xi32>, tensor<2x4xi32> -> tensor<24x16xf32>
  return
}

// -----

func.func @f(%r: tensor<32x32xf32>, %c: tensor<0x4xi32>) {
  // expected-error @+1 {{counts must be [ranks, experts per rank] with both ≥ 1, got 'tensor<0x4xi32>'}}
  %g, %l = llm.moe_regroup %r, %c : tensor<32x32xf32>, tensor<0x4xi32>
  return
}

// -----

func.func @f(%r: tensor<32x32xf32>, %c: tensor<3x4xi32>) {
  // expected-error @+1 {{recv must be [3·S, width] (one slot of S rows per rank), got 'tensor<32x32xf32>'}}
  %g, %l = llm.moe_regroup %r, %c : tensor<32x32xf32>, tensor<3x4xi32>
  return
}

// -----

func.func @f(%g: tensor<32x32xf32>, %c: tensor<8xi32>) {
  // expected-error @+1 {{counts must be [ranks, experts per rank] with both ≥ 1, got 'tensor<8xi32>'}}
  %y = llm.moe_ungroup %g, %c : tensor<32x32xf32>, tensor<8xi32>
  return
}

// -----

func.func @f(%g: tensor<32xf32>, %c: tensor<2x4xi32>) {
  // expected-error @+1 {{grouped must be [2·S, width] (one slot of S rows per rank), got 'tensor<32xf32>'}}
  %y = llm.moe_ungroup %g, %c : tensor<32xf32>, tensor<2x4xi32>
  return
}
