// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="offload=optimizer precision=bf16 fuse=none" | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=bf16 fuse=none" | FileCheck %s --check-prefix=BASE
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="offload=optimizer" | FileCheck %s --check-prefix=FP32
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-offload-optimizer 2>&1 | FileCheck %s --check-prefix=UNLOWERED
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="offload=optimizer" --llmc-offload-optimizer 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not llmc-opt %s -split-input-file --llmc-offload-optimizer 2>&1 | FileCheck %s --check-prefix=ERRORS

// bf16: the arena loses the masters and moments (2496 bytes of state in
// 64-byte slots, 2688 bytes); host memory after it holds them and the
// staging copies.
// BASE: module attributes {exec.arena_bytes = 4864 : i64
// CHECK: module attributes {exec.arena_bytes = 2176 : i64, exec.host_bytes = 4288 : i64, exec.memory_plan = {arena = 2176 : i64, host = 4288 : i64, host_optimizer_state = 2496 : i64, optimizer_state = 2496 : i64
// CHECK-LABEL: exec.program @train_step
// CHECK-DAG: %[[GSTAGE:.*]] = exec.buffer offset {{[0-9]+}} category "workspace" {exec.host_space} : memref<8x8xf32>
// CHECK-DAG: %[[PSTAGE:.*]] = exec.buffer offset {{[0-9]+}} category "workspace" {exec.host_space} : memref<16x8xbf16>
// CHECK-DAG: %[[MASTER:.*]] = exec.buffer offset 2176 name "master/wte" category "optim" {exec.host_space} : memref<16x8xf32>
// CHECK-DAG: exec.buffer offset {{[0-9]+}} name "adam_m/wte" category "optim" {exec.host_space}
// CHECK-DAG: exec.buffer offset {{[0-9]+}} name "adam_v/wte" category "optim" {exec.host_space}
// Parameters stay on the device.
// CHECK-DAG: %[[WTE:.*]] = exec.buffer offset 0 name "wte" category "param" {{.*}}: memref<16x8xbf16>
// A gradient goes down right after the kernel that finishes it, inside
// the backward, not after it.
// CHECK:      exec.kernel "cast"(%{{.*}} : memref<8x8xbf16>) -> (%[[G:.*]] : memref<8x8xf32>)
// CHECK-NEXT: exec.kernel "copy_to_host"(%[[G]] : memref<8x8xf32>) -> (%[[GSTAGE]] : memref<8x8xf32>)
// CHECK:      exec.kernel "layernorm_grad"
// The update runs on the host on host memory; the master's cast to bf16
// too, and the bf16 parameter goes up.
// CHECK:      exec.kernel "adamw"(%[[MASTER]], {{.*}}) -> (%[[MASTER]], {{.*}}) {{{.*}}exec.on_host
// CHECK-NEXT: exec.kernel "cast"(%[[MASTER]] : memref<16x8xf32>) -> (%[[PSTAGE]] : memref<16x8xbf16>) {exec.on_host}
// CHECK-NEXT: exec.kernel "copy_to_device"(%[[PSTAGE]] : memref<16x8xbf16>) -> (%[[WTE]] : memref<16x8xbf16>)

// fp32: no masters; the parameter itself goes down, is updated in place in
// its host copy and goes back up.
// FP32-LABEL: exec.program @train_step
// FP32:      exec.kernel "copy_to_host"(%[[P:.*]] : memref<16x8xf32>) -> (%[[PH:.*]] : memref<16x8xf32>)
// FP32:      exec.kernel "multi_tensor_adamw"(%[[PH]], {{.*}}) -> (%[[PH]], {{.*}}exec.on_host
// FP32:      exec.kernel "copy_to_device"(%[[PH]] : memref<16x8xf32>) -> (%[[P]] : memref<16x8xf32>)

// UNLOWERED: error: offload: the module is not lowered (run llmc-lower-to-exec)
// TWICE: error: offload: the module's optimizer state is already offloaded

// ERRORS: error: offload: no optimizer state to offload (--offload optimizer needs a training step with AdamW)
module attributes {exec.arena_bytes = 64 : i64, exec.memory_plan = {arena = 64 : i64}} {
  exec.program @eval kind "eval" {
    %w = exec.buffer offset 0 name "w" category "param" : memref<4xf32>
    exec.kernel "scale"(%w : memref<4xf32>) -> (%w : memref<4xf32>) {factor = 2.0 : f64}
  }
}

// -----

// ERRORS: error: 'exec.all_reduce' op reads or writes optimizer state 'adam_m/w', which --offload optimizer keeps in host memory; only kernels can run there
module attributes {exec.arena_bytes = 64 : i64, exec.memory_plan = {arena = 64 : i64}, exec.mesh = {dp = 2 : i64}} {
  exec.program @train_step kind "train_step" {
    %m = exec.buffer offset 0 name "adam_m/w" category "optim" : memref<4xf32>
    exec.all_reduce %m -> %m group ["dp"] : memref<4xf32> -> memref<4xf32>
  }
}
