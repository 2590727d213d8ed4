// RUN: not llmc-opt %s --llmc-offload-weights="device-bytes=400" 2>&1 | FileCheck %s

// A weight a collective touches cannot be streamed: only kernels read
// through the staging slots.
// CHECK: error: 'exec.all_reduce' op reads weight 'h.3.w', which --device-memory keeps in host memory; only kernels may
module attributes {exec.mesh = {tp = 2 : i64}, exec.mesh_axes = ["tp"], exec.arena_bytes = 448 : i64, exec.memory_plan = {arena = 448 : i64, params = 320 : i64, persistent = 320 : i64, programs = {}}} {
  exec.program @decode kind "decode" {
    %0 = exec.buffer offset 0 name "wte" category "param" : memref<16xf32>
    %1 = exec.buffer offset 64 name "h.0.w" category "param" : memref<16xf32>
    %2 = exec.buffer offset 128 name "h.1.w" category "param" : memref<16xf32>
    %3 = exec.buffer offset 192 name "h.2.w" category "param" : memref<16xf32>
    %4 = exec.buffer offset 256 name "h.3.w" category "param" : memref<16xf32>
    %5 = exec.buffer offset 320 category "activation" : memref<16xf32>
    exec.all_reduce %4 -> %5 group ["tp"] : memref<16xf32> -> memref<16xf32>
  }
}
