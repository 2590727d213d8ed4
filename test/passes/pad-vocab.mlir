// RUN: llmc-opt %s -split-input-file --llmc-pad-vocab="multiple=64" | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-pad-vocab="multiple=1" | FileCheck %s --check-prefix=ONE
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 --set batch_size=2 --set seq_len=8 --set n_embd=64 --set vocab_size=257 -o %t.gpt.mlir
// RUN: llmc-opt %t.gpt.mlir --llmc-train-pipeline="vocab-multiple=64 mesh=tp=2 emit=graph" | FileCheck %s --check-prefix=TP
// RUN: llmc-opt %t.gpt.mlir --llmc-train-pipeline="vocab-multiple=64 emit=train" | FileCheck %s --check-prefix=TRAIN
// RUN: llmc-opt %t.gpt.mlir --llmc-train-pipeline="target=cuda emit=graph" | FileCheck %s --check-prefix=CUDA
// RUN: llmc-opt %t.gpt.mlir --llmc-train-pipeline="emit=graph" | FileCheck %s --check-prefix=CPU

// A tied table: the head's weight (and the embedding's table) grows from
// 257 to 320 rows, the padding a shard level of the real [257, 16]; the
// logits grow with it and the loss keeps its 257 classes; the model
// attribute records the padded size.
// CHECK: module attributes {llmc.model = {family = "gpt2", padded_vocab_size = 320 : i64, vocab_size = 257 : i64}}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<320x16xf32> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 2.000000e-02>, llmc.shard = {global_shape = array<i64: 257, 16>, levels = [{axes = [], blocks = 1 : i64, dim = 0 : i64, pad_to = 320 : i64}]}}
// CHECK-SAME: -> tensor<f32>
// CHECK: llm.embedding %arg0, %arg1 : tensor<320x16xf32>, tensor<2x4xi32>
// CHECK: %[[L:.*]] = llm.matmul %{{.*}}, %arg0 {transpose_b} : tensor<2x4x16xf32>, tensor<320x16xf32> -> tensor<2x4x320xf32>
// CHECK: llm.cross_entropy %[[L]], %arg2 {num_classes = 257 : i64} : tensor<2x4x320xf32>, tensor<2x4xi32>
// ONE-LABEL: func.func @forward
// ONE-SAME: %arg0: tensor<257x16xf32> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 2.000000e-02>}, %arg1
// ONE: llm.cross_entropy %{{.*}}, %arg2 : tensor<2x4x257xf32>
module attributes {llmc.model = {family = "gpt2", vocab_size = 257 : i64}} {
func.func @forward(%wte: tensor<257x16xf32> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 0.02>},
                   %tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %x = llm.embedding %wte, %tokens : tensor<257x16xf32>, tensor<2x4xi32>
  %l = llm.matmul %x, %wte {transpose_b} : tensor<2x4x16xf32>, tensor<257x16xf32> -> tensor<2x4x257xf32>
  %loss = llm.cross_entropy %l, %targets : tensor<2x4x257xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}
}

// -----

// Gemma 2: the logit soft-cap between head and loss is padded with them.
// CHECK: family = "gemma2", padded_vocab_size = 320
// CHECK-LABEL: func.func @forward
// CHECK: %[[L:.*]] = llm.matmul %{{.*}}, %arg0 {transpose_b} : tensor<2x4x16xf32>, tensor<320x16xf32> -> tensor<2x4x320xf32>
// CHECK: %[[C:.*]] = llm.softcap %[[L]] {cap = 3.000000e+01 : f64} : tensor<2x4x320xf32>
// CHECK: llm.cross_entropy %[[C]], %arg2 {num_classes = 257 : i64} : tensor<2x4x320xf32>, tensor<2x4xi32>
module attributes {llmc.model = {family = "gemma2", vocab_size = 257 : i64}} {
func.func @forward(%wte: tensor<257x16xf32> {llm.param = #llm.param<name = "embed_tokens.weight", init = "normal", scale = 0.02>},
                   %tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %x = llm.embedding %wte, %tokens : tensor<257x16xf32>, tensor<2x4xi32>
  %l = llm.matmul %x, %wte {transpose_b} : tensor<2x4x16xf32>, tensor<257x16xf32> -> tensor<2x4x257xf32>
  %c = llm.softcap %l {cap = 30.0 : f64} : tensor<2x4x257xf32>
  %loss = llm.cross_entropy %c, %targets : tensor<2x4x257xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}
}

// -----

// A [D, V] head pads its columns.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<16x128xf32> {llm.param = #llm.param<name = "lm_head.weight"{{.*}}>, llmc.shard = {global_shape = array<i64: 16, 100>, levels = [{axes = [], blocks = 1 : i64, dim = 1 : i64, pad_to = 128 : i64}]}}
// CHECK: llm.cross_entropy %{{.*}}, %arg2 {num_classes = 100 : i64} : tensor<2x4x128xf32>
func.func @forward(%w: tensor<16x100xf32> {llm.param = #llm.param<name = "lm_head.weight", init = "normal", scale = 0.02>},
                   %h: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %l = llm.matmul %h, %w : tensor<2x4x16xf32>, tensor<16x100xf32> -> tensor<2x4x100xf32>
  %loss = llm.cross_entropy %l, %targets : tensor<2x4x100xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}

// -----

// A multiple already, or logits that no parameter's matmul makes: as is.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<128x16xf32>
// CHECK: llm.cross_entropy %{{.*}}, %arg2 : tensor<2x4x128xf32>
// CHECK: llm.cross_entropy %arg3, %arg2 : tensor<2x4x100xf32>
func.func @forward(%w: tensor<128x16xf32> {llm.param = #llm.param<name = "lm_head.weight", init = "normal", scale = 0.02>},
                   %h: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>, %given: tensor<2x4x100xf32>) -> (tensor<f32>, tensor<f32>) {
  %l = llm.matmul %h, %w {transpose_b} : tensor<2x4x16xf32>, tensor<128x16xf32> -> tensor<2x4x128xf32>
  %loss = llm.cross_entropy %l, %targets : tensor<2x4x128xf32>, tensor<2x4xi32>
  %other = llm.cross_entropy %given, %targets : tensor<2x4x100xf32>, tensor<2x4xi32>
  return %loss, %other : tensor<f32>, tensor<f32>
}

// The pipeline pads before tensor parallelism, which splits the padded
// vocabulary: 320 rows as 2 x 160, the loss's statistics over the 257
// classes.
// TP-LABEL: func.func @forward
// TP-SAME: %arg0: tensor<160x64xf32> {llm.param = #llm.param<name = "wte.weight"{{[^>]*}}>, llmc.shard = {global_shape = array<i64: 257, 64>, levels = [{axes = [], blocks = 1 : i64, dim = 0 : i64, pad_to = 320 : i64}, {axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}}
// TP: llm.embedding %arg0, %{{.*}} {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "row_offset", index = 0, axes = ["tp"], stride = 160>], vocab_size = 320 : i64}
// TP: llm.reduce_max %{{.*}} {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "class_offset", index = 0, axes = ["tp"], stride = 160>], num_classes = 257 : i64} : tensor<2x8x160xf32>
// TP: llm.cross_entropy_partial {{.*}}stride = 160>], num_classes = 257 : i64}

// Training: the loss's gradient leaves the padding out too, the fused head
// carries num_classes, and sampling's logits are cut back to 257 classes.
// TRAIN-LABEL: func.func @logits
// TRAIN: %[[L:.*]] = llm.matmul {{.*}} -> tensor<2x8x320xf32>
// TRAIN: %[[C:.*]] = llm.slice %[[L]] {offsets = array<i64: 0, 0, 0>} : tensor<2x8x320xf32> to tensor<2x8x257xf32>
// TRAIN: return %[[C]]
// TRAIN-LABEL: func.func @train_step
// TRAIN: llm.linear_cross_entropy_train {{.*}}num_classes = 257 : i64{{.*}} : tensor<2x8x64xf32>, tensor<320x64xf32>

// The defaults: --target cuda pads to a multiple of 128, the CPU not at all.
// CUDA: padded_vocab_size = 384
// CUDA: llm.cross_entropy {{.*}}num_classes = 257 : i64{{.*}} : tensor<2x8x384xf32>
// CPU-NOT: padded_vocab_size
// CPU: llm.cross_entropy {{.*}} : tensor<2x8x257xf32>
