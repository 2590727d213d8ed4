// RUN: not llmc-opt %s -split-input-file --llmc-target-cuda 2>&1 | FileCheck %s

// Both stages send first and a collective over pp separates the send from
// the receive: each send waits for a receive its peer never reaches.
// CHECK:      error: program 'train_step': the pipeline stages' transfers would hang under NCCL, whose sends wait for their receives
// CHECK:      note: stage 0, stream 1: a group of transfers waits for stage 1's receive of tag 0;
// CHECK:      note: stage 1, stream 1: a group of transfers waits for stage 0's receive of tag 1;
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

// A send the peer never receives.
// CHECK: error: 'exec.send' op stage 0 sends tag 4 to stage 1, which does not receive it (or not after what it receives first)
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
// CHECK: error: program 'train_step': stage 0 sends tags [] to stage 1, which receives [5] from it; NCCL pairs transfers in order
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
// CHECK: error: program 'train_step': stage 0 sends tags [0] to stage 1, which receives [] from it; NCCL pairs transfers in order
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @train_step kind "train_step" {
    %a = exec.buffer offset 0 : memref<8xf32>
    exec.send %a axis "pp" shift 1 tag 0 : memref<8xf32>
  }
}
