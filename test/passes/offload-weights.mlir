// RUN: llmc-opt %s --llmc-offload-weights="device-bytes=400" | FileCheck %s
// RUN: llmc-opt %s --llmc-offload-weights="device-bytes=448" | FileCheck %s --check-prefix=FITS
// RUN: not llmc-opt %s --llmc-offload-weights="device-bytes=300" 2>&1 | FileCheck %s --check-prefix=TOO-SMALL

// Four layers of one 64-byte weight each. A 400-byte device takes the
// last three layers' weights off the arena (448 - 3·64 + two 64-byte
// staging slots = 384 bytes; two layers would save nothing: 448 - 2·64 +
// 2·64). Host offsets follow the new arena; the activations above the
// moved weights shift down by their 192 bytes; the slots end the arena.
// CHECK: module attributes {exec.arena_bytes = 384 : i64, exec.host_bytes = 192 : i64, exec.memory_plan = {arena = 384 : i64, host = 192 : i64, host_weights = 192 : i64, params = 128 : i64, persistent = 128 : i64, programs = {}, weight_staging = 128 : i64}}
// CHECK-LABEL: exec.program @decode
// CHECK-DAG: %[[WTE:.*]] = exec.buffer offset 0 name "wte" category "param"
// CHECK-DAG: %[[H0:.*]] = exec.buffer offset 64 name "h.0.w" category "param" : memref<16xf32>
// CHECK-DAG: %[[H1:.*]] = exec.buffer offset 384 name "h.1.w" category "param" {exec.host_space}
// CHECK-DAG: %[[S1:.*]] = exec.buffer offset 256 category "workspace" : memref<16xf32>
// CHECK-DAG: %[[H2:.*]] = exec.buffer offset 448 name "h.2.w" category "param" {exec.host_space}
// CHECK-DAG: %[[S2:.*]] = exec.buffer offset 320 category "workspace" : memref<16xf32>
// CHECK-DAG: %[[H3:.*]] = exec.buffer offset 512 name "h.3.w" category "param" {exec.host_space}
// CHECK-DAG: %[[S3:.*]] = exec.buffer offset 256 category "workspace" : memref<8xf32>
// CHECK-DAG: %[[A:.*]] = exec.buffer offset 128 : memref<16xf32>
// CHECK-DAG: %[[B:.*]] = exec.buffer offset 192 : memref<16xf32>
// The first two streamed layers arrive before the step's first kernel...
// CHECK:      exec.kernel "copy_to_device"(%[[H1]] : memref<16xf32>) -> (%[[S1]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "copy_to_device"(%[[H2]] : memref<16xf32>) -> (%[[S2]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "mul"(%[[A]], %[[WTE]] :
// CHECK-NEXT: exec.kernel "mul"(%[[B]], %[[H0]] :
// CHECK-NEXT: exec.kernel "mul"(%[[A]], %[[S1]] :
// ... and the third, into the first's slot, right after its last reader.
// CHECK-NEXT: exec.kernel "copy_to_device"(%[[H3]] : memref<8xf32>) -> (%[[S3]] : memref<8xf32>)
// CHECK-NEXT: exec.kernel "mul"(%[[B]], %[[S2]] :
// CHECK-NEXT: exec.kernel "add"(%[[A]], %[[S3]] :

// An arena that fits is left as it is.
// FITS: module attributes {exec.arena_bytes = 448 : i64, exec.memory_plan = {arena = 448 : i64, params = 320 : i64, persistent = 320 : i64, programs = {}}}

// TOO-SMALL: error: --device-memory 0.00 MiB (300 bytes): the generation steps need 0.00 MiB (448 bytes) of device memory, and at least 0.00 MiB (320 bytes) with every decoder layer's weights (4 layers) in host memory
module attributes {exec.arena_bytes = 448 : i64, exec.memory_plan = {arena = 448 : i64, params = 320 : i64, persistent = 320 : i64, programs = {}}} {
  exec.program @decode kind "decode" {
    %0 = exec.buffer offset 0 name "wte" category "param" : memref<16xf32>
    %1 = exec.buffer offset 64 name "h.0.w" category "param" : memref<16xf32>
    %2 = exec.buffer offset 128 name "h.1.w" category "param" : memref<16xf32>
    %3 = exec.buffer offset 192 name "h.2.w" category "param" : memref<16xf32>
    %4 = exec.buffer offset 256 name "h.3.w" category "param" : memref<8xf32>
    %5 = exec.buffer offset 320 category "activation" : memref<16xf32>
    %6 = exec.buffer offset 384 category "activation" : memref<16xf32>
    exec.kernel "mul"(%5, %0 : memref<16xf32>, memref<16xf32>) -> (%6 : memref<16xf32>)
    exec.kernel "mul"(%6, %1 : memref<16xf32>, memref<16xf32>) -> (%5 : memref<16xf32>)
    exec.kernel "mul"(%5, %2 : memref<16xf32>, memref<16xf32>) -> (%6 : memref<16xf32>)
    exec.kernel "mul"(%6, %3 : memref<16xf32>, memref<16xf32>) -> (%5 : memref<16xf32>)
    exec.kernel "add"(%5, %4 : memref<16xf32>, memref<8xf32>) -> (%6 : memref<16xf32>)
  }
}

