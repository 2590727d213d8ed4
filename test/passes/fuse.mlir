// RUN: llmc-opt %s -split-input-file --llmc-fuse | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse="chunk-mb=0.00049" | FileCheck %s --check-prefix=CHUNK
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=none" | FileCheck %s --check-prefix=NONE
// RUN: not llmc-opt %s -split-input-file --llmc-fuse="fusions=bias-gelu" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="emit=train" | FileCheck %s --check-prefix=PIPELINE
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="emit=train fuse=none" | FileCheck %s --check-prefix=UNFUSED

// The training head: the logits' product, the loss, its gradient and the
// two products of the backward become one op, placed where the loss was;
// the loss seed moves up to it. 32 rows of 32 classes fit one chunk of
// the default 256 MiB; 512 bytes hold 4 rows.
// CHECK-LABEL: func.func @train
// CHECK-NEXT:  %[[SEED:.*]] = llm.fill 1.0
// CHECK-NEXT:  %[[L:.*]], %[[DH:.*]], %[[DW:.*]], %{{.*}} = llm.linear_cross_entropy_train %arg0, %arg1, %arg2, %[[SEED]] {chunk_rows = 32 : i64, transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32>, tensor<4x8xi32>
// CHECK-NEXT:  return %[[L]], %[[DH]], %[[DW]]
// CHUNK-LABEL: func.func @train
// CHUNK: chunk_rows = 4 : i64
// NONE-LABEL: func.func @train
// NONE: llm.cross_entropy_grad
// UNKNOWN: error: llmc-fuse: unknown fusion 'bias-gelu' (expected all, none or a list of: linear-cross-entropy)
func.func @train(%h: tensor<4x8x16xf32>, %w: tensor<32x16xf32>, %t: tensor<4x8xi32>)
    -> (tensor<f32>, tensor<4x8x16xf32>, tensor<32x16xf32>) {
  %logits = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32> -> tensor<4x8x32xf32>
  %loss = llm.cross_entropy %logits, %t : tensor<4x8x32xf32>, tensor<4x8xi32>
  %seed = llm.fill 1.0 : tensor<f32>
  %g = llm.cross_entropy_grad %logits, %t, %seed : tensor<4x8x32xf32>, tensor<4x8xi32>
  %dh = llm.matmul %g, %w : tensor<4x8x32xf32>, tensor<32x16xf32> -> tensor<4x8x16xf32>
  %hr = llm.reshape %h : tensor<4x8x16xf32> to tensor<32x16xf32>
  %gr = llm.reshape %g : tensor<4x8x32xf32> to tensor<32x32xf32>
  %dw = llm.matmul %gr, %hr {transpose_a} : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<4x8x16xf32>, tensor<32x16xf32>
}

// -----

// An untied head, w [D, V]: the backward's transposes follow.
// CHECK-LABEL: func.func @untied
// CHECK: llm.linear_cross_entropy_train %arg0, %arg1, %arg2, %{{.*}} {chunk_rows = 32 : i64}
// CHECK-NOT: llm.matmul
func.func @untied(%h: tensor<4x8x16xf32>, %w: tensor<16x32xf32>, %t: tensor<4x8xi32>)
    -> (tensor<f32>, tensor<4x8x16xf32>, tensor<16x32xf32>) {
  %logits = llm.matmul %h, %w : tensor<4x8x16xf32>, tensor<16x32xf32> -> tensor<4x8x32xf32>
  %loss = llm.cross_entropy %logits, %t : tensor<4x8x32xf32>, tensor<4x8xi32>
  %seed = llm.fill 1.0 : tensor<f32>
  %g = llm.cross_entropy_grad %logits, %t, %seed : tensor<4x8x32xf32>, tensor<4x8xi32>
  %dh = llm.matmul %g, %w {transpose_b} : tensor<4x8x32xf32>, tensor<16x32xf32> -> tensor<4x8x16xf32>
  %hr = llm.reshape %h : tensor<4x8x16xf32> to tensor<32x16xf32>
  %gr = llm.reshape %g : tensor<4x8x32xf32> to tensor<32x32xf32>
  %dw = llm.matmul %hr, %gr {transpose_a} : tensor<32x16xf32>, tensor<32x32xf32> -> tensor<16x32xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<4x8x16xf32>, tensor<16x32xf32>
}

// -----

// Evaluation: the loss alone.
// CHECK-LABEL: func.func @eval
// CHECK-NEXT: %[[L:.*]], %{{.*}} = llm.linear_cross_entropy %arg0, %arg1, %arg2 {chunk_rows = 32 : i64, transpose_b}
// CHECK-NEXT: return %[[L]]
func.func @eval(%h: tensor<4x8x16xf32>, %w: tensor<32x16xf32>, %t: tensor<4x8xi32>) -> tensor<f32> {
  %logits = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32> -> tensor<4x8x32xf32>
  %loss = llm.cross_entropy %logits, %t : tensor<4x8x32xf32>, tensor<4x8xi32>
  return %loss : tensor<f32>
}

// -----

// Logits something else reads (here returned), a bf16 head, and a LoRA
// branch added to the logits stay unfused.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: linear_cross_entropy
// CHECK: return
func.func @kept(%h: tensor<4x8x16xf32>, %w: tensor<32x16xf32>, %t: tensor<4x8xi32>,
                %hb: tensor<4x8x16xbf16>, %wb: tensor<32x16xbf16>, %lora: tensor<4x8x32xf32>)
    -> (tensor<f32>, tensor<4x8x32xf32>, tensor<f32>, tensor<f32>) {
  %logits = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32> -> tensor<4x8x32xf32>
  %loss = llm.cross_entropy %logits, %t : tensor<4x8x32xf32>, tensor<4x8xi32>
  %lb = llm.matmul %hb, %wb {transpose_b} : tensor<4x8x16xbf16>, tensor<32x16xbf16> -> tensor<4x8x32xbf16>
  %lossb = llm.cross_entropy %lb, %t : tensor<4x8x32xbf16>, tensor<4x8xi32>
  %base = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32> -> tensor<4x8x32xf32>
  %adapted = llm.add %base, %lora : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  %lossl = llm.cross_entropy %adapted, %t : tensor<4x8x32xf32>, tensor<4x8xi32>
  return %loss, %logits, %lossb, %lossl : tensor<f32>, tensor<4x8x32xf32>, tensor<f32>, tensor<f32>
}

// The whole pipeline: the training step's head and the evaluation's are
// fused, the logits program keeps its logits.
// PIPELINE-LABEL: func.func @logits
// PIPELINE-NOT: linear_cross_entropy
// PIPELINE: llm.matmul {{.*}}transpose_b
// PIPELINE-LABEL: func.func @train_step
// PIPELINE-NOT: llm.cross_entropy
// PIPELINE: llm.linear_cross_entropy_train
// PIPELINE-NOT: llm.cross_entropy
// UNFUSED-NOT: linear_cross_entropy
