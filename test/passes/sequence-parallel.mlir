// RUN: llmc model gpt2 --preset tiny --set n_layer=2 --set batch_size=2 --set seq_len=8 --set n_embd=64 --set dropout=0.1 -o %t.gpt.mlir
// RUN: llmc-opt %t.gpt.mlir --llmc-shard="mesh=tp=2 sp=true" | FileCheck %s
// RUN: llmc-opt %t.gpt.mlir --llmc-train-pipeline="mesh=tp=2 sp=true emit=train" | FileCheck %s --check-prefix=VOLUME
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 --set vocab_size=255 --set batch_size=2 --set seq_len=8 -o %t.odd.mlir
// RUN: llmc-opt %t.odd.mlir --llmc-shard="mesh=tp=2 sp=true" | FileCheck %s --check-prefix=PADDED-HEAD
// RUN: not llmc-opt %t.gpt.mlir --llmc-shard="mesh=dp=2 sp=true" 2>&1 | FileCheck %s --check-prefix=NOTP
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 --set batch_size=2 --set seq_len=6 -o %t.six.mlir
// RUN: not llmc-opt %t.six.mlir --llmc-shard="mesh=tp=4 sp=true" 2>&1 | FileCheck %s --check-prefix=SEQ

// The residual stream is split along the sequence (2x8 -> 2x4 positions per
// rank) from the embedding on: its all_reduce becomes a reduce_scatter, the
// position embedding is sliced to the rank's positions, and dropout draws
// the global mask (rank offset tp·4 in dimension 1).
// CHECK-LABEL: func.func @forward
// CHECK-DAG: %[[G1:.*]] = dist.replicate %arg2 on @mesh axes ["tp"] : tensor<64xf32>
// CHECK-DAG: %[[POS:.*]] = dist.all_slice %{{.*}} on @mesh axes ["tp"] dim 0 : tensor<8x64xf32> -> tensor<4x64xf32>
// CHECK: %[[E:.*]] = llm.embedding
// CHECK-NEXT: %[[ES:.*]] = dist.reduce_scatter %[[E]] on @mesh axes ["tp"] dim 1 reduction "sum" : tensor<2x8x64xf32> -> tensor<2x4x64xf32>
// CHECK-NEXT: %[[X:.*]] = llm.add %[[ES]], %[[POS]] : tensor<2x4x64xf32>, tensor<4x64xf32>
// CHECK-NEXT: %[[D:.*]] = llm.dropout %[[X]] {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "offsets", index = 1, axes = ["tp"], stride = 4>], global_shape = array<i64: 2, 8, 64>, offsets = array<i64: 0, 0, 0>
// Inside a layer: layernorm on local positions with replicated gains (their
// gradient is summed over tp), then f = all_gather before the
// column-parallel projection and g = reduce_scatter after the row-parallel one.
// CHECK: llm.block "h.0" -> tensor<2x4x64xf32>
// CHECK-NEXT: %[[N:.*]] = llm.layernorm %[[D]], %[[G1]], %{{.*}} : tensor<2x4x64xf32>, tensor<64xf32>
// CHECK-NEXT: %[[F:.*]] = dist.all_gather %[[N]] on @mesh axes ["tp"] dim 1 : tensor<2x4x64xf32> -> tensor<2x8x64xf32>
// CHECK-NEXT: llm.matmul %[[F]], %arg4 : tensor<2x8x64xf32>, tensor<64x96xf32> -> tensor<2x8x96xf32>
// CHECK: llm.attention {{.*}} : tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
// CHECK: %[[P:.*]] = llm.matmul %{{.*}}, %arg6 : tensor<2x8x32xf32>, tensor<32x64xf32> -> tensor<2x8x64xf32>
// CHECK-NEXT: dist.reduce_scatter %[[P]] on @mesh axes ["tp"] dim 1 reduction "sum" : tensor<2x8x64xf32> -> tensor<2x4x64xf32>
// CHECK: llm.yield %{{.*}} : tensor<2x4x64xf32>
// The final layernorm runs split too; the vocabulary-parallel head gathers.
// CHECK: llm.block "h.1" -> tensor<2x4x64xf32>
// CHECK: llm.yield
// CHECK: %[[LF:.*]] = llm.layernorm %{{.*}} : tensor<2x4x64xf32>, tensor<64xf32>
// CHECK-NEXT: %[[H:.*]] = dist.all_gather %[[LF]] on @mesh axes ["tp"] dim 1 : tensor<2x4x64xf32> -> tensor<2x8x64xf32>
// CHECK-NEXT: llm.matmul %[[H]], %arg0 {transpose_b}

// Communication volume: per layer the bytes of TP's 2 + 2 all-reduces of
// b·s·h, as 2 all-gathers + 2 reduce-scatters forward and the same
// backward (each one's VJP is the other); 2 layers here.
// VOLUME-LABEL: func.func @grad
// VOLUME-COUNT-8: dist.{{all_gather|reduce_scatter}} %{{.*}} dim 1 {{.*}}{llmc.block_name = "h.{{[01]}}"} : tensor<2x{{[48]}}x64xf32> -> tensor<2x{{[48]}}x64xf32>
// VOLUME-COUNT-8: dist.{{all_gather|reduce_scatter}} %{{.*}} dim 1 {{.*}}{llmc.backward, llmc.block_name = "h.{{[01]}}"} : tensor<2x{{[48]}}x64xf32> -> tensor<2x{{[48]}}x64xf32>
// VOLUME-NOT: dist.{{all_gather|reduce_scatter}} {{.*}}llmc.block_name
// The replicated gains' partial gradients are summed over tp.
// VOLUME: dist.all_reduce %dgamma{{.*}} on @mesh axes ["tp"] reduction "sum" {llmc.backward} : tensor<64xf32>

// A vocabulary that does not divide (255 over 2) is padded to 2 x 128 and
// the head stays vocabulary-parallel: the final layernorm's sequence shards
// are gathered (as for any column-parallel input) into this rank's 128 rows
// of the head, the padding masked out of the loss.
// PADDED-HEAD: llm.yield
// PADDED-HEAD: %[[LF:.*]] = llm.layernorm {{.*}} : tensor<2x4x128xf32>, tensor<128xf32>
// PADDED-HEAD-NEXT: %[[G:.*]] = dist.all_gather %[[LF]] on @mesh axes ["tp"] dim 1 : tensor<2x4x128xf32> -> tensor<2x8x128xf32>
// PADDED-HEAD-NEXT: llm.matmul %[[G]], %arg0 {transpose_b} : tensor<2x8x128xf32>, tensor<128x128xf32>
// PADDED-HEAD: num_classes = 255

// NOTP: error: shard: sequence parallelism (sp) splits over the tensor-parallel axis; the mesh needs tp >= 2
// SEQ: error: sequence parallelism: sequence length 6 does not split over 4 tensor-parallel ranks
