// RUN: llmc-opt %s -split-input-file --llmc-target-cuda | FileCheck %s

// Under --target cuda pipeline transfers are NCCL sends and receives
// (passes/lib/NcclTransfers.h). Two stages that send to each other and then
// receive make progress: each stage's send and receive are consecutive on
// the communication stream, one group the runtime issues together.
// CHECK-LABEL: module @stage0
// CHECK:      exec.wait_event 0 stream 1
// CHECK-NEXT: exec.send %{{.*}} axis "pp" shift 1 tag 0 {stream = 1 : i64}
// CHECK-NEXT: exec.recv %{{.*}} axis "pp" shift 1 tag 1 {stream = 1 : i64}
// CHECK-LABEL: module @stage1
// CHECK:      exec.send %{{.*}} axis "pp" shift -1 tag 1 {stream = 1 : i64}
// CHECK-NEXT: exec.recv %{{.*}} axis "pp" shift -1 tag 0 {stream = 1 : i64}
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  module @stage0 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 0>} {
    exec.program @train_step kind "train_step" {
      %a = exec.buffer offset 0 : memref<8xf32>
      %r = exec.buffer offset 64 : memref<8xf32>
      exec.kernel "fill" () -> (%a : memref<8xf32>) {value = 1.0 : f64}
      exec.send %a axis "pp" shift 1 tag 0 : memref<8xf32>
      exec.recv %r axis "pp" shift 1 tag 1 : memref<8xf32>
    }
  }
  module @stage1 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 1>} {
    exec.program @train_step kind "train_step" {
      %a = exec.buffer offset 0 : memref<8xf32>
      %r = exec.buffer offset 64 : memref<8xf32>
      exec.kernel "fill" () -> (%a : memref<8xf32>) {value = 1.0 : f64}
      exec.send %a axis "pp" shift -1 tag 1 : memref<8xf32>
      exec.recv %r axis "pp" shift -1 tag 0 : memref<8xf32>
    }
  }
}

// -----

// NCCL pairs the n-th send with the n-th receive, whatever the tags: stage
// 1 made the head's weight gradient (tag 3) before the activation gradient
// (tag 2), which stage 0 receives first, so the earlier send is delayed to
// come right after the later one (its bytes stay intact until the end).
// CHECK-LABEL: module @stage1
// CHECK:      exec.kernel "fill"() -> (%[[A:.*]] : memref<8xf32>)
// CHECK:      exec.kernel "fill"() -> (%[[B:.*]] : memref<8xf32>)
// CHECK:      exec.send %[[B]] axis "pp" shift -1 tag 2
// CHECK-NEXT: exec.send %[[A]] axis "pp" shift -1 tag 3
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  module @stage0 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 0>} {
    exec.program @train_step kind "train_step" {
      %g = exec.buffer offset 0 : memref<8xf32>
      %w = exec.buffer offset 64 : memref<8xf32>
      exec.recv %g axis "pp" shift 1 tag 2 : memref<8xf32>
      exec.recv %w axis "pp" shift 1 tag 3 : memref<8xf32>
    }
  }
  module @stage1 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 1>} {
    exec.program @train_step kind "train_step" {
      %a = exec.buffer offset 0 : memref<8xf32>
      %b = exec.buffer offset 64 : memref<8xf32>
      exec.kernel "fill" () -> (%a : memref<8xf32>) {value = 1.0 : f64}
      exec.send %a axis "pp" shift -1 tag 3 : memref<8xf32>
      exec.kernel "fill" () -> (%b : memref<8xf32>) {value = 2.0 : f64}
      exec.send %b axis "pp" shift -1 tag 2 : memref<8xf32>
    }
  }
}
