// RUN: llmc-opt %s -split-input-file --llmc-target-cuda | FileCheck %s

// Under --target cuda pipeline transfers are NCCL sends and receives
// (passes/lib/NcclTransfers.h), each on its channel's stream and
// communicator: by direction — to a later stage (a send's shift > 0, a
// receive's < 0) downstream, else upstream — and the parity of the lower of
// the two stages: downstream-even is channel 1 on stream 2, upstream-even
// channel 3 on stream 4. Two
// stages that each send first make progress: stage 0's activation and
// stage 1's gradient travel on different streams, so neither waits behind
// the other.
// CHECK-LABEL: module @stage0
// CHECK:      exec.wait_event 0 stream 2
// CHECK-NEXT: exec.send %{{.*}} axis "pp" shift 1 tag 0 {channel = 1 : i64, stream = 2 : i64}
// CHECK-NEXT: exec.recv %{{.*}} axis "pp" shift 1 tag 1 {channel = 3 : i64, stream = 4 : i64}
// CHECK-LABEL: module @stage1
// CHECK:      exec.send %{{.*}} axis "pp" shift -1 tag 1 {channel = 3 : i64, stream = 4 : i64}
// CHECK-NEXT: exec.recv %{{.*}} axis "pp" shift -1 tag 0 {channel = 1 : i64, stream = 2 : i64}
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

// What hung on one communication stream: both stages send first and a
// collective over pp separates each send from the receive. On two
// channels each send's receive is on the peer's other stream, beside the
// collective: nothing waits for anything that waits for it.
// CHECK-LABEL: module @stage0
// CHECK:      exec.send %{{.*}} tag 0 {channel = 1 : i64, stream = 2 : i64}
// CHECK:      exec.all_reduce {{.*}}stream = 1
// CHECK:      exec.recv %{{.*}} tag 1 {channel = 3 : i64, stream = 4 : i64}
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  module @stage0 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 0>} {
    exec.program @train_step kind "train_step" {
      %a = exec.buffer offset 0 : memref<8xf32>
      %r = exec.buffer offset 64 : memref<8xf32>
      %x = exec.buffer offset 128 : memref<f32>
      %y = exec.buffer offset 192 : memref<f32>
      exec.send %a axis "pp" shift 1 tag 0 : memref<8xf32>
      exec.all_reduce %x -> %y group ["pp"] : memref<f32> -> memref<f32>
      exec.recv %r axis "pp" shift 1 tag 1 : memref<8xf32>
    }
  }
  module @stage1 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 1>} {
    exec.program @train_step kind "train_step" {
      %a = exec.buffer offset 0 : memref<8xf32>
      %r = exec.buffer offset 64 : memref<8xf32>
      %x = exec.buffer offset 128 : memref<f32>
      %y = exec.buffer offset 192 : memref<f32>
      exec.send %a axis "pp" shift -1 tag 1 : memref<8xf32>
      exec.all_reduce %x -> %y group ["pp"] : memref<f32> -> memref<f32>
      exec.recv %r axis "pp" shift -1 tag 0 : memref<8xf32>
    }
  }
}

// -----

// NCCL pairs the n-th send with the n-th receive per communicator, whatever
// the tags: stage 2 made the head's weight gradient (tag 3) before the
// activation gradient (tag 2), which stage 1 receives first on the same
// channel, so the earlier send is delayed to come right after the later one
// (its bytes stay intact until the end): both travel upstream from stage 2
// to 1, whose lower stage is odd (channel 4, stream 5). The tied
// embedding's gradient (tag 4) goes to stage 0, another peer, on the
// upstream far link (channel 6, stream 7): stage 0 receiving it first
// moves nothing.
// CHECK-LABEL: module @stage2
// CHECK:      exec.kernel "fill"() -> (%[[A:.*]] : memref<8xf32>)
// CHECK:      exec.kernel "fill"() -> (%[[B:.*]] : memref<8xf32>)
// CHECK:      exec.send %[[B]] axis "pp" shift -1 tag 2 {channel = 4 : i64, stream = 5 : i64}
// CHECK-NEXT: exec.send %[[A]] axis "pp" shift -1 tag 3 {channel = 4 : i64, stream = 5 : i64}
// CHECK:      exec.kernel "fill"() -> (%[[C:.*]] : memref<8xf32>)
// CHECK:      exec.send %[[C]] axis "pp" shift -2 tag 4 {channel = 6 : i64, stream = 7 : i64}
module attributes {exec.mesh = {pp = 3 : i64}, exec.mesh_axes = ["pp"]} {
  module @stage0 attributes {exec.mesh = {pp = 3 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 0>} {
    exec.program @train_step kind "train_step" {
      %e = exec.buffer offset 0 : memref<8xf32>
      exec.recv %e axis "pp" shift 2 tag 4 : memref<8xf32>
    }
  }
  module @stage1 attributes {exec.mesh = {pp = 3 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 1>} {
    exec.program @train_step kind "train_step" {
      %g = exec.buffer offset 0 : memref<8xf32>
      %w = exec.buffer offset 64 : memref<8xf32>
      exec.recv %g axis "pp" shift 1 tag 2 : memref<8xf32>
      exec.recv %w axis "pp" shift 1 tag 3 : memref<8xf32>
    }
  }
  module @stage2 attributes {exec.mesh = {pp = 3 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 2>} {
    exec.program @train_step kind "train_step" {
      %a = exec.buffer offset 0 : memref<8xf32>
      %b = exec.buffer offset 64 : memref<8xf32>
      %c = exec.buffer offset 128 : memref<8xf32>
      exec.kernel "fill" () -> (%a : memref<8xf32>) {value = 1.0 : f64}
      exec.send %a axis "pp" shift -1 tag 3 : memref<8xf32>
      exec.kernel "fill" () -> (%b : memref<8xf32>) {value = 2.0 : f64}
      exec.send %b axis "pp" shift -1 tag 2 : memref<8xf32>
      exec.kernel "fill" () -> (%c : memref<8xf32>) {value = 3.0 : f64}
      exec.send %c axis "pp" shift -2 tag 4 : memref<8xf32>
    }
  }
}
