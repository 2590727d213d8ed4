// RUN: not llmc-opt %s -split-input-file --llmc-target-cuda 2>&1 | FileCheck %s

// A real cycle, which no stream or channel can break: each stage sends on
// only what it received from the other. Each stuck stage is named, with
// the stream and the channel it waits on.
// CHECK:      error: program 'train_step': the pipeline stages' transfers would hang under NCCL, whose sends wait for their receives
// CHECK:      note: stage 0, stream 4: a group of transfers waits for stage 1's send of tag 1 on the upstream-even channel (B0);
// CHECK:      note: stage 1, stream 2: a group of transfers waits for stage 0's send of tag 0 on the downstream-even channel (F0);
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  module @stage0 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 0>} {
    exec.program @train_step kind "train_step" {
      %g = exec.buffer offset 0 : memref<8xf32>
      %a = exec.buffer offset 64 : memref<8xf32>
      exec.recv %g axis "pp" shift 1 tag 1 {exec.action = "B0"} : memref<8xf32>
      exec.kernel "scale" (%g : memref<8xf32>) -> (%a : memref<8xf32>) {factor = 2.0 : f64}
      exec.send %a axis "pp" shift 1 tag 0 {exec.action = "F0"} : memref<8xf32>
    }
  }
  module @stage1 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 1>} {
    exec.program @train_step kind "train_step" {
      %a = exec.buffer offset 0 : memref<8xf32>
      %g = exec.buffer offset 64 : memref<8xf32>
      exec.recv %a axis "pp" shift -1 tag 0 {exec.action = "F0"} : memref<8xf32>
      exec.kernel "scale" (%a : memref<8xf32>) -> (%g : memref<8xf32>) {factor = 2.0 : f64}
      exec.send %g axis "pp" shift -1 tag 1 {exec.action = "B0"} : memref<8xf32>
    }
  }
}

// -----

// A send the peer never receives.
// CHECK: error: 'exec.send' op stage 0 sends tag 4 to stage 1 on the downstream-even channel, which does not receive it there (or not after what it receives first)
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  module @stage0 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 0>} {
    exec.program @train_step kind "train_step" {
      %a = exec.buffer offset 0 : memref<8xf32>
      exec.send %a axis "pp" shift 1 tag 4 : memref<8xf32>
    }
  }
  module @stage1 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 1>} {
    exec.program @train_step kind "train_step" {
    }
  }
}

// -----

// A receive no send matches.
// CHECK: error: program 'train_step': stage 0 sends tags [] to stage 1 on channel 1 (downstream-even), which receives [5] from it there; NCCL pairs transfers in order
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  module @stage0 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 0>} {
    exec.program @train_step kind "train_step" {
    }
  }
  module @stage1 attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], llmc.ranks = array<i64: 1>} {
    exec.program @train_step kind "train_step" {
      %r = exec.buffer offset 0 : memref<8xf32>
      exec.recv %r axis "pp" shift -1 tag 5 : memref<8xf32>
    }
  }
}

// -----

// One program that is every stage (no stage modules) runs as each.
// CHECK: error: program 'train_step': stage 0 sends tags [0] to stage 1 on channel 1 (downstream-even), which receives [] from it there; NCCL pairs transfers in order
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @train_step kind "train_step" {
    %a = exec.buffer offset 0 : memref<8xf32>
    exec.send %a axis "pp" shift 1 tag 0 : memref<8xf32>
  }
}
