// RUN: llmc-opt %s -split-input-file --llmc-fuse | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse="chunk-mb=0.00049" | FileCheck %s --check-prefix=CHUNK
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=none" | FileCheck %s --check-prefix=NONE
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=bias" | FileCheck %s --check-prefix=BIAS
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=bias-gelu" | FileCheck %s --check-prefix=GELU
// RUN: llmc-opt %s -split-input-file --llmc-fuse="target=cuda" | FileCheck %s --check-prefix=CUDA
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=bias-grad" | FileCheck %s --check-prefix=GRAD
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=residual" | FileCheck %s --check-prefix=RES
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=add-norm" | FileCheck %s --check-prefix=NORM
// RUN: not llmc-opt %s -split-input-file --llmc-fuse="fusions=residual-norm" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not llmc-opt %s -split-input-file --llmc-fuse="target=tpu" 2>&1 | FileCheck %s --check-prefix=TARGET
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
// UNKNOWN: error: llmc-fuse: unknown fusion 'residual-norm' (expected all, none or a list of: add-norm, bias, bias-gelu, bias-grad, elementwise, gelu-grad, linear-cross-entropy, multi-tensor-adamw, qkv-split, residual, rope, swiglu-grad)
// TARGET: error: llmc-fuse: target must be cpu or cuda, got 'tpu'
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

// A frozen head (LoRA trains adapters only): the autodiff pass forms dh
// but no dw, so the fused op has no dw and runs no product for it.
// CHECK-LABEL: func.func @frozen
// CHECK-NEXT:  %[[SEED:.*]] = llm.fill 1.0
// CHECK-NEXT:  %[[L:.*]], %[[DH:.*]], %{{.*}} = llm.linear_cross_entropy_train %arg0, %arg1, %arg2, %[[SEED]] {chunk_rows = 32 : i64, frozen_weight, transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32>, tensor<4x8xi32>
// CHECK-NEXT:  return %[[L]], %[[DH]]
// NONE-LABEL: func.func @frozen
// NONE: llm.cross_entropy_grad
func.func @frozen(%h: tensor<4x8x16xf32>, %w: tensor<32x16xf32>, %t: tensor<4x8xi32>)
    -> (tensor<f32>, tensor<4x8x16xf32>) {
  %logits = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32> -> tensor<4x8x32xf32>
  %loss = llm.cross_entropy %logits, %t : tensor<4x8x32xf32>, tensor<4x8xi32>
  %seed = llm.fill 1.0 : tensor<f32>
  %g = llm.cross_entropy_grad %logits, %t, %seed : tensor<4x8x32xf32>, tensor<4x8xi32>
  %dh = llm.matmul %g, %w : tensor<4x8x32xf32>, tensor<32x16xf32> -> tensor<4x8x16xf32>
  return %loss, %dh : tensor<f32>, tensor<4x8x16xf32>
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

// Logits something else reads (here returned), a LoRA branch added to
// the logits, and a head whose h and w differ in type stay unfused.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: linear_cross_entropy
// CHECK: return
func.func @kept(%h: tensor<4x8x16xf32>, %w: tensor<32x16xf32>, %t: tensor<4x8xi32>,
                %lora: tensor<4x8x32xf32>)
    -> (tensor<f32>, tensor<4x8x32xf32>, tensor<f32>) {
  %logits = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32> -> tensor<4x8x32xf32>
  %loss = llm.cross_entropy %logits, %t : tensor<4x8x32xf32>, tensor<4x8xi32>
  %base = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32> -> tensor<4x8x32xf32>
  %adapted = llm.add %base, %lora : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  %lossl = llm.cross_entropy %adapted, %t : tensor<4x8x32xf32>, tensor<4x8xi32>
  return %loss, %logits, %lossl : tensor<f32>, tensor<4x8x32xf32>, tensor<f32>
}

// -----

// The vocabulary-parallel head (tensor parallelism): the forward's max and
// partial sums become linear_cross_entropy_partial where the max was, its
// sum rescaled to the all-reduced shift (s·exp(max − shift), a
// fused_elementwise) where the partial was; the backward's gradient and
// its products become linear_cross_entropy_partial_grad. The collectives
// and the rank offset stay. 16 local classes: 32 rows fit one chunk,
// 512 bytes hold 8.
// CHECK-LABEL: func.func @tp_train
// CHECK-NEXT:  %[[X:.*]] = dist.replicate %arg0
// CHECK-NEXT:  %[[MAX:.*]], %[[S:.*]], %[[T:.*]], %{{.*}} = llm.linear_cross_entropy_partial %[[X]], %arg1, %arg2 {chunk_rows = 32 : i64, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "class_offset", index = 0, axes = ["tp"], stride = 16>], num_classes = 31 : i64, transpose_b} : tensor<4x8x16xf32>, tensor<16x16xf32>, tensor<4x8xi32>
// CHECK-NEXT:  %[[M:.*]] = dist.all_reduce %[[MAX]] on @mesh axes ["tp"] reduction "max"
// CHECK-NEXT:  %[[SHIFT:.*]] = llm.stop_gradient %[[M]]
// CHECK-NEXT:  %[[SUM:.*]] = llm.fused_elementwise(%[[S]], %[[MAX]], %[[SHIFT]]) [r0 = load 0, r1 = load 1, r2 = load 2, r3 = sub r1, r2, r4 = exp r3, r5 = mul r0, r4] yields r5
// CHECK-NEXT:  %[[SS:.*]] = dist.all_reduce %[[SUM]] on @mesh axes ["tp"] reduction "sum"
// CHECK-NEXT:  %[[TS:.*]] = dist.all_reduce %[[T]] on @mesh axes ["tp"] reduction "sum"
// CHECK-NEXT:  %[[L:.*]] = llm.cross_entropy_finish %[[SS]], %[[SHIFT]], %[[TS]], %arg2
// CHECK-NEXT:  %[[SEED:.*]] = llm.fill 1.0
// CHECK-NEXT:  %[[DS:.*]], %{{.*}}, %[[DT:.*]] = llm.cross_entropy_finish_grad %[[SS]], %arg2, %[[SEED]]
// CHECK-NEXT:  %[[DX:.*]], %[[DW:.*]], %{{.*}} = llm.linear_cross_entropy_partial_grad %[[X]], %arg1, %arg2, %[[SHIFT]], %[[DS]], %[[DT]] {chunk_rows = 32 : i64, dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "class_offset", index = 0, axes = ["tp"], stride = 16>], llmc.backward, num_classes = 31 : i64, transpose_b} : tensor<4x8x16xf32>, tensor<16x16xf32>, tensor<4x8xi32>, tensor<4x8xf32>
// CHECK-NEXT:  %[[DH:.*]] = dist.all_reduce %[[DX]] on @mesh axes ["tp"] reduction "sum"
// CHECK-NEXT:  return %[[L]], %[[DH]], %[[DW]]
// CHUNK-LABEL: func.func @tp_train
// CHUNK: llm.linear_cross_entropy_partial {{.*}}chunk_rows = 8 : i64
// CHUNK: llm.linear_cross_entropy_partial_grad {{.*}}chunk_rows = 8 : i64
// NONE-LABEL: func.func @tp_train
// NONE: llm.cross_entropy_partial_grad
dist.mesh @mesh axes ["tp"] shape [2]
func.func @tp_train(%h: tensor<4x8x16xf32>, %w: tensor<16x16xf32>, %t: tensor<4x8xi32>)
    -> (tensor<f32>, tensor<4x8x16xf32>, tensor<16x16xf32>) {
  %x = dist.replicate %h on @mesh axes ["tp"] : tensor<4x8x16xf32>
  %logits = llm.matmul %x, %w {transpose_b} : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %m = llm.reduce_max %logits {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "class_offset", index = 0, axes = ["tp"], stride = 16>], num_classes = 31 : i64} : tensor<4x8x16xf32> -> tensor<4x8xf32>
  %mx = dist.all_reduce %m on @mesh axes ["tp"] reduction "max" : tensor<4x8xf32> -> tensor<4x8xf32>
  %shift = llm.stop_gradient %mx : tensor<4x8xf32>
  %s, %tl = llm.cross_entropy_partial %logits, %t, %shift {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "class_offset", index = 0, axes = ["tp"], stride = 16>], num_classes = 31 : i64} : tensor<4x8x16xf32>, tensor<4x8xi32>, tensor<4x8xf32>
  %ss = dist.all_reduce %s on @mesh axes ["tp"] reduction "sum" : tensor<4x8xf32> -> tensor<4x8xf32>
  %ts = dist.all_reduce %tl on @mesh axes ["tp"] reduction "sum" : tensor<4x8xf32> -> tensor<4x8xf32>
  %loss = llm.cross_entropy_finish %ss, %shift, %ts, %t : tensor<4x8xf32>, tensor<4x8xi32>
  %seed = llm.fill 1.0 {llmc.backward, llmc.loss_seed} : tensor<f32>
  %ds, %dm, %dt = llm.cross_entropy_finish_grad %ss, %t, %seed {llmc.backward} : tensor<4x8xf32>, tensor<4x8xi32>
  %g = llm.cross_entropy_partial_grad %logits, %t, %shift, %ds, %dt {dist.rank_offsets = [#dist.rank_offset<mesh = @mesh, attr = "class_offset", index = 0, axes = ["tp"], stride = 16>], llmc.backward, num_classes = 31 : i64} : tensor<4x8x16xf32>, tensor<4x8xi32>, tensor<4x8xf32>
  %dx = llm.matmul %g, %w {llmc.backward} : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %dh = dist.all_reduce %dx on @mesh axes ["tp"] reduction "sum" {llmc.backward} : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
  %xr = llm.reshape %x {llmc.backward} : tensor<4x8x16xf32> to tensor<32x16xf32>
  %gr = llm.reshape %g {llmc.backward} : tensor<4x8x16xf32> to tensor<32x16xf32>
  %dw = llm.matmul %gr, %xr {llmc.backward, transpose_a} : tensor<32x16xf32>, tensor<32x16xf32> -> tensor<16x16xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<4x8x16xf32>, tensor<16x16xf32>
}

// -----

// ZeRO-3 under tensor parallelism gathers the head's weight again for the
// backward: the backward op computes the logits from that copy, the one
// its products read (the same shard through the same collective).
// CHECK-LABEL: func.func @tp_regathered
// CHECK:       %[[W2:.*]] = dist.all_gather %arg1 {{.*}}llmc.backward
// CHECK-NEXT:  %[[DX:.*]], %[[DW:.*]], %{{.*}} = llm.linear_cross_entropy_partial_grad %arg0, %[[W2]], %arg2
// CHECK-NEXT:  return %[[DX]], %[[DW]]
dist.mesh @mesh axes ["dp", "tp"] shape [2, 2]
func.func @tp_regathered(%h: tensor<4x8x16xf32>, %ws: tensor<8x16xf32>, %t: tensor<4x8xi32>,
                         %shift: tensor<4x8xf32>, %ds: tensor<4x8xf32>, %dt: tensor<4x8xf32>)
    -> (tensor<4x8x16xf32>, tensor<16x16xf32>) {
  %w = dist.all_gather %ws on @mesh axes ["dp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
  %l = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %w2 = dist.all_gather %ws on @mesh axes ["dp"] dim 0 {llmc.backward} : tensor<8x16xf32> -> tensor<16x16xf32>
  %g = llm.cross_entropy_partial_grad %l, %t, %shift, %ds, %dt {llmc.backward, num_classes = 32 : i64} : tensor<4x8x16xf32>, tensor<4x8xi32>, tensor<4x8xf32>
  %dx = llm.matmul %g, %w2 {llmc.backward} : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %hr = llm.reshape %h {llmc.backward} : tensor<4x8x16xf32> to tensor<32x16xf32>
  %gr = llm.reshape %g {llmc.backward} : tensor<4x8x16xf32> to tensor<32x16xf32>
  %dw = llm.matmul %gr, %hr {llmc.backward, transpose_a} : tensor<32x16xf32>, tensor<32x16xf32> -> tensor<16x16xf32>
  return %dx, %dw : tensor<4x8x16xf32>, tensor<16x16xf32>
}

// -----

// Not fused under tensor parallelism: a backward whose products read
// another weight than the forward's keeps its logits; so does a forward
// whose logits something else reads.
// CHECK-LABEL: func.func @tp_kept
// CHECK-NOT: linear_cross_entropy
// CHECK: return
dist.mesh @mesh axes ["tp"] shape [2]
func.func @tp_kept(%h: tensor<4x8x16xf32>, %w: tensor<16x16xf32>, %w2: tensor<16x16xf32>,
                   %t: tensor<4x8xi32>, %ds: tensor<4x8xf32>, %dt: tensor<4x8xf32>)
    -> (tensor<4x8x16xf32>, tensor<16x16xf32>, tensor<4x8xf32>,
        tensor<4x8xf32>, tensor<4x8x16xf32>) {
  %l1 = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %g1 = llm.cross_entropy_partial_grad %l1, %t, %ds, %ds, %dt {num_classes = 32 : i64} : tensor<4x8x16xf32>, tensor<4x8xi32>, tensor<4x8xf32>
  %dx1 = llm.matmul %g1, %w2 : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %hr = llm.reshape %h : tensor<4x8x16xf32> to tensor<32x16xf32>
  %gr = llm.reshape %g1 : tensor<4x8x16xf32> to tensor<32x16xf32>
  %dw1 = llm.matmul %gr, %hr {transpose_a} : tensor<32x16xf32>, tensor<32x16xf32> -> tensor<16x16xf32>
  %l3 = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %m = llm.reduce_max %l3 {num_classes = 32 : i64} : tensor<4x8x16xf32> -> tensor<4x8xf32>
  %s, %tl = llm.cross_entropy_partial %l3, %t, %m {num_classes = 32 : i64} : tensor<4x8x16xf32>, tensor<4x8xi32>, tensor<4x8xf32>
  return %dx1, %dw1, %s, %tl, %l3 : tensor<4x8x16xf32>, tensor<16x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8x16xf32>
}

// -----

// A frozen vocabulary shard (LoRA leaves the head untrained): the backward
// has dh's product only, and fuses into the frozen_weight form, which
// returns no dw.
// CHECK-LABEL: func.func @tp_frozen
// CHECK-NEXT:  %[[DX:.*]], %{{.*}} = llm.linear_cross_entropy_partial_grad %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 {chunk_rows = 32 : i64, frozen_weight, num_classes = 32 : i64, transpose_b} : tensor<4x8x16xf32>, tensor<16x16xf32>, tensor<4x8xi32>, tensor<4x8xf32>
// CHECK-NEXT:  return %[[DX]]
// NONE-LABEL: func.func @tp_frozen
// NONE: llm.cross_entropy_partial_grad
dist.mesh @mesh axes ["tp"] shape [2]
func.func @tp_frozen(%h: tensor<4x8x16xf32>, %w: tensor<16x16xf32>, %t: tensor<4x8xi32>,
                     %shift: tensor<4x8xf32>, %ds: tensor<4x8xf32>, %dt: tensor<4x8xf32>)
    -> tensor<4x8x16xf32> {
  %l = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %g = llm.cross_entropy_partial_grad %l, %t, %shift, %ds, %dt {num_classes = 32 : i64} : tensor<4x8x16xf32>, tensor<4x8xi32>, tensor<4x8xf32>
  %dx = llm.matmul %g, %w : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  return %dx : tensor<4x8x16xf32>
}

// -----

// A bf16 head (--precision bf16) fuses in its own type: the kernels round
// the logits and their gradient where the matmul and cross_entropy_grad
// store them.
// CHECK-LABEL: func.func @bf16_head
// CHECK-NEXT:  %[[SEED:.*]] = llm.fill 1.0
// CHECK-NEXT:  %[[L:.*]], %[[DH:.*]], %[[DW:.*]], %{{.*}} = llm.linear_cross_entropy_train %arg0, %arg1, %arg2, %[[SEED]] {chunk_rows = 32 : i64, transpose_b} : tensor<4x8x16xbf16>, tensor<32x16xbf16>, tensor<4x8xi32>
// CHECK-NEXT:  return %[[L]], %[[DH]], %[[DW]] : tensor<f32>, tensor<4x8x16xbf16>, tensor<32x16xbf16>
func.func @bf16_head(%h: tensor<4x8x16xbf16>, %w: tensor<32x16xbf16>, %t: tensor<4x8xi32>)
    -> (tensor<f32>, tensor<4x8x16xbf16>, tensor<32x16xbf16>) {
  %logits = llm.matmul %h, %w {transpose_b} : tensor<4x8x16xbf16>, tensor<32x16xbf16> -> tensor<4x8x32xbf16>
  %loss = llm.cross_entropy %logits, %t : tensor<4x8x32xbf16>, tensor<4x8xi32>
  %seed = llm.fill 1.0 {llmc.backward, llmc.loss_seed} : tensor<f32>
  %g = llm.cross_entropy_grad %logits, %t, %seed {llmc.backward} : tensor<4x8x32xbf16>, tensor<4x8xi32>
  %dh = llm.matmul %g, %w {llmc.backward} : tensor<4x8x32xbf16>, tensor<32x16xbf16> -> tensor<4x8x16xbf16>
  %hr = llm.reshape %h {llmc.backward} : tensor<4x8x16xbf16> to tensor<32x16xbf16>
  %gr = llm.reshape %g {llmc.backward} : tensor<4x8x32xbf16> to tensor<32x32xbf16>
  %dw = llm.matmul %gr, %hr {llmc.backward, transpose_a} : tensor<32x32xbf16>, tensor<32x16xbf16> -> tensor<32x16xbf16>
  return %loss, %dh, %dw : tensor<f32>, tensor<4x8x16xbf16>, tensor<32x16xbf16>
}

// -----

// The MLP's first layer in training: the product, the bias and the GELU
// become one linear placed where the add was; gelu_grad still reads the
// biased value, which the fused op keeps (keep_pre).
// CHECK-LABEL: func.func @mlp_train
// CHECK-NEXT:  %[[Y:.*]], %[[PRE:.*]] = llm.linear %arg0, %arg1, %arg2 {gelu, keep_pre, llmc.block_name = "h.0"} : tensor<4x8x16xf32>, tensor<16x64xf32>, tensor<64xf32>
// CHECK-NEXT:  %[[D:.*]] = llm.gelu_grad %[[PRE]], %arg3
// CHECK-NEXT:  return %[[Y]], %[[D]]
// BIAS-LABEL: func.func @mlp_train
// BIAS-NEXT:  %[[A:.*]] = llm.linear %arg0, %arg1, %arg2 {llmc.block_name = "h.0"}
// BIAS-NEXT:  llm.gelu %[[A]]
// BIAS-NEXT:  llm.gelu_grad %[[A]], %arg3
// GELU-LABEL: func.func @mlp_train
// GELU-NEXT:  llm.linear %arg0, %arg1, %arg2 {gelu, keep_pre, llmc.block_name = "h.0"}
// NONE-LABEL: func.func @mlp_train
// NONE-NEXT:  llm.matmul
func.func @mlp_train(%x: tensor<4x8x16xf32>, %w: tensor<16x64xf32>, %b: tensor<64xf32>,
                     %dy: tensor<4x8x64xf32>) -> (tensor<4x8x64xf32>, tensor<4x8x64xf32>) {
  %m = llm.matmul %x, %w {llmc.block_name = "h.0"} : tensor<4x8x16xf32>, tensor<16x64xf32> -> tensor<4x8x64xf32>
  %a = llm.add %m, %b {llmc.block_name = "h.0"} : tensor<4x8x64xf32>, tensor<64xf32>
  %g = llm.gelu %a {llmc.block_name = "h.0"} : tensor<4x8x64xf32>
  %d = llm.gelu_grad %a, %dy {llmc.backward, llmc.block_name = "h.0"} : tensor<4x8x64xf32>
  return %g, %d : tensor<4x8x64xf32>, tensor<4x8x64xf32>
}

// -----

// Evaluation: nothing else reads the biased value. A projection with a
// weight in the [N, K] layout has no GELU, just its bias.
// CHECK-LABEL: func.func @mlp_eval
// CHECK-NEXT:  %[[H:.*]] = llm.linear %arg0, %arg1, %arg2 {gelu} : tensor<4x8x16xf32>, tensor<16x64xf32>, tensor<64xf32>
// CHECK-NEXT:  %[[Y:.*]] = llm.linear %[[H]], %arg3, %arg4 {transpose_b} : tensor<4x8x64xf32>, tensor<16x64xf32>, tensor<16xf32>
// CHECK-NEXT:  return %[[Y]]
// BIAS-LABEL: func.func @mlp_eval
// BIAS-NEXT:  llm.linear %arg0, %arg1, %arg2 :
// BIAS-NEXT:  llm.gelu
// BIAS-NEXT:  llm.linear {{.*}} {transpose_b}
// GELU-LABEL: func.func @mlp_eval
// GELU-NEXT:  llm.linear %arg0, %arg1, %arg2 {gelu}
// GELU-NEXT:  llm.matmul
// GELU-NEXT:  llm.add
func.func @mlp_eval(%x: tensor<4x8x16xf32>, %w1: tensor<16x64xf32>, %b1: tensor<64xf32>,
                    %w2: tensor<16x64xf32>, %b2: tensor<16xf32>) -> tensor<4x8x16xf32> {
  %m = llm.matmul %x, %w1 : tensor<4x8x16xf32>, tensor<16x64xf32> -> tensor<4x8x64xf32>
  %a = llm.add %m, %b1 : tensor<4x8x64xf32>, tensor<64xf32>
  %g = llm.gelu %a : tensor<4x8x64xf32>
  %p = llm.matmul %g, %w2 {transpose_b} : tensor<4x8x64xf32>, tensor<16x64xf32> -> tensor<4x8x16xf32>
  %y = llm.add %p, %b2 : tensor<4x8x16xf32>, tensor<16xf32>
  return %y : tensor<4x8x16xf32>
}

// -----

// Where the bias must stay its own op: the product has another reader
// (under selective recomputation the replayed add reads the kept product),
// the rhs is not a bias over the last dimension (a residual, which
// `residual` takes), the ops belong to different microbatches, and
// products with a transposed or batched left operand.
// CHECK-LABEL: func.func @kept_bias
// CHECK-NOT:   llm.linear
// CHECK:       llm.linear %arg0, %arg1 residual %arg3 : tensor<4x8x16xf32>, tensor<16x64xf32> residual tensor<4x8x64xf32>
// CHECK-NOT:   llm.linear
// CHECK:       return
// BIAS-LABEL:  func.func @kept_bias
// BIAS-NOT:    llm.linear
// BIAS:        return
func.func @kept_bias(%x: tensor<4x8x16xf32>, %w: tensor<16x64xf32>, %b: tensor<64xf32>,
                     %r: tensor<4x8x64xf32>, %xt: tensor<4x16x8xf32>, %wb: tensor<4x16x64xf32>)
    -> (tensor<4x8x64xf32>, tensor<4x8x64xf32>, tensor<4x8x64xf32>, tensor<4x8x64xf32>,
        tensor<4x8x64xf32>, tensor<4x8x64xf32>) {
  %m1 = llm.matmul %x, %w : tensor<4x8x16xf32>, tensor<16x64xf32> -> tensor<4x8x64xf32>
  %a1 = llm.add %m1, %b : tensor<4x8x64xf32>, tensor<64xf32>
  %g1 = llm.gelu %a1 : tensor<4x8x64xf32>
  %a1r = llm.add %m1, %b {llmc.backward, llmc.recomputed} : tensor<4x8x64xf32>, tensor<64xf32>
  %m2 = llm.matmul %x, %w : tensor<4x8x16xf32>, tensor<16x64xf32> -> tensor<4x8x64xf32>
  %a2 = llm.add %m2, %r : tensor<4x8x64xf32>, tensor<4x8x64xf32>
  %m3 = llm.matmul %x, %w {llmc.microbatch = 0 : i64} : tensor<4x8x16xf32>, tensor<16x64xf32> -> tensor<4x8x64xf32>
  %a3 = llm.add %m3, %b {llmc.microbatch = 1 : i64} : tensor<4x8x64xf32>, tensor<64xf32>
  %m4 = llm.matmul %xt, %w {transpose_a} : tensor<4x16x8xf32>, tensor<16x64xf32> -> tensor<4x8x64xf32>
  %a4 = llm.add %m4, %b : tensor<4x8x64xf32>, tensor<64xf32>
  %m5 = llm.matmul %x, %wb : tensor<4x8x16xf32>, tensor<4x16x64xf32> -> tensor<4x8x64xf32>
  %a5 = llm.add %m5, %b : tensor<4x8x64xf32>, tensor<64xf32>
  return %g1, %a1r, %a2, %a3, %a4, %a5 : tensor<4x8x64xf32>, tensor<4x8x64xf32>, tensor<4x8x64xf32>,
                                         tensor<4x8x64xf32>, tensor<4x8x64xf32>, tensor<4x8x64xf32>
}

// -----

// A GELU of another part of the step (a replay in the backward) stays
// apart; the bias still fuses.
// CHECK-LABEL: func.func @kept_gelu
// CHECK-NEXT:  %[[A:.*]] = llm.linear %arg0, %arg1, %arg2 :
// CHECK-NEXT:  llm.gelu %[[A]] {llmc.backward, llmc.recomputed}
func.func @kept_gelu(%x: tensor<4x8x16xf32>, %w: tensor<16x64xf32>, %b: tensor<64xf32>)
    -> tensor<4x8x64xf32> {
  %m = llm.matmul %x, %w : tensor<4x8x16xf32>, tensor<16x64xf32> -> tensor<4x8x64xf32>
  %a = llm.add %m, %b : tensor<4x8x64xf32>, tensor<64xf32>
  %g = llm.gelu %a {llmc.backward, llmc.recomputed} : tensor<4x8x64xf32>
  return %g : tensor<4x8x64xf32>
}

// -----

// A layer's weight and bias gradients: the product over the rows of x and
// dy and the sum of dy's rows become one op where the sum was, for CUDA
// (and wherever the fusion is named); `all` on the CPU leaves them.
// CHECK-LABEL: func.func @weight_grad
// CHECK:       llm.reduce_sum
// CUDA-LABEL:  func.func @weight_grad
// CUDA-NEXT:   %[[DW:.*]], %[[DB:.*]] = llm.linear_weight_grad %arg0, %arg1 {llmc.backward} : tensor<4x8x16xf32>, tensor<4x8x64xf32>
// CUDA-NEXT:   %[[DX:.*]] = llm.matmul %arg1, %arg2
// CUDA-NEXT:   return %[[DW]], %[[DB]], %[[DX]]
// GRAD-LABEL:  func.func @weight_grad
// GRAD-NEXT:   llm.linear_weight_grad %arg0, %arg1 {llmc.backward}
func.func @weight_grad(%x: tensor<4x8x16xf32>, %dy: tensor<4x8x64xf32>, %w: tensor<16x64xf32>)
    -> (tensor<16x64xf32>, tensor<64xf32>, tensor<4x8x16xf32>) {
  %db = llm.reduce_sum %dy {llmc.backward} : tensor<4x8x64xf32> to tensor<64xf32>
  %dx = llm.matmul %dy, %w {llmc.backward, transpose_b} : tensor<4x8x64xf32>, tensor<16x64xf32> -> tensor<4x8x16xf32>
  %xr = llm.reshape %x {llmc.backward} : tensor<4x8x16xf32> to tensor<32x16xf32>
  %dyr = llm.reshape %dy {llmc.backward} : tensor<4x8x64xf32> to tensor<32x64xf32>
  %dw = llm.matmul %xr, %dyr {llmc.backward, transpose_a} : tensor<32x16xf32>, tensor<32x64xf32> -> tensor<16x64xf32>
  return %dw, %db, %dx : tensor<16x64xf32>, tensor<64xf32>, tensor<4x8x16xf32>
}

// -----

// Where the sum stays: it reduces to more than the last dimension (a
// position embedding's gradient), the product of another microbatch, a
// weight in the [N, K] layout (its gradient is dyᵀ·x), and an x the sum
// comes before.
// CUDA-LABEL: func.func @kept_weight_grad
// CUDA-NOT:   llm.linear_weight_grad
// CUDA:       return
func.func @kept_weight_grad(%x: tensor<4x8x16xf32>, %dy: tensor<4x8x64xf32>, %w: tensor<16x64xf32>)
    -> (tensor<8x64xf32>, tensor<16x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<16x64xf32>,
        tensor<64x16xf32>, tensor<64xf32>, tensor<16x64xf32>) {
  %pos = llm.reduce_sum %dy : tensor<4x8x64xf32> to tensor<8x64xf32>
  %xr = llm.reshape %x : tensor<4x8x16xf32> to tensor<32x16xf32>
  %dyr = llm.reshape %dy : tensor<4x8x64xf32> to tensor<32x64xf32>
  %db1 = llm.reduce_sum %dy {llmc.microbatch = 0 : i64} : tensor<4x8x64xf32> to tensor<64xf32>
  %dw1 = llm.matmul %xr, %dyr {llmc.microbatch = 1 : i64, transpose_a} : tensor<32x16xf32>, tensor<32x64xf32> -> tensor<16x64xf32>
  %db2 = llm.reduce_sum %dy {llmc.microbatch = 2 : i64} : tensor<4x8x64xf32> to tensor<64xf32>
  %dw2 = llm.matmul %dyr, %xr {llmc.microbatch = 2 : i64, transpose_a} : tensor<32x64xf32>, tensor<32x16xf32> -> tensor<64x16xf32>
  %db3 = llm.reduce_sum %dy {llmc.microbatch = 3 : i64} : tensor<4x8x64xf32> to tensor<64xf32>
  %later = llm.scale %x {factor = 2.0 : f64, llmc.microbatch = 3 : i64} : tensor<4x8x16xf32>
  %lr = llm.reshape %later : tensor<4x8x16xf32> to tensor<32x16xf32>
  %dw3 = llm.matmul %lr, %dyr {llmc.microbatch = 3 : i64, transpose_a} : tensor<32x16xf32>, tensor<32x64xf32> -> tensor<16x64xf32>
  return %pos, %dw1, %db1, %db2, %dw1, %dw2, %db3, %dw3 : tensor<8x64xf32>, tensor<16x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<16x64xf32>, tensor<64x16xf32>, tensor<64xf32>, tensor<16x64xf32>
}

// -----

// GPT-2's attention output projection: the product and its bias (`bias`)
// and the residual stream's add (`residual`) become one linear where the
// add was, which add-norm then leaves to the norm. Alone, `residual` finds
// no product beside the stream (the bias add stands between); `add-norm`
// alone takes the add with the norm.
// CHECK-LABEL: func.func @gpt2_residual
// CHECK-NEXT:  %[[S:.*]] = llm.linear %arg0, %arg1, %arg2 residual %arg3 {llmc.block_name = "h.0"} : tensor<4x8x16xf32>, tensor<16x16xf32>, tensor<16xf32> residual tensor<4x8x16xf32>
// CHECK-NEXT:  %[[Y:.*]] = llm.layernorm %[[S]], %arg4, %arg5
// CHECK-NEXT:  return %[[S]], %[[Y]]
// RES-LABEL:   func.func @gpt2_residual
// RES-NEXT:    llm.matmul
// RES-NEXT:    llm.add
// RES-NEXT:    llm.add
// NORM-LABEL:  func.func @gpt2_residual
// NORM:        llm.add_layernorm
// NONE-LABEL:  func.func @gpt2_residual
// NONE-NEXT:   llm.matmul
func.func @gpt2_residual(%x: tensor<4x8x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>,
                         %r: tensor<4x8x16xf32>, %g: tensor<16xf32>, %beta: tensor<16xf32>)
    -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>) {
  %m = llm.matmul %x, %w {llmc.block_name = "h.0"} : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %a = llm.add %m, %b {llmc.block_name = "h.0"} : tensor<4x8x16xf32>, tensor<16xf32>
  %s = llm.add %r, %a {llmc.block_name = "h.0"} : tensor<4x8x16xf32>, tensor<4x8x16xf32>
  %y = llm.layernorm %s, %g, %beta {epsilon = 1.0e-5 : f64} : tensor<4x8x16xf32>, tensor<16xf32>
  return %s, %y : tensor<4x8x16xf32>, tensor<4x8x16xf32>
}

// -----

// Llama's o_proj ([N, K] weight, no bias) and its residual, here computed
// after the product: the fused op stands where the add was, after it. A
// replayed layer (recomputation) fuses as the forward does.
// CHECK-LABEL: func.func @llama_residual
// CHECK-NEXT:  %[[R:.*]] = llm.scale %arg2
// CHECK-NEXT:  %[[S:.*]] = llm.linear %arg0, %arg1 residual %[[R]] {transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32> residual tensor<4x8x32xf32>
// CHECK-NEXT:  %[[T:.*]] = llm.linear %[[S]], %arg3 residual %[[S]] {llmc.backward, llmc.recomputed}
// CHECK-NEXT:  return %[[T]]
// RES-LABEL:   func.func @llama_residual
// RES-NEXT:    llm.scale
// RES-NEXT:    llm.linear %arg0, %arg1 residual
// RES-NEXT:    llm.linear
func.func @llama_residual(%x: tensor<4x8x16xf32>, %w: tensor<32x16xf32>, %h: tensor<4x8x32xf32>,
                          %w2: tensor<32x32xf32>) -> tensor<4x8x32xf32> {
  %p = llm.matmul %x, %w {transpose_b} : tensor<4x8x16xf32>, tensor<32x16xf32> -> tensor<4x8x32xf32>
  %r = llm.scale %h {factor = 2.0 : f64} : tensor<4x8x32xf32>
  %s = llm.add %p, %r : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  %p2 = llm.matmul %s, %w2 {llmc.backward, llmc.recomputed} : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
  %t = llm.add %s, %p2 {llmc.backward, llmc.recomputed} : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  return %t : tensor<4x8x32xf32>
}

// -----

// Where the residual add stays: the product has another reader, the
// addend broadcasts, the product is all-reduced first (a row-parallel
// layer under tensor parallelism), the addend is a branch computed from
// the product's input (LoRA's adapter), the product feeds a GELU first,
// and a backward sum whose other addend is made after the product (the
// fused op would have to wait at the add).
dist.mesh @mesh axes ["tp"] shape [2]
// CHECK-LABEL: func.func @kept_residual
// CHECK-NOT:   llm.linear {{.*}}residual
// CHECK:       return
func.func @kept_residual(%x: tensor<4x8x16xf32>, %w: tensor<16x16xf32>, %r: tensor<4x8x16xf32>,
                         %row: tensor<8x16xf32>, %a: tensor<16x4xf32>, %bb: tensor<4x16xf32>,
                         %dy: tensor<4x8x16xf32>)
    -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>,
        tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>) {
  %m1 = llm.matmul %x, %w : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %s1 = llm.add %m1, %r : tensor<4x8x16xf32>, tensor<4x8x16xf32>
  %m2 = llm.matmul %x, %w : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %s2 = llm.add %m2, %row : tensor<4x8x16xf32>, tensor<8x16xf32>
  %m3 = llm.matmul %x, %w : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %m3r = dist.all_reduce %m3 on @mesh axes ["tp"] reduction "sum" : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
  %s3 = llm.add %r, %m3r : tensor<4x8x16xf32>, tensor<4x8x16xf32>
  %m4 = llm.matmul %x, %w : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %l1 = llm.matmul %x, %a : tensor<4x8x16xf32>, tensor<16x4xf32> -> tensor<4x8x4xf32>
  %l2 = llm.matmul %l1, %bb : tensor<4x8x4xf32>, tensor<4x16xf32> -> tensor<4x8x16xf32>
  %l3 = llm.scale %l2 {factor = 2.0 : f64} : tensor<4x8x16xf32>
  %s4 = llm.add %m4, %l3 : tensor<4x8x16xf32>, tensor<4x8x16xf32>
  %m5 = llm.matmul %x, %w : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %g5 = llm.gelu %m5 : tensor<4x8x16xf32>
  %s5 = llm.add %g5, %r : tensor<4x8x16xf32>, tensor<4x8x16xf32>
  %d1 = llm.matmul %dy, %w {llmc.backward, transpose_b} : tensor<4x8x16xf32>, tensor<16x16xf32> -> tensor<4x8x16xf32>
  %d2 = llm.gelu %dy {llmc.backward} : tensor<4x8x16xf32>
  %s6 = llm.add %d1, %d2 {llmc.backward} : tensor<4x8x16xf32>, tensor<4x8x16xf32>
  return %m1, %s1, %s2, %s3, %s4, %s5, %s6 : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>,
                                             tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>,
                                             tensor<4x8x16xf32>
}

// -----

// The backward's sums of gradient products (Llama's dx over dq, dk and dv)
// fuse at the later product, the earlier product's result as its
// residual; the next sum then takes that one. The fused ops stand where
// the products were, so no product's operands outlive it.
// CHECK-LABEL: func.func @backward_sums
// CHECK-NEXT:  %[[A:.*]] = llm.matmul %arg0, %arg3 {llmc.backward}
// CHECK-NEXT:  %[[G:.*]] = llm.gelu %arg0
// CHECK-NEXT:  %[[B:.*]] = llm.linear %arg1, %arg4 residual %[[A]] {llmc.backward}
// CHECK-NEXT:  %[[C:.*]] = llm.linear %arg2, %arg5 residual %[[B]] {llmc.backward}
// CHECK-NEXT:  return %[[C]], %[[G]]
// RES-LABEL:   func.func @backward_sums
// RES-COUNT-2: residual
// NONE-LABEL:  func.func @backward_sums
// NONE-COUNT-2: llm.add
func.func @backward_sums(%dq: tensor<4x8x16xf32>, %dk: tensor<4x8x8xf32>, %dv: tensor<4x8x8xf32>,
                         %wq: tensor<16x32xf32>, %wk: tensor<8x32xf32>, %wv: tensor<8x32xf32>)
    -> (tensor<4x8x32xf32>, tensor<4x8x16xf32>) {
  %a = llm.matmul %dq, %wq {llmc.backward} : tensor<4x8x16xf32>, tensor<16x32xf32> -> tensor<4x8x32xf32>
  %g = llm.gelu %dq {llmc.backward} : tensor<4x8x16xf32>
  %b = llm.matmul %dk, %wk {llmc.backward} : tensor<4x8x8xf32>, tensor<8x32xf32> -> tensor<4x8x32xf32>
  %c = llm.matmul %dv, %wv {llmc.backward} : tensor<4x8x8xf32>, tensor<8x32xf32> -> tensor<4x8x32xf32>
  %s = llm.add %a, %b {llmc.backward} : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  %t = llm.add %s, %c {llmc.backward} : tensor<4x8x32xf32>, tensor<4x8x32xf32>
  return %t, %g : tensor<4x8x32xf32>, tensor<4x8x16xf32>
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
