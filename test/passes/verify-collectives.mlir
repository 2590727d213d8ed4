// RUN: llmc-opt %s -split-input-file -verify-diagnostics --llmc-verify-collectives
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=3" | FileCheck %s --check-prefix=PIPELINE

// The training pipeline ends with the check (and the SPMD program passes).
// PIPELINE: exec.program @train_step

// Two roles that meet: each rank issues the same all-reduce on dp.
module attributes {exec.mesh = {dp = 2 : i64}, exec.mesh_axes = ["dp"]} {
  exec.program @step0 kind "train_step" attributes {exec.ranks = array<i64: 0>} {
    %g = exec.buffer offset 0 : memref<8xf32>
    exec.all_reduce %g -> %g group ["dp"] : memref<8xf32> -> memref<8xf32>
  }
  exec.program @step1 kind "train_step" attributes {exec.ranks = array<i64: 1>} {
    %g = exec.buffer offset 64 : memref<8xf32>
    exec.all_reduce %g -> %g group ["dp"] : memref<8xf32> -> memref<8xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}, exec.mesh_axes = ["dp"]} {
  exec.program @step0 kind "train_step" attributes {exec.ranks = array<i64: 0>} {
    %g = exec.buffer offset 0 : memref<8xf32>
    exec.all_reduce %g -> %g group ["dp"] : memref<8xf32> -> memref<8xf32>
  }
  exec.program @step1 kind "train_step" attributes {exec.ranks = array<i64: 1>} {
    %g = exec.buffer offset 0 : memref<8xf32>
    %h = exec.buffer offset 64 : memref<16xf32>
    // expected-error @+1 {{verify-collectives: program 'train_step': ranks 0 and 1 disagree on collective #0 over [dp]: rank 0 issues all_reduce of 8 x f32 (sum)}}
    exec.all_gather %g -> %h group ["dp"] : memref<8xf32> -> memref<16xf32>
  }
}

// -----

// Same operation, different sizes: a hang (or garbage) at run time.
module attributes {exec.mesh = {dp = 2 : i64, tp = 2 : i64}, exec.mesh_axes = ["dp", "tp"]} {
  exec.program @a kind "train_step" attributes {exec.ranks = array<i64: 0, 1>} {
    %g = exec.buffer offset 0 : memref<8xf32>
    exec.all_reduce %g -> %g group ["dp"] : memref<8xf32> -> memref<8xf32>
  }
  exec.program @b kind "train_step" attributes {exec.ranks = array<i64: 2, 3>} {
    %g = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{ranks 0 and 2 disagree on collective #0 over [dp]: rank 0 issues all_reduce of 8 x f32 (sum)}}
    exec.all_reduce %g -> %g group ["dp"] : memref<4xf32> -> memref<4xf32>
  }
}

// -----

// The tp groups ({0,1} and {2,3}) each agree, even though they differ.
module attributes {exec.mesh = {dp = 2 : i64, tp = 2 : i64}, exec.mesh_axes = ["dp", "tp"]} {
  exec.program @a kind "train_step" attributes {exec.ranks = array<i64: 0, 1>} {
    %g = exec.buffer offset 0 : memref<8xf32>
    exec.all_reduce %g -> %g group ["tp"] : memref<8xf32> -> memref<8xf32>
  }
  exec.program @b kind "train_step" attributes {exec.ranks = array<i64: 2, 3>} {
    %g = exec.buffer offset 0 : memref<4xbf16>
    exec.all_reduce %g -> %g group ["tp"] {reduction = "max"} : memref<4xbf16> -> memref<4xbf16>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}, exec.mesh_axes = ["dp"]} {
  exec.program @step0 kind "train_step" attributes {exec.ranks = array<i64: 0>} {
    %g = exec.buffer offset 0 : memref<8xf32>
    exec.all_reduce %g -> %g group ["dp"] : memref<8xf32> -> memref<8xf32>
    // expected-error @+1 {{ranks 0 and 1 issue 2 and 1 collectives over [dp]; rank 0's collective #1 (broadcast of 8 x f32 root 0) has no partner}}
    exec.broadcast %g -> %g group ["dp"] : memref<8xf32> -> memref<8xf32>
  }
  exec.program @step1 kind "train_step" attributes {exec.ranks = array<i64: 1>} {
    %g = exec.buffer offset 0 : memref<8xf32>
    exec.all_reduce %g -> %g group ["dp"] : memref<8xf32> -> memref<8xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}, exec.mesh_axes = ["dp"]} {
  // expected-error @+1 {{verify-collectives: rank 1 has no 'train_step' program, so its peers would wait for it forever}}
  exec.program @step0 kind "train_step" attributes {exec.ranks = array<i64: 0>} {
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}, exec.mesh_axes = ["dp"]} {
  exec.program @a kind "eval" {
  }
  // expected-error @+1 {{verify-collectives: rank 0 has two 'eval' programs (@a and @b)}}
  exec.program @b kind "eval" attributes {exec.ranks = array<i64: 0>} {
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}, exec.mesh_axes = ["dp"]} {
  // expected-error @+1 {{verify-collectives: exec.ranks names rank 2, outside the mesh of 2 ranks}}
  exec.program @a kind "eval" attributes {exec.ranks = array<i64: 0, 1, 2>} {
  }
}

// -----

// Point to point: a pipeline's activations forward, gradients back.
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @first kind "train_step" attributes {exec.ranks = array<i64: 0>} {
    %a = exec.buffer offset 0 : memref<4x8xf32>
    exec.send %a axis "pp" shift 1 tag 1 : memref<4x8xf32>
    exec.recv %a axis "pp" shift 1 tag 2 : memref<4x8xf32>
  }
  exec.program @last kind "train_step" attributes {exec.ranks = array<i64: 1>} {
    %a = exec.buffer offset 0 : memref<4x8xf32>
    exec.recv %a axis "pp" shift -1 tag 1 : memref<4x8xf32>
    exec.send %a axis "pp" shift -1 tag 2 : memref<4x8xf32>
  }
}

// -----

module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @first kind "train_step" attributes {exec.ranks = array<i64: 0>} {
    %a = exec.buffer offset 0 : memref<4x8xf32>
    // expected-error @+1 {{verify-collectives: program 'train_step': send #0 from rank 0 to rank 1 with tag 1 (128 bytes) meets a receive of 64 bytes}}
    exec.send %a axis "pp" shift 1 tag 1 : memref<4x8xf32>
  }
  exec.program @last kind "train_step" attributes {exec.ranks = array<i64: 1>} {
    %a = exec.buffer offset 0 : memref<2x8xf32>
    exec.recv %a axis "pp" shift -1 tag 1 : memref<2x8xf32>
  }
}

// -----

module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @first kind "train_step" attributes {exec.ranks = array<i64: 0>} {
    %a = exec.buffer offset 0 : memref<4x8xf32>
    // expected-error @+1 {{send #0 from rank 0 to rank 1 with tag 1 has no matching receive}}
    exec.send %a axis "pp" shift 1 tag 1 : memref<4x8xf32>
  }
  exec.program @last kind "train_step" attributes {exec.ranks = array<i64: 1>} {
  }
}

// -----

module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @first kind "train_step" attributes {exec.ranks = array<i64: 0>} {
  }
  exec.program @last kind "train_step" attributes {exec.ranks = array<i64: 1>} {
    %a = exec.buffer offset 0 : memref<4x8xf32>
    // expected-error @+1 {{rank 1 waits to receive from rank 0 (tag 3) but nothing is sent}}
    exec.recv %a axis "pp" shift -1 tag 3 : memref<4x8xf32>
  }
}

// -----

module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @all kind "train_step" {
    %a = exec.buffer offset 0 : memref<4x8xf32>
    // expected-error @+1 {{verify-collectives: rank 1 would send to coordinate 2 of axis 'pp', outside its 2 ranks}}
    exec.send %a axis "pp" shift 1 tag 1 : memref<4x8xf32>
  }
}

// -----

// Each stage waits to receive before it sends what the other waits for.
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @first kind "train_step" attributes {exec.ranks = array<i64: 0>} {
    %a = exec.buffer offset 0 : memref<4x8xf32>
    // expected-error @+1 {{verify-collectives: program 'train_step' would hang, its ranks waiting for each other: rank 0 at exec.recv}}
    exec.recv %a axis "pp" shift 1 tag 2 : memref<4x8xf32>
    exec.send %a axis "pp" shift 1 tag 1 : memref<4x8xf32>
  }
  exec.program @last kind "train_step" attributes {exec.ranks = array<i64: 1>} {
    %a = exec.buffer offset 0 : memref<4x8xf32>
    exec.recv %a axis "pp" shift -1 tag 1 : memref<4x8xf32>
    exec.send %a axis "pp" shift -1 tag 2 : memref<4x8xf32>
  }
}

// -----

// Receives may come in another order than the sends (matched by tag); but
// a collective one rank reaches only after a receive that the other rank
// sends after the collective is a hang.
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"]} {
  exec.program @first kind "train_step" attributes {exec.ranks = array<i64: 0>} {
    %a = exec.buffer offset 0 : memref<4x8xf32>
    %n = exec.buffer offset 128 : memref<f32>
    exec.send %a axis "pp" shift 1 tag 1 : memref<4x8xf32>
    exec.send %a axis "pp" shift 1 tag 2 : memref<4x8xf32>
    // expected-error @+1 {{would hang, its ranks waiting for each other: rank 0 at exec.all_reduce}}
    exec.all_reduce %n -> %n group ["pp"] : memref<f32> -> memref<f32>
    exec.send %a axis "pp" shift 1 tag 3 : memref<4x8xf32>
  }
  exec.program @last kind "train_step" attributes {exec.ranks = array<i64: 1>} {
    %a = exec.buffer offset 0 : memref<4x8xf32>
    %n = exec.buffer offset 128 : memref<f32>
    exec.recv %a axis "pp" shift -1 tag 2 : memref<4x8xf32>
    exec.recv %a axis "pp" shift -1 tag 1 : memref<4x8xf32>
    exec.recv %a axis "pp" shift -1 tag 3 : memref<4x8xf32>
    exec.all_reduce %n -> %n group ["pp"] : memref<f32> -> memref<f32>
  }
}
