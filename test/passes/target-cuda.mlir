// RUN: llmc-opt %s -split-input-file --llmc-target-cuda | FileCheck %s
// RUN: not llmc-opt %S/Inputs/target-cuda-send.mlir --llmc-target-cuda 2>&1 | FileCheck %s --check-prefix=SEND
// SEND: error: 'exec.send' op pipeline-parallel send/recv is not supported by --target cuda
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=1 target=cuda" | FileCheck %s --check-prefix=PIPELINE
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=1" | FileCheck %s --check-prefix=CPU

// The gradient a kernel writes is reduced on the communication stream only
// after the kernel; the optimizer kernel reads the result only after the
// reduction. Kernels are stream 0, collectives stream 1 (their defaults).
// CHECK: module attributes {exec.backend = "cuda"
// CHECK-LABEL: exec.program @train_step
// CHECK:      exec.kernel "fill"() -> (%[[G:.*]] : memref<8xf32>) {value = 1.0
// CHECK-NEXT: exec.record_event 0 stream 0
// CHECK-NEXT: exec.wait_event 0 stream 1
// CHECK-NEXT: exec.all_reduce %[[G]] -> %[[G]] group ["dp"]
// CHECK-NEXT: exec.record_event 1 stream 1
// An independent kernel overlaps the reduction: no wait.
// CHECK-NEXT: exec.kernel "fill"() -> (%{{.*}}) {value = 2.0
// CHECK-NEXT: exec.wait_event 1 stream 0
// CHECK-NEXT: exec.kernel "scale"
module attributes {exec.mesh = {dp = 2 : i64}, exec.mesh_axes = ["dp"]} {
  exec.program @train_step kind "train_step" {
    %g = exec.buffer offset 0 : memref<8xf32>
    %x = exec.buffer offset 64 : memref<8xf32>
    %y = exec.buffer offset 128 : memref<8xf32>
    exec.kernel "fill" () -> (%g : memref<8xf32>) {value = 1.0 : f64}
    exec.all_reduce %g -> %g group ["dp"] : memref<8xf32> -> memref<8xf32>
    exec.kernel "fill" () -> (%x : memref<8xf32>) {value = 2.0 : f64}
    exec.kernel "scale" (%g : memref<8xf32>) -> (%y : memref<8xf32>) {factor = 0.5 : f64}
  }
}

// -----

// Write after read on reused bytes: the planner gave the all-gather's input
// bytes to a later kernel's output (%b aliases the tail of %a), so the
// kernel must wait until the gather has read them; the unrelated
// all-reduce after the gather still overlaps the kernel. The second kernel
// is ordered after the first by its stream: no second wait.
// CHECK-LABEL: exec.program @reuse
// CHECK:      exec.all_gather
// CHECK-NEXT: exec.record_event 0 stream 1
// CHECK-NEXT: exec.all_reduce
// CHECK-NEXT: exec.wait_event 0 stream 0
// CHECK-NEXT: exec.kernel "fill"
// CHECK-NOT:  exec.wait_event
module attributes {exec.mesh = {dp = 2 : i64}, exec.mesh_axes = ["dp"]} {
  exec.program @reuse kind "train_step" {
    %a = exec.buffer offset 0 : memref<8xf32>
    %gathered = exec.buffer offset 256 : memref<16xf32>
    %c = exec.buffer offset 512 : memref<4xf32>
    %b = exec.buffer offset 16 : memref<4xf32>
    exec.all_gather %a -> %gathered group ["dp"] : memref<8xf32> -> memref<16xf32>
    exec.all_reduce %c -> %c group ["dp"] : memref<4xf32> -> memref<4xf32>
    exec.kernel "fill" () -> (%b : memref<4xf32>) {value = 0.0 : f64}
    exec.kernel "fill" () -> (%b : memref<4xf32>) {value = 1.0 : f64}
  }
}

// The whole training pipeline under ZeRO-1: each gradient reduce-scatter
// waits for the backward kernel that produced it, and the parameter
// all-gathers after the update wait for the optimizer kernels.
// PIPELINE: module attributes {{{.*}}exec.backend = "cuda"
// PIPELINE: exec.program @train_step
// PIPELINE: exec.record_event 0 stream 0
// PIPELINE: exec.wait_event 0 stream 1
// PIPELINE-NEXT: exec.reduce_scatter
// PIPELINE: exec.kernel "adamw"
// PIPELINE: exec.wait_event {{[0-9]+}} stream 1
// PIPELINE-NOT: exec.kernel
// PIPELINE: exec.all_gather

// The CPU target has no events and no backend mark.
// CPU-NOT: exec.backend
// CPU-NOT: exec.wait_event
