// RUN: llmc-opt %s --llmc-decompose-collectives | FileCheck %s

dist.mesh @mesh axes ["tp"] shape [2]

// A gather along dimension 1 with a batch in front: gather [1, local] along
// 0, move the rank index next to the sequence, merge.
// CHECK-LABEL: func.func @gather_seq
// CHECK-NEXT: %[[R:.*]] = llm.reshape %arg0 : tensor<2x4x8xf32> to tensor<1x2x4x8xf32>
// CHECK-NEXT: %[[G:.*]] = dist.all_gather %[[R]] on @mesh axes ["tp"] dim 0 : tensor<1x2x4x8xf32> -> tensor<2x2x4x8xf32>
// CHECK-NEXT: %[[T:.*]] = llm.transpose %[[G]] {permutation = array<i64: 1, 0, 2, 3>} : tensor<2x2x4x8xf32> to tensor<2x2x4x8xf32>
// CHECK-NEXT: %[[O:.*]] = llm.reshape %[[T]] : tensor<2x2x4x8xf32> to tensor<2x8x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @gather_seq(%x: tensor<2x4x8xf32>) -> tensor<2x8x8xf32> {
  %g = dist.all_gather %x on @mesh axes ["tp"] dim 1 {replicated_grad} : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  return %g : tensor<2x8x8xf32>
}

// Nothing in front of the dimension: the chunks are contiguous already.
// CHECK-LABEL: func.func @gather_contiguous
// CHECK-NEXT: %[[R:.*]] = llm.reshape %arg0 : tensor<1x4x8xf32> to tensor<4x8xf32>
// CHECK-NEXT: %[[G:.*]] = dist.all_gather %[[R]] on @mesh axes ["tp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[O:.*]] = llm.reshape %[[G]] : tensor<8x8xf32> to tensor<1x8x8xf32>
// CHECK-NOT: llm.transpose
func.func @gather_contiguous(%x: tensor<1x4x8xf32>) -> tensor<1x8x8xf32> {
  %g = dist.all_gather %x on @mesh axes ["tp"] dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
  return %g : tensor<1x8x8xf32>
}

// A reduce-scatter along the sequence: split it into (rank, chunk), move the
// rank index outermost, scatter along 0.
// CHECK-LABEL: func.func @scatter_seq
// CHECK-NEXT: %[[R:.*]] = llm.reshape %arg0 : tensor<2x8x8xf32> to tensor<2x2x4x8xf32>
// CHECK-NEXT: %[[T:.*]] = llm.transpose %[[R]] {permutation = array<i64: 1, 0, 2, 3>} : tensor<2x2x4x8xf32> to tensor<2x2x4x8xf32>
// CHECK-NEXT: %[[S:.*]] = dist.reduce_scatter %[[T]] on @mesh axes ["tp"] dim 0 reduction "sum" : tensor<2x2x4x8xf32> -> tensor<1x2x4x8xf32>
// CHECK-NEXT: llm.reshape %[[S]] : tensor<1x2x4x8xf32> to tensor<2x4x8xf32>
func.func @scatter_seq(%x: tensor<2x8x8xf32>) -> tensor<2x4x8xf32> {
  %s = dist.reduce_scatter %x on @mesh axes ["tp"] dim 1 reduction "sum" : tensor<2x8x8xf32> -> tensor<2x4x8xf32>
  return %s : tensor<2x4x8xf32>
}

// This rank's vocabulary columns of [2, 3, 8].
// CHECK-LABEL: func.func @slice_last
// CHECK-NEXT: %[[R:.*]] = llm.reshape %arg0 : tensor<2x3x8xf32> to tensor<2x3x2x4xf32>
// CHECK-NEXT: %[[T:.*]] = llm.transpose %[[R]] {permutation = array<i64: 2, 0, 1, 3>} : tensor<2x3x2x4xf32> to tensor<2x2x3x4xf32>
// CHECK-NEXT: %[[S:.*]] = dist.all_slice %[[T]] on @mesh axes ["tp"] dim 0 : tensor<2x2x3x4xf32> -> tensor<1x2x3x4xf32>
// CHECK-NEXT: llm.reshape %[[S]] : tensor<1x2x3x4xf32> to tensor<2x3x4xf32>
func.func @slice_last(%x: tensor<2x3x8xf32>) -> tensor<2x3x4xf32> {
  %s = dist.all_slice %x on @mesh axes ["tp"] dim 2 : tensor<2x3x8xf32> -> tensor<2x3x4xf32>
  return %s : tensor<2x3x4xf32>
}

// Dimension 0 is left alone.
// CHECK-LABEL: func.func @dim0
// CHECK-NEXT: dist.all_gather %arg0 on @mesh axes ["tp"] dim 0
func.func @dim0(%x: tensor<4x8xf32>) -> tensor<8x8xf32> {
  %g = dist.all_gather %x on @mesh axes ["tp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  return %g : tensor<8x8xf32>
}
