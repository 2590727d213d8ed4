// RUN: llmc-opt %s --split-input-file --verify-diagnostics --llmc-offload-weights="device-bytes=520 layers=host" | FileCheck %s

// --offloaded-layers host: two layers of a 64-byte weight and a 64-byte
// KV-cache pool each. A 520-byte device takes the last layer off the arena
// (640 - 64 - 64 = 512; no staging slots), and it runs on the host: its
// weight and pool move to the host space ([512, 640)), and its kernels run
// there on host mirrors of the device buffers they touch (from 640: the
// lowest such device offset, the positions at 192, maps to 640).
// CHECK: module attributes {exec.arena_bytes = 512 : i64, exec.host_bytes = 384 : i64, exec.memory_plan = {arena = 512 : i64, host = 384 : i64, host_kv_cache = 64 : i64, host_scratch = 256 : i64, host_weights = 64 : i64, kv_cache = 64 : i64, params = 128 : i64, persistent = 192 : i64, programs = {}, weight_staging = 0 : i64}}
// CHECK-DAG: %[[W1:.*]] = exec.buffer offset 512 name "h.1.w" category "param" {exec.host_space}
// CHECK-DAG: %[[K1:.*]] = exec.buffer offset 576 name "kv_cache/kv/h.1.k" category "kv_cache" {exec.host_space}
// CHECK-DAG: %[[K0:.*]] = exec.buffer offset 64 name "kv_cache/kv/h.0.k" category "kv_cache" :
// CHECK-DAG: %[[POS:.*]] = exec.buffer offset 192 name "positions" category "input"
// CHECK-DAG: %[[POSH:.*]] = exec.buffer offset 640 category "workspace" {exec.host_space} : memref<16xi32>
// CHECK-DAG: %[[X:.*]] = exec.buffer offset 320 : memref<16xf32>
// CHECK-DAG: %[[XH:.*]] = exec.buffer offset 768 category "workspace" {exec.host_space} : memref<16xf32>
// CHECK-DAG: %[[TH:.*]] = exec.buffer offset 832 category "workspace" {exec.host_space} : memref<16xf32>
// CHECK-DAG: %[[YH:.*]] = exec.buffer offset 704 category "workspace" {exec.host_space} : memref<16xf32>
// CHECK-DAG: %[[YVIEW:.*]] = exec.buffer offset 256 : memref<4x4xf32>
// CHECK-DAG: %[[YVIEWH:.*]] = exec.buffer offset 704 category "workspace" {exec.host_space} : memref<4x4xf32>
// Layer 0 stays on the device.
// CHECK:      exec.kernel "mul"
// CHECK-NEXT: exec.kernel "cache_write"(%[[K0]]
// What layer 1 reads before writing: its input and the positions...
// CHECK-NEXT: exec.kernel "copy_to_host"(%[[X]] : memref<16xf32>) -> (%[[XH]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "copy_to_host"(%[[POS]] : memref<16xi32>) -> (%[[POSH]] : memref<16xi32>)
// ... its kernels on the host, the temporary it writes first not copied ...
// CHECK-NEXT: exec.kernel "mul"(%[[XH]], %[[W1]] : memref<16xf32>, memref<16xf32>) -> (%[[TH]] : memref<16xf32>) {exec.on_host}
// CHECK-NEXT: exec.kernel "cache_write"(%[[K1]], %[[TH]], %[[POSH]] : {{.*}}) -> (%[[K1]] : memref<16xf32>) {exec.on_host}
// CHECK-NEXT: exec.kernel "fma"(%[[TH]], %[[W1]], %[[XH]] : {{.*}}) -> (%[[YH]] : memref<16xf32>) {exec.on_host}
// ... and back, what the head reads of its output, through the view it reads.
// CHECK-NEXT: exec.kernel "copy_to_device"(%[[YVIEWH]] : memref<4x4xf32>) -> (%[[YVIEW]] : memref<4x4xf32>)
// CHECK-NEXT: exec.kernel "matmul"(%[[YVIEW]],
module attributes {exec.arena_bytes = 640 : i64, exec.memory_plan = {arena = 640 : i64, kv_cache = 128 : i64, params = 192 : i64, persistent = 320 : i64, programs = {}}} {
  exec.program @decode kind "decode" {
    %0 = exec.buffer offset 0 name "h.0.w" category "param" : memref<16xf32>
    %1 = exec.buffer offset 64 name "h.1.w" category "param" : memref<16xf32>
    %2 = exec.buffer offset 128 name "kv_cache/kv/h.0.k" category "kv_cache" : memref<16xf32>
    %3 = exec.buffer offset 192 name "kv_cache/kv/h.1.k" category "kv_cache" : memref<16xf32>
    %4 = exec.buffer offset 256 name "wte" category "param" : memref<16xf32>
    %5 = exec.buffer offset 320 name "positions" category "input" : memref<16xi32>
    %6 = exec.buffer offset 384 category "activation" : memref<16xf32>
    %7 = exec.buffer offset 448 category "activation" : memref<16xf32>
    %8 = exec.buffer offset 512 category "activation" : memref<16xf32>
    %9 = exec.buffer offset 384 category "activation" : memref<4x4xf32>
    %10 = exec.buffer offset 576 name "logits" category "output" : memref<16xf32>
    exec.kernel "mul"(%6, %0 : memref<16xf32>, memref<16xf32>) -> (%7 : memref<16xf32>)
    exec.kernel "cache_write"(%2, %7, %5 : memref<16xf32>, memref<16xf32>, memref<16xi32>) -> (%2 : memref<16xf32>)
    exec.kernel "mul"(%7, %1 : memref<16xf32>, memref<16xf32>) -> (%8 : memref<16xf32>)
    exec.kernel "cache_write"(%3, %8, %5 : memref<16xf32>, memref<16xf32>, memref<16xi32>) -> (%3 : memref<16xf32>)
    exec.kernel "fma"(%8, %1, %7 : memref<16xf32>, memref<16xf32>, memref<16xf32>) -> (%6 : memref<16xf32>)
    exec.kernel "matmul"(%9, %4 : memref<4x4xf32>, memref<16xf32>) -> (%10 : memref<16xf32>)
  }
}

// -----

// Tensor parallelism's all-reduce inside the layer runs on the host too, on
// the host mirrors of its input and output (the host transport's).
// CHECK: exec.mesh = {tp = 2 : i64}
// CHECK: %[[W:.*]] = exec.buffer offset 512 name "h.1.w" category "param" {exec.host_space}
// CHECK: %[[OUT:.*]] = exec.buffer offset 640 category "workspace" {exec.host_space}
// CHECK: %[[IN:.*]] = exec.buffer offset 704 category "workspace" {exec.host_space}
// CHECK: %[[SUM:.*]] = exec.buffer offset 768 category "workspace" {exec.host_space}
// CHECK: exec.kernel "copy_to_host"({{.*}}) -> (%[[IN]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "mul"(%[[IN]], %[[W]] : {{.*}}) -> (%[[SUM]] : memref<16xf32>) {exec.on_host}
// CHECK-NEXT: exec.all_reduce %[[SUM]] -> %[[OUT]] group ["tp"] {exec.on_host}
// CHECK-NEXT: exec.kernel "cache_write"({{.*}}, %[[OUT]] : {{.*}}) {exec.on_host}
module attributes {exec.mesh = {tp = 2 : i64}, exec.mesh_axes = ["tp"], exec.arena_bytes = 640 : i64, exec.memory_plan = {arena = 640 : i64, kv_cache = 128 : i64, params = 192 : i64, persistent = 320 : i64, programs = {}}} {
  exec.program @decode kind "decode" {
    %0 = exec.buffer offset 0 name "h.0.w" category "param" : memref<16xf32>
    %1 = exec.buffer offset 64 name "h.1.w" category "param" : memref<16xf32>
    %2 = exec.buffer offset 128 name "kv_cache/kv/h.0.k" category "kv_cache" : memref<16xf32>
    %3 = exec.buffer offset 192 name "kv_cache/kv/h.1.k" category "kv_cache" : memref<16xf32>
    %6 = exec.buffer offset 384 category "activation" : memref<16xf32>
    %7 = exec.buffer offset 448 category "activation" : memref<16xf32>
    %8 = exec.buffer offset 512 category "activation" : memref<16xf32>
    exec.kernel "mul"(%7, %1 : memref<16xf32>, memref<16xf32>) -> (%8 : memref<16xf32>)
    exec.all_reduce %8 -> %6 group ["tp"] : memref<16xf32> -> memref<16xf32>
    exec.kernel "cache_write"(%3, %6 : memref<16xf32>, memref<16xf32>) -> (%3 : memref<16xf32>)
  }
}

// -----

// A transfer between pipeline stages cannot run on the host.
module attributes {exec.mesh = {pp = 2 : i64}, exec.mesh_axes = ["pp"], exec.arena_bytes = 640 : i64, exec.memory_plan = {arena = 640 : i64, kv_cache = 128 : i64, params = 192 : i64, persistent = 320 : i64, programs = {}}} {
  exec.program @decode kind "decode" {
    %0 = exec.buffer offset 0 name "h.0.w" category "param" : memref<16xf32>
    %1 = exec.buffer offset 64 name "h.1.w" category "param" : memref<16xf32>
    %2 = exec.buffer offset 128 name "kv_cache/kv/h.0.k" category "kv_cache" : memref<16xf32>
    %3 = exec.buffer offset 192 name "kv_cache/kv/h.1.k" category "kv_cache" : memref<16xf32>
    %6 = exec.buffer offset 384 category "activation" : memref<16xf32>
    %7 = exec.buffer offset 448 category "activation" : memref<16xf32>
    %8 = exec.buffer offset 512 category "activation" : memref<16xf32>
    exec.kernel "mul"(%7, %1 : memref<16xf32>, memref<16xf32>) -> (%8 : memref<16xf32>)
    // expected-error @+1 {{'exec.send' op runs among the layers --offloaded-layers host keeps on the host, where it cannot run (a copy or a transfer between pipeline stages: use --offloaded-layers stream)}}
    exec.send %8 axis "pp" shift 1 tag 0 : memref<16xf32>
    exec.kernel "cache_write"(%3, %8 : memref<16xf32>, memref<16xf32>) -> (%3 : memref<16xf32>)
  }
}
