// RUN: llmc model gpt2 --preset tiny --set n_layer=2 --set batch_size=2 --set seq_len=8 --set n_embd=64 -o %t.gpt.mlir
// RUN: llmc-opt %t.gpt.mlir --llmc-shard="mesh=tp=2" | FileCheck %s
// RUN: llmc-opt %t.gpt.mlir --llmc-shard="mesh=tp=2" | FileCheck %s --check-prefix=VOCAB
// RUN: llmc-opt %t.gpt.mlir --llmc-train-pipeline="mesh=tp=2 emit=train" | FileCheck %s --check-prefix=VOLUME
// RUN: llmc-opt %t.gpt.mlir --llmc-train-pipeline="precision=bf16 mesh=tp=2 emit=graph" | FileCheck %s --check-prefix=BF16
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 --set vocab_size=255 -o %t.odd.mlir
// RUN: llmc-opt %t.odd.mlir --llmc-shard="mesh=tp=2" | FileCheck %s --check-prefix=ODD
// RUN: llmc model llama --preset tiny --set n_layer=1 --set batch_size=2 --set seq_len=8 -o %t.llama.mlir
// RUN: llmc-opt %t.llama.mlir --llmc-shard="mesh=tp=2" | FileCheck %s --check-prefix=LLAMA
// RUN: not llmc-opt %t.llama.mlir --llmc-shard="mesh=tp=4" 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not llmc-opt %s --llmc-shard="mesh=tp=2" 2>&1 | FileCheck %s --check-prefix=PATTERN
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 --set batch_size=2 --set seq_len=8 --set n_embd=64 --set vocab_size=257 -o %t.odd.mlir
// RUN: llmc-opt %t.odd.mlir --llmc-shard="mesh=tp=2" | FileCheck %s --check-prefix=PADDED

// GPT-2: the fused QKV projection is column-parallel with its columns in
// three blocks (q, k, v) split per rank; heads are split; the output
// projection is row-parallel followed by one all-reduce; same for the MLP.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg4: tensor<64x96xf32> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight"{{[^>]*}}>, llmc.shard = {global_shape = array<i64: 64, 192>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 1 : i64}]}}
// CHECK-SAME: %arg5: tensor<96xf32> {llm.param = {{[^}]*}}, llmc.shard = {global_shape = array<i64: 192>, levels = [{axes = ["tp"], blocks = 3 : i64, dim = 0 : i64}]}}
// CHECK-SAME: %arg6: tensor<32x64xf32> {llm.param = {{[^}]*}}, llmc.shard = {global_shape = array<i64: 64, 64>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}
// CHECK-SAME: %arg7: tensor<64xf32> {llm.param = #llm.param<name = "h.0.attn.c_proj.bias"
// CHECK: llm.block "h.0"
// CHECK: %[[H:.*]] = dist.replicate %{{.*}} on @mesh axes ["tp"] : tensor<2x8x64xf32>
// CHECK: llm.matmul %[[H]], %arg4 : tensor<2x8x64xf32>, tensor<64x96xf32> -> tensor<2x8x96xf32>
// CHECK: llm.slice %{{.*}} {offsets = array<i64: 0, 0, 64>} : tensor<2x8x96xf32> to tensor<2x8x32xf32>
// CHECK: llm.attention {{.*}} : tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
// CHECK: %[[PARTIAL:.*]] = llm.matmul %{{.*}}, %arg6 : tensor<2x8x32xf32>, tensor<32x64xf32> -> tensor<2x8x64xf32>
// CHECK: %[[SUM:.*]] = dist.all_reduce %[[PARTIAL]] on @mesh axes ["tp"] reduction "sum"
// CHECK: llm.add %[[SUM]], %arg7
// CHECK: dist.replicate
// CHECK: llm.gelu %{{.*}} : tensor<2x8x256xf32>
// CHECK: dist.all_reduce

// Vocabulary parallel: the tied table is split by rows once, for both the
// lookup (own rows, others zero, summed by an all_reduce) and the
// column-parallel head; the loss is built from per-row statistics with
// three all-reduces of b·s numbers.
// VOCAB-LABEL: func.func @forward
// VOCAB-SAME: %arg0: tensor<128x64xf32> {llm.param = #llm.param<name = "wte.weight"{{[^>]*}}>, llmc.shard = {global_shape = array<i64: 256, 64>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}
// VOCAB: %[[E:.*]] = llm.embedding %arg0, %{{.*}} {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "row_offset", index = 0, axes = ["tp"], stride = 128>], vocab_size = 256 : i64} : tensor<128x64xf32>
// VOCAB-NEXT: dist.all_reduce %[[E]] on @mesh axes ["tp"] reduction "sum"
// VOCAB: llm.block "h.1"
// VOCAB: llm.yield
// VOCAB: %[[X:.*]] = dist.replicate %{{.*}} on @mesh axes ["tp"] : tensor<2x8x64xf32>
// VOCAB-NEXT: %[[L:.*]] = llm.matmul %[[X]], %arg0 {transpose_b} : tensor<2x8x64xf32>, tensor<128x64xf32> -> tensor<2x8x128xf32>
// VOCAB-NEXT: %[[M:.*]] = llm.reduce_max %[[L]] {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "class_offset", index = 0, axes = ["tp"], stride = 128>], num_classes = 256 : i64} : tensor<2x8x128xf32> -> tensor<2x8xf32>
// VOCAB-NEXT: %[[MAX:.*]] = dist.all_reduce %[[M]] on @mesh axes ["tp"] reduction "max"
// VOCAB-NEXT: %[[SHIFT:.*]] = llm.stop_gradient %[[MAX]]
// VOCAB-NEXT: %[[S:.*]], %[[T:.*]] = llm.cross_entropy_partial %[[L]], %{{.*}}, %[[SHIFT]] {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "class_offset", index = 0, axes = ["tp"], stride = 128>], num_classes = 256 : i64}
// VOCAB-DAG: %[[TS:.*]] = dist.all_reduce %[[T]] on @mesh axes ["tp"] reduction "sum"
// VOCAB-DAG: %[[SS:.*]] = dist.all_reduce %[[S]] on @mesh axes ["tp"] reduction "sum"
// VOCAB: llm.cross_entropy_finish %[[SS]], %[[SHIFT]], %[[TS]]
// VOCAB-NOT: llm.cross_entropy

// Communication volume (Megatron): per layer 2 all-reduces of b·s·h
// forward and 2 backward; 2 layers here. Sampling gathers the vocabulary.
// VOLUME-LABEL: func.func @logits
// VOLUME: dist.all_gather %{{.*}} on @mesh axes ["tp"] dim 2 : tensor<2x8x128xf32> -> tensor<2x8x256xf32>
// VOLUME-LABEL: func.func @grad
// VOLUME-COUNT-4: dist.all_reduce %{{.*}} on @mesh axes ["tp"] reduction "sum" {llmc.block_name = "h.{{[01]}}"} : tensor<2x8x64xf32> -> tensor<2x8x64xf32>
// VOLUME-COUNT-4: dist.all_reduce %{{.*}} on @mesh axes ["tp"] reduction "sum" {llmc.backward, llmc.block_name = "h.{{[01]}}"} : tensor<2x8x64xf32> -> tensor<2x8x64xf32>
// VOLUME-NOT: llmc.block_name = "h.{{[01]}}"} : tensor<2x8x64xf32> -> tensor<2x8x64xf32>
// VOLUME: return

// Mixed precision: the bf16 weights are split the same way.
// BF16: %arg4: tensor<64x96xbf16> {llm.param = #llm.param<name = "h.0.attn.c_attn.weight"
// BF16: llm.matmul %{{.*}}, %arg4 : tensor<2x8x64xbf16>, tensor<64x96xbf16> -> tensor<2x8x96xbf16>

// Llama: separate q/k/v projections (transposed weights split on dim 0),
// grouped-query heads split (4 query / 2 kv heads -> 2 / 1 per rank).
// LLAMA: %arg2: tensor<64x128xf32> {llm.param = #llm.param<name = "layers.0.self_attn.q_proj.weight"{{.*}}levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]
// LLAMA: llm.attention {{.*}} : tensor<2x8x2x32xf32>, tensor<2x8x1x32xf32>
// LLAMA: llm.swiglu {{.*}} : tensor<2x8x176xf32>

// A vocabulary that does not divide is padded, never replicated: 255 rows
// over 2 ranks are 2 x 128 (the last row padding).
// ODD: %arg0: tensor<128x128xf32> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 2.000000e-02>, llmc.shard = {global_shape = array<i64: 255, 128>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}
// ODD-NOT: llm.cross_entropy %
// ODD: llm.cross_entropy_partial {{.*}}num_classes = 255 : i64{{.*}} : tensor<8x128x128xf32>

// HEADS: error: 'llm.attention' op tensor parallelism: 4 query and 2 key/value heads do not split over 4 ranks
// PATTERN: error: 'llm.yield' op tensor parallelism: uses the split result of 'llm.gelu', which must feed a projection (row-parallel matmul)
func.func @forward(%w: tensor<8x8xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<2x8xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %y = llm.block "b" -> tensor<2x8xf32> {
    %m = llm.matmul %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
    %g = llm.gelu %m : tensor<2x8xf32>
    llm.yield %g : tensor<2x8xf32>
  }
  %l = llm.cross_entropy %y, %t : tensor<2x8xf32>, tensor<2xi32>
  return %l : tensor<f32>
}

// A vocabulary tp does not divide (257 over 2) is padded to 2 x 129 rows: the
// table keeps its global shape in llmc.shard, each rank looks up its 129 rows
// (the last one past 257 is padding no id reaches), and the loss leaves the
// padded class out of its max, sum and gradient (num_classes = 257).
// PADDED-LABEL: func.func @forward
// PADDED-SAME: %arg0: tensor<129x64xf32> {llm.param = #llm.param<name = "wte.weight"{{[^>]*}}>, llmc.shard = {global_shape = array<i64: 257, 64>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}
// PADDED: llm.embedding %arg0, %{{.*}} {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "row_offset", index = 0, axes = ["tp"], stride = 129>], vocab_size = 257 : i64} : tensor<129x64xf32>
// PADDED: %[[L:.*]] = llm.matmul %{{.*}}, %arg0 {transpose_b} : tensor<2x8x64xf32>, tensor<129x64xf32> -> tensor<2x8x129xf32>
// PADDED-NEXT: llm.reduce_max %[[L]] {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "class_offset", index = 0, axes = ["tp"], stride = 129>], num_classes = 257 : i64}
// PADDED: llm.cross_entropy_partial %[[L]], {{.*}} {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "class_offset", index = 0, axes = ["tp"], stride = 129>], num_classes = 257 : i64}
