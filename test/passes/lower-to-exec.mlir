// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer --llmc-lower-to-exec | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer --llmc-lower-to-exec --verify-each | llmc-opt | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: not llmc-opt %s --llmc-lower-to-exec 2>&1 | FileCheck %s --check-prefix=EMPTY
// Exactly one instruction per program (train_step, eval, grad) is the
// fault-injection site.
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer --llmc-lower-to-exec | grep -E -o 'exec.program|exec.fault_site' | FileCheck %s --check-prefix=ONE-SITE
// ONE-SITE: exec.program
// ONE-SITE-NEXT: exec.fault_site
// ONE-SITE-NEXT: exec.program
// ONE-SITE-NEXT: exec.fault_site
// ONE-SITE-NEXT: exec.program
// ONE-SITE-NEXT: exec.fault_site
// ONE-SITE-NOT: exec

// The arena is the persistent state (4 parameters: 832 B padded to 896;
// their AdamW moments) plus the largest program's transient peak; the plan
// records each program's peak by category (activation: forward values kept
// for the backward; workspace: other temporaries), the activations at the
// peak by microbatch, the most bytes each category ever holds at once, and
// what each layer keeps for its backward (h.0: its input and its matmul's
// output, 2x4x8 and 2x4x16 floats). Each program's peak meets its
// live-bytes bound (the most bytes live at one instruction): greedy by
// size places the training step in 2560 bytes where first-fit by start
// needed 3072, and eval in 832 where first-fit needed 896.
// CHECK: module attributes {exec.arena_bytes = 5248 : i64, exec.memory_plan = {arena = 5248 : i64, optimizer_state = 1664 : i64, params = 832 : i64, persistent = 2688 : i64, programs = {eval = {{{.*}}live_bound = 832 : i64, peak = 832 : i64{{.*}}}, grad = {{{.*}}}, train_step = {activation = 1024 : i64, activations_by_microbatch = {"0" = 1024 : i64}, category_peaks = {activation = 1536 : i64, grad = 1408 : i64, input = 256 : i64, output = 128 : i64, workspace = 768 : i64}, grad = 512 : i64, gradient_peak_parts = {gradients = 896 : i64, "partial sums" = 512 : i64}, input = 192 : i64, live_bound = 2560 : i64, output = 64 : i64, peak = 2560 : i64, saved_per_layer = {h.0 = 768 : i64}, workspace = 768 : i64}}}}

// Persistent state first, 64-byte aligned, under names every program shares.
// CHECK-LABEL: exec.program @train_step kind "train_step"
// CHECK: %[[WTE:.*]] = exec.buffer offset 0 name "wte" category "param" {llm.param = {{.*}}} : memref<16x8xf32>
// CHECK: exec.buffer offset 512 name "ln.weight" category "param"
// CHECK: %[[W:.*]] = exec.buffer offset 640 name "h.0.mlp.weight" category "param"
// CHECK: %[[M:.*]] = exec.buffer offset 896 name "adam_m/wte" category "optim" : memref<16x8xf32>
// CHECK: %[[V:.*]] = exec.buffer offset 1792 name "adam_v/wte" category "optim" : memref<16x8xf32>
// Inputs live from the start of the program; the microbatch reshape is a view.
// Transients start above the persistent state (2688).
// CHECK: %[[TOK:.*]] = exec.buffer offset 4992 name "tokens" category "input" : memref<1x2x4xi32>
// CHECK: %[[LR:.*]] = exec.buffer offset 5056 name "lr" category "input" : memref<f32>
// CHECK: %[[TOKV:.*]] = exec.buffer offset 4992 category "input" : memref<2x4xi32>
// CHECK: %[[X:.*]] = exec.buffer offset 3712 : memref<2x4x8xf32>
// The first float activations are the fault-injection site (--inject-nonfinite).
// CHECK-NEXT: exec.kernel "embedding"(%[[WTE]], %[[TOKV]] : memref<16x8xf32>, memref<2x4xi32>) -> (%[[X]] : memref<2x4x8xf32>) {{.*}}exec.fault_site
// A buffer is reused once its value is dead: the head's logits are written
// where the MLP's activation was.
// CHECK: exec.buffer offset 2688 category "workspace" : memref<2x4x8xf32>
// CHECK-NEXT: exec.kernel "gelu"
// CHECK: exec.buffer offset 2688 : memref<2x4x16xf32>
// Unit attributes become 0/1 integers, floats stay f64.
// The part of the step each instruction belongs to travels with it.
// CHECK-NEXT: exec.kernel "matmul"(%{{.*}}, %[[WTE]] : {{.*}}) -> ({{.*}}) {exec.action = "F0", transpose_b = 1 : i64}
// CHECK: %[[LOSS:.*]] = exec.buffer offset {{[0-9]+}} name "loss" category "output" : memref<f32>
// CHECK: exec.kernel "cross_entropy_grad"
// CHECK-NEXT: %[[DH:.*]] = exec.buffer offset 4736 category "workspace" : memref<2x4x8xf32>
// The residual gradient accumulates in place.
// CHECK: %[[DSUM:.*]] = exec.buffer offset 4736 category "workspace" : memref<2x4x8xf32>
// CHECK-NEXT: exec.kernel "add"(%[[DH]], %{{.*}} : memref<2x4x8xf32>, memref<2x4x8xf32>) -> (%[[DSUM]] : memref<2x4x8xf32>)
// CHECK: exec.kernel "embedding_grad"
// CHECK-NEXT: %[[G:.*]] = exec.buffer offset {{[0-9]+}} category "grad" : memref<16x8xf32>
// CHECK-NEXT: exec.kernel "add"
// CHECK: %[[NORM:.*]] = exec.buffer offset {{[0-9]+}} name "grad_norm" category "output" : memref<f32>
// The update writes the parameter and its moments in place.
// CHECK: exec.kernel "adamw"(%[[WTE]], %[[G]], %[[M]], %[[V]], %[[LR]], %{{.*}}, %[[NORM]] : {{.*}}) -> (%[[WTE]], %[[M]], %[[V]] : memref<16x8xf32>, memref<16x8xf32>, memref<16x8xf32>)

// Evaluation reuses the same parameter buffers.
// CHECK-LABEL: exec.program @eval kind "eval"
// CHECK: exec.buffer offset 0 name "wte" category "param"
// CHECK: exec.buffer offset 2688 name "tokens" category "input" : memref<2x4xi32>
// CHECK-LABEL: exec.program @grad kind "grad"
// CHECK: name "grad/wte" category "output" : memref<16x8xf32>

// ROUNDTRIP: exec.program @train_step
// ROUNDTRIP: exec.program @grad

// EMPTY: error: lower-to-exec: no entry point (@train_step, @forward, @logits or @grad)
func.func @helper() {
  return
}
