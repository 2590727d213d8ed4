// RUN: llmc-opt %s | llmc-opt | FileCheck %s
// Every exec op survives print → parse → print.

// CHECK: module attributes {exec.arena_bytes = 4096 : i64, exec.mesh = {dp = 2 : i64, pp = 2 : i64, tp = 2 : i64}}
module attributes {exec.arena_bytes = 4096 : i64, exec.mesh = {pp = 2 : i64, dp = 2 : i64, tp = 2 : i64}} {
  // CHECK: exec.program @train_step kind "train_step" {
  exec.program @train_step kind "train_step" {
    // CHECK: %[[W:.*]] = exec.buffer offset 0 name "w" category "param" : memref<8x8xf32>
    %w = exec.buffer offset 0 name "w" category "param" : memref<8x8xf32>
    // CHECK: %[[X:.*]] = exec.buffer offset 256 name "tokens" category "input" : memref<4x8xf32>
    %x = exec.buffer offset 256 name "tokens" category "input" : memref<4x8xf32>
    // CHECK: %[[Y:.*]] = exec.buffer offset 384 : memref<4x8xf32>
    %y = exec.buffer offset 384 : memref<4x8xf32>
    %g = exec.buffer offset 512 category "grad" : memref<8x8xf32>
    %h = exec.buffer offset 768 category "workspace" : memref<16x8xf32>
    %s = exec.buffer offset 1280 category "activation" : memref<2x2x8xbf16>
    // CHECK: exec.kernel "matmul"(%[[X]], %[[W]] : memref<4x8xf32>, memref<8x8xf32>) -> (%[[Y]] : memref<4x8xf32>) {transpose_b = 1 : i64}
    exec.kernel "matmul"(%x, %w : memref<4x8xf32>, memref<8x8xf32>) -> (%y : memref<4x8xf32>) {transpose_b = 1 : i64}
    // CHECK: exec.kernel "fill"() -> (%{{.*}} : memref<8x8xf32>) {stream = 2 : i64, value = 0.000000e+00 : f64}
    exec.kernel "fill"() -> (%g : memref<8x8xf32>) {value = 0.0 : f64, stream = 2 : i64}
    // CHECK: exec.kernel "fill"() -> (%{{.*}} : memref<8x8xf32>) {exec.fault_site, value = 1.000000e+00 : f64}
    exec.kernel "fill"() -> (%g : memref<8x8xf32>) {value = 1.0 : f64, exec.fault_site}
    // CHECK: exec.kernel "transpose"({{.*}}) -> ({{.*}}) {permutation = array<i64: 1, 0>}
    exec.kernel "transpose"(%g : memref<8x8xf32>) -> (%w : memref<8x8xf32>) {permutation = array<i64: 1, 0>}
    // CHECK: exec.all_reduce %{{.*}} -> %{{.*}} group ["dp"] : memref<8x8xf32> -> memref<8x8xf32>
    exec.all_reduce %g -> %g group ["dp"] : memref<8x8xf32> -> memref<8x8xf32>
    // CHECK: exec.all_reduce {{.*}} group ["dp", "tp"] {reduction = "max"}
    exec.all_reduce %g -> %g group ["dp", "tp"] {reduction = "max"} : memref<8x8xf32> -> memref<8x8xf32>
    // CHECK: exec.all_gather %{{.*}} -> %{{.*}} group ["dp"] : memref<8x8xf32> -> memref<16x8xf32>
    exec.all_gather %g -> %h group ["dp"] : memref<8x8xf32> -> memref<16x8xf32>
    // CHECK: exec.reduce_scatter %{{.*}} -> %{{.*}} group ["dp"] : memref<16x8xf32> -> memref<8x8xf32>
    exec.reduce_scatter %h -> %g group ["dp"] : memref<16x8xf32> -> memref<8x8xf32>
    // CHECK: exec.broadcast {{.*}} group ["dp"] {root = 1 : i64}
    exec.broadcast %w -> %w group ["dp"] {root = 1 : i64} : memref<8x8xf32> -> memref<8x8xf32>
    // CHECK: exec.reduce {{.*}} group ["tp"] {reduction = "mean"}
    exec.reduce %g -> %g group ["tp"] {root = 0 : i64, reduction = "mean"} : memref<8x8xf32> -> memref<8x8xf32>
    // CHECK: exec.all_to_all {{.*}} group ["tp"] : memref<2x2x8xbf16> -> memref<2x2x8xbf16>
    exec.all_to_all %s -> %s group ["tp"] : memref<2x2x8xbf16> -> memref<2x2x8xbf16>
    // CHECK: exec.send %{{.*}} axis "pp" shift 1 tag 7 : memref<4x8xf32>
    exec.send %y axis "pp" shift 1 tag 7 : memref<4x8xf32>
    // CHECK: exec.send %{{.*}} axis "pp" shift 1 tag 8 {channel = 1 : i64, stream = 2 : i64} : memref<4x8xf32>
    exec.send %y axis "pp" shift 1 tag 8 {channel = 1 : i64, stream = 2 : i64} : memref<4x8xf32>
    // CHECK: exec.recv %{{.*}} axis "pp" shift -1 tag 7 {stream = 3 : i64} : memref<4x8xf32>
    exec.recv %y axis "pp" shift -1 tag 7 {stream = 3 : i64} : memref<4x8xf32>
    // CHECK: exec.record_event 0 stream 1
    exec.record_event 0 stream 1
    // CHECK: exec.wait_event 0 stream 0
    exec.wait_event 0 stream 0
  }
  // CHECK: exec.program @eval kind "eval"
  exec.program @eval kind "eval" {
  }
}
