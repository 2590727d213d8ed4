// RUN: llmc-opt %s -split-input-file --llmc-place-streams | FileCheck %s
// RUN: not llmc-opt %S/Inputs/pipeline-send.mlir --llmc-target-cuda 2>&1 | FileCheck %s --check-prefix=SEND
// RUN: not llmc-opt %s -split-input-file --llmc-place-streams --llmc-place-streams 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-place-streams 2>&1 | FileCheck %s --check-prefix=UNLOWERED
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=1 target=cuda" | FileCheck %s --check-prefixes=CUDA,PIPELINE
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=1 overlap-comm=true" | FileCheck %s --check-prefixes=NOBACKEND,PIPELINE
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=1" | FileCheck %s --check-prefix=CPU

// --target cuda places the same streams and events and marks the backend;
// pipeline transfers must pair in order, as NCCL pairs them
// (nccl-transfers*.mlir): a send nobody receives is refused.
// CUDA: module attributes {{{.*}}exec.backend = "cuda"
// SEND: error: program 'train_step': stage 0 sends tags [0] to stage 1 on channel 1 (downstream-even), which receives [] from it there; NCCL pairs transfers in order
// TWICE: error: 'exec.record_event' op program already has stream events; llmc-place-streams inserts them and must run once
// UNLOWERED: error: llmc-place-streams needs lowered exec programs (run llmc-lower-to-exec first)

// The gradient a kernel writes is reduced on the communication stream only
// after the kernel; the optimizer kernel reads the result only after the
// reduction. Kernels are stream 0, collectives stream 1 (their defaults).
// CHECK-NOT: exec.backend
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
// all-gathers after the update wait for the optimizer's kernel.
// PIPELINE: exec.program @train_step
// PIPELINE: exec.record_event 0 stream 0
// PIPELINE: exec.wait_event 0 stream 1
// PIPELINE-NEXT: exec.reduce_scatter
// PIPELINE: exec.kernel "multi_tensor_adamw"
// PIPELINE: exec.wait_event {{[0-9]+}} stream 1
// PIPELINE-NOT: exec.kernel
// PIPELINE: exec.all_gather

// Without --overlap-comm the CPU program is one ordered list: no events,
// no second stream, no backend mark. With it, no backend mark either.
// CPU-NOT: exec.backend
// CPU-NOT: exec.wait_event
// CPU-NOT: stream = 1
// NOBACKEND-NOT: exec.backend = "cuda"

// -----

// Pipeline transfers go to their channels' streams (common/
// TransferChannel.h): a send to the next stage on the downstream-even
// stream 2, a receive from the next stage (shift 1) on the upstream-even
// stream 4. The send waits until the
// kernel that made the activation finished; the receive lands in bytes the
// second kernel wrote (%r reuses %b's), so it waits for that kernel too;
// the kernel that consumes the received one waits for it.
// CHECK-LABEL: exec.program @stage
// CHECK:      exec.kernel "fill"() -> (%[[A:.*]] : memref<8xf32>)
// CHECK-NEXT: exec.record_event 0 stream 0
// CHECK-NEXT: exec.kernel "scale"
// CHECK-NEXT: exec.record_event 1 stream 0
// CHECK-NEXT: exec.wait_event 0 stream 2
// CHECK-NEXT: exec.send %[[A]] axis "pp" shift 1 tag 0 {channel = 1 : i64, stream = 2 : i64}
// CHECK-NEXT: exec.wait_event 1 stream 4
// CHECK-NEXT: exec.recv %{{.*}} axis "pp" shift 1 tag 1 {channel = 3 : i64, stream = 4 : i64}
// CHECK-NEXT: exec.record_event 2 stream 4
// CHECK-NEXT: exec.wait_event 2 stream 0
// CHECK-NEXT: exec.kernel "scale"
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @stage kind "train_step" {
    %a = exec.buffer offset 0 : memref<8xf32>
    %b = exec.buffer offset 64 : memref<8xf32>
    %r = exec.buffer offset 64 : memref<8xf32>
    %c = exec.buffer offset 128 : memref<8xf32>
    exec.kernel "fill" () -> (%a : memref<8xf32>) {value = 1.0 : f64}
    exec.kernel "scale" (%a : memref<8xf32>) -> (%b : memref<8xf32>) {factor = 2.0 : f64}
    exec.send %a axis "pp" shift 1 tag 0 : memref<8xf32>
    exec.recv %r axis "pp" shift 1 tag 1 : memref<8xf32>
    exec.kernel "scale" (%r : memref<8xf32>) -> (%c : memref<8xf32>) {factor = 2.0 : f64}
  }
}

// -----

// A kernel that reads what stream 1 reduced and what stream 4 received
// waits for both; the later receive on stream 4, which waited for the
// reduction itself, covers it: one wait, for stream 4 (the streams'
// coverage is transitive).
// CHECK-LABEL: exec.program @chain
// CHECK:      exec.all_reduce
// CHECK-NEXT: exec.record_event 0 stream 1
// CHECK-NEXT: exec.wait_event 0 stream 4
// CHECK-NEXT: exec.recv
// CHECK-NEXT: exec.record_event 1 stream 4
// CHECK-NEXT: exec.wait_event 1 stream 0
// CHECK-NEXT: exec.kernel "add"
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @chain kind "train_step" {
    %x = exec.buffer offset 0 : memref<8xf32>
    %y = exec.buffer offset 64 : memref<8xf32>
    %r = exec.buffer offset 64 : memref<8xf32>
    %o = exec.buffer offset 128 : memref<8xf32>
    exec.all_reduce %x -> %y group ["pp"] : memref<8xf32> -> memref<8xf32>
    exec.recv %r axis "pp" shift 1 tag 1 : memref<8xf32>
    exec.kernel "add" (%x, %r : memref<8xf32>, memref<8xf32>) -> (%o : memref<8xf32>)
  }
}

// -----

// Copies between device and host memory go to the copy stream (8): a
// prefetch overlaps the kernel before its reader, which waits for it; the
// host kernel that then overwrites the copy's source needs no second wait
// (stream 0 already waited for the copy).
// CHECK-LABEL: exec.program @copies
// CHECK:      exec.kernel "copy_to_device"(%{{.*}}) -> (%{{.*}}) {stream = 8 : i64}
// CHECK-NEXT: exec.record_event 0 stream 8
// CHECK-NEXT: exec.kernel "fill"() -> (%{{.*}}) {value = 1.0
// CHECK-NEXT: exec.wait_event 0 stream 0
// CHECK-NEXT: exec.kernel "scale"
// CHECK-NEXT: exec.kernel "fill"() -> (%{{.*}}) {exec.on_host, value = 0.0
module attributes {exec.arena_bytes = 192 : i64, exec.host_bytes = 64 : i64} {
  exec.program @copies kind "decode" {
    %h = exec.buffer offset 192 {exec.host_space} : memref<8xf32>
    %d = exec.buffer offset 0 : memref<8xf32>
    %x = exec.buffer offset 64 : memref<8xf32>
    %y = exec.buffer offset 128 : memref<8xf32>
    exec.kernel "copy_to_device" (%h : memref<8xf32>) -> (%d : memref<8xf32>)
    exec.kernel "fill" () -> (%x : memref<8xf32>) {value = 1.0 : f64}
    exec.kernel "scale" (%d : memref<8xf32>) -> (%y : memref<8xf32>) {factor = 0.5 : f64}
    exec.kernel "fill" () -> (%h : memref<8xf32>) {value = 0.0 : f64, exec.on_host}
  }
}
