// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp=2" | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 grad-bucket-mb=0 emit=train" | FileCheck %s --check-prefix=DP
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=1 emit=train" | FileCheck %s --check-prefix=ZERO1
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=2 microbatches=2 emit=train fuse=none" | FileCheck %s --check-prefix=ZERO2
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 grad-bucket-mb=0 emit=exec" | FileCheck %s --check-prefix=EXEC
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp=3" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp" 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp=2,dp=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp=2 zero=4" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=tp=2 zero=1" 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=dp=2 grad-sync=ring" 2>&1 | FileCheck %s --check-prefix=SYNC
// RUN: not llmc-opt %s --llmc-shard="mesh=dp=2" 2>&1 | FileCheck %s --check-prefix=MIX
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=fsdp=1,dp=2" | FileCheck %s --check-prefix=ORDER
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=fsdp=1,dp=2 rank-order=fsdp,dp" | FileCheck %s --check-prefix=EXPLICIT
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=fsdp=1,dp=2 rank-order=fsdp,pp" 2>&1 | FileCheck %s --check-prefix=BADORDER
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-shard="mesh=fsdp=1,dp=2 rank-order=dp" 2>&1 | FileCheck %s --check-prefix=SHORTORDER

// The mesh and the layout are recorded once; the batch is split: each rank
// computes the loss of its rows.
// CHECK: module attributes {llmc.layout = {batch_axes = ["dp"], grad_sync = "allreduce", zero = 0 : i64, zero_axes = []}}
// CHECK: dist.mesh @mesh axes ["dp"] shape [2]
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg4: tensor<1x4xi32> {llmc.name = "tokens"}, %arg5: tensor<1x4xi32> {llmc.name = "targets"}
// CHECK: llm.embedding %arg0, %arg4 : tensor<16x8xf32>, tensor<1x4xi32>
// CHECK: llm.block "h.0" -> tensor<1x4x8xf32>
// CHECK: llm.matmul %{{.*}}, %arg0 {transpose_b} : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>

// Data parallel: every gradient is averaged over dp where backward produces
// it; the reported loss too.
// DP-LABEL: func.func @train_step
// DP: %[[W:.*]] = llm.matmul {{.*}} {llmc.backward, llmc.block_name = "h.0", llmc.microbatch = 0 : i64, transpose_a} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
// DP-NEXT: dist.all_reduce %[[W]] on @mesh axes ["dp"] reduction "mean" {llmc.gradient_sync} : tensor<8x8xf32> -> tensor<8x8xf32>
// DP: dist.all_reduce %{{.*}} on @mesh axes ["dp"] reduction "mean" : tensor<f32> -> tensor<f32>
// DP: llm.global_norm

// ZeRO-1: gradients reduce-scattered, each rank updates its shard of the
// parameter with its shard of the moments, then the shards are gathered
// (every update in one multi_tensor_adamw: llmc-fuse).
// ZERO1-LABEL: func.func @train_step
// ZERO1-SAME: %arg4: tensor<8x8xf32> {llmc.name = "wte", llmc.role = "adam_m", llmc.shard = {global_shape = array<i64: 16, 8>, levels = [{axes = ["dp"], blocks = 1 : i64, dim = 0 : i64}]}}
// ZERO1: %[[G:.*]] = dist.reduce_scatter %{{.*}} on @mesh axes ["dp"] dim 0 reduction "mean" : tensor<16x8xf32> -> tensor<8x8xf32>
// ZERO1: %[[SQ:.*]] = llm.global_norm {{.*}} {squared}
// ZERO1: %[[TOTAL:.*]] = dist.all_reduce %[[SQ]] on @mesh axes ["dp"] reduction "sum"
// ZERO1: %[[NORM:.*]] = llm.sqrt %[[TOTAL]] : tensor<f32>
// ZERO1: %[[P:.*]] = dist.all_slice %arg0 on @mesh axes ["dp"] dim 0 : tensor<16x8xf32> -> tensor<8x8xf32>
// ZERO1: %[[NEW:.*]]:12 = llm.multi_tensor_adamw params(%[[P]], {{.*}}) grads(%[[G]], {{.*}}) m(%arg4, {{.*}}) v(%arg8, {{.*}}) lr %arg14 step %arg15 norm %[[NORM]]
// ZERO1: dist.all_gather %[[NEW]]#0 on @mesh axes ["dp"] dim 0 : tensor<8x8xf32> -> tensor<16x8xf32>

// ZeRO-2: each microbatch's gradient is reduce-scattered before it is
// accumulated, so only shards live across microbatches.
// ZERO2: %[[S0:.*]] = dist.reduce_scatter %{{.*}} : tensor<16x8xf32> -> tensor<8x8xf32>
// ZERO2: %[[S1:.*]] = dist.reduce_scatter %{{.*}} : tensor<16x8xf32> -> tensor<8x8xf32>
// ZERO2: llm.add %[[S0]], %[[S1]] : tensor<8x8xf32>, tensor<8x8xf32>

// EXEC: module attributes {exec.arena_bytes = {{[0-9]+}} : i64, exec.memory_plan = {{.*}}, exec.mesh = {dp = 2 : i64}, exec.mesh_axes = ["dp"]
// In place: the gradient buffer is reduced where it lies.
// EXEC: %[[IN:.*]] = exec.buffer offset [[OFF:[0-9]+]] category "grad" : memref<8x8xf32>
// EXEC-NEXT: exec.kernel "matmul"
// EXEC-NEXT: %[[OUT:.*]] = exec.buffer offset [[OFF]] category "grad" : memref<8x8xf32>
// EXEC-NEXT: exec.all_reduce %[[IN]] -> %[[OUT]] group ["dp"] {reduction = "mean"} : memref<8x8xf32> -> memref<8x8xf32>

// DIVIDE: error: shard: batch argument 4 of type 'tensor<2x4xi32>' cannot be split 3 ways along dimension 0
// SYNTAX: error: shard: bad mesh entry 'dp' (expected axis=size with size >= 1, e.g. dp=2,tp=2)
// TWICE: error: shard: mesh axis 'dp' appears twice
// STAGE: error: shard: ZeRO stage must be 0, 1, 2 or 3, got 4
// NODP: error: shard: ZeRO needs a dp or fsdp axis in the mesh
// SYNC: error: shard: unknown grad-sync 'ring' (expected allreduce or ps)
// MIX: error: 'llm.transpose' op moves the batch dimension; it cannot be split over ranks
func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<2x4xi32>, %t: tensor<4xi32>) -> tensor<f32> {
  %e = llm.embedding %w, %x : tensor<4x4xf32>, tensor<2x4xi32>
  %m = llm.transpose %e {permutation = array<i64: 1, 0, 2>} : tensor<2x4x4xf32> to tensor<4x2x4xf32>
  %r = llm.reshape %m : tensor<4x2x4xf32> to tensor<4x8xf32>
  %s = llm.slice %r {offsets = array<i64: 0, 0>} : tensor<4x8xf32> to tensor<4x4xf32>
  %l = llm.cross_entropy %s, %t : tensor<4x4xf32>, tensor<4xi32>
  return %l : tensor<f32>
}

// Axes in any order; ranks are numbered pp, dp, fsdp, ..., tp (last
// fastest) unless told.
// ORDER: dist.mesh @mesh axes ["dp", "fsdp"] shape [2, 1]
// EXPLICIT: dist.mesh @mesh axes ["fsdp", "dp"] shape [1, 2]
// BADORDER: error: shard: rank-order 'fsdp,pp' must name each mesh axis exactly once; 'pp' is not a mesh axis
// SHORTORDER: error: shard: rank-order 'dp' must name each mesh axis exactly once
