// RUN: llmc-opt %s --split-input-file --verify-diagnostics --llmc-offload-weights="device-bytes=640 layers=split" | FileCheck %s

// --offloaded-layers split: four layers of a 64-byte weight and a 64-byte
// KV-cache pool each, in a 768-byte arena. A 640-byte device takes the
// last three layers off it (768 - 3 · 128 + two 128-byte staging slots of
// a weight and a pool each). Their weights and pools live in host memory
// for both steps: @decode runs them on the host on the pools in place,
// @prefill streams each layer's weight and pool into a slot and copies the
// pool back after the layer's last kernel, before the slot's next occupant
// is copied in.
// CHECK: module attributes {exec.arena_bytes = 640 : i64, exec.host_bytes = {{[0-9]+}} : i64, exec.memory_plan = {arena = 640 : i64, host = {{[0-9]+}} : i64, host_kv_cache = 192 : i64, host_scratch = {{[0-9]+}} : i64, host_weights = 192 : i64, kv_cache = 64 : i64, params = 64 : i64, persistent = 128 : i64, programs = {}, weight_staging = 256 : i64}}
// CHECK-LABEL: exec.program @prefill
// CHECK-DAG: %[[W1:.*]] = exec.buffer offset 640 name "h.1.w" category "param" {exec.host_space}
// CHECK-DAG: %[[K1:.*]] = exec.buffer offset 832 name "kv_cache/kv/h.1.k" category "kv_cache" {exec.host_space}
// CHECK-DAG: %[[W2:.*]] = exec.buffer offset 704 name "h.2.w" category "param" {exec.host_space}
// CHECK-DAG: %[[K2:.*]] = exec.buffer offset 896 name "kv_cache/kv/h.2.k" category "kv_cache" {exec.host_space}
// CHECK-DAG: %[[W3:.*]] = exec.buffer offset 768 name "h.3.w" category "param" {exec.host_space}
// CHECK-DAG: %[[K3:.*]] = exec.buffer offset 960 name "kv_cache/kv/h.3.k" category "kv_cache" {exec.host_space}
// CHECK-DAG: %[[W1S:.*]] = exec.buffer offset 384 category "workspace" : memref<16xf32>
// CHECK-DAG: %[[K1S:.*]] = exec.buffer offset 448 category "workspace" : memref<16xf32>
// CHECK-DAG: %[[W2S:.*]] = exec.buffer offset 512 category "workspace" : memref<16xf32>
// CHECK-DAG: %[[K2S:.*]] = exec.buffer offset 576 category "workspace" : memref<16xf32>
// CHECK-DAG: %[[W3S:.*]] = exec.buffer offset 384 category "workspace" : memref<16xf32>
// CHECK-DAG: %[[K3S:.*]] = exec.buffer offset 448 category "workspace" : memref<16xf32>
// The first two layers' slots are filled at the step's start.
// CHECK:      exec.kernel "copy_to_device"(%[[W1]] : memref<16xf32>) -> (%[[W1S]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "copy_to_device"(%[[K1]] : memref<16xf32>) -> (%[[K1S]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "copy_to_device"(%[[W2]] : memref<16xf32>) -> (%[[W2S]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "copy_to_device"(%[[K2]] : memref<16xf32>) -> (%[[K2S]] : memref<16xf32>)
// CHECK:      exec.kernel "mul"({{.*}}, %[[W1S]] :
// CHECK-NEXT: exec.kernel "cache_write"(%[[K1S]], {{.*}}) -> (%[[K1S]] : memref<16xf32>)
// Layer 1's pool goes back before layer 3 takes its slot.
// CHECK-NEXT: exec.kernel "copy_to_host"(%[[K1S]] : memref<16xf32>) -> (%[[K1]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "copy_to_device"(%[[W3]] : memref<16xf32>) -> (%[[W3S]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "copy_to_device"(%[[K3]] : memref<16xf32>) -> (%[[K3S]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "mul"({{.*}}, %[[W2S]] :
// CHECK-NEXT: exec.kernel "cache_write"(%[[K2S]], {{.*}}) -> (%[[K2S]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "copy_to_host"(%[[K2S]] : memref<16xf32>) -> (%[[K2]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "mul"({{.*}}, %[[W3S]] :
// CHECK-NEXT: exec.kernel "cache_write"(%[[K3S]], {{.*}}) -> (%[[K3S]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "copy_to_host"(%[[K3S]] : memref<16xf32>) -> (%[[K3]] : memref<16xf32>)
// CHECK-NEXT: exec.kernel "matmul"
// @decode runs the same three layers on the host, on their pools in place.
// CHECK-LABEL: exec.program @decode
// CHECK-NOT: exec.kernel "copy_to_device"({{.*}}name
// CHECK: exec.kernel "mul"({{.*}}) -> ({{.*}}) {exec.on_host}
// CHECK-NEXT: exec.kernel "cache_write"(%{{.*}}, {{.*}}) {exec.on_host}
// CHECK-NEXT: exec.kernel "mul"({{.*}}) -> ({{.*}}) {exec.on_host}
// CHECK-NEXT: exec.kernel "cache_write"(%{{.*}}, {{.*}}) {exec.on_host}
// CHECK-NEXT: exec.kernel "mul"({{.*}}) -> ({{.*}}) {exec.on_host}
// CHECK-NEXT: exec.kernel "cache_write"(%{{.*}}, {{.*}}) {exec.on_host}
// CHECK-NEXT: exec.kernel "copy_to_device"
// CHECK-NEXT: exec.kernel "matmul"
module attributes {exec.arena_bytes = 768 : i64, exec.memory_plan = {arena = 768 : i64, kv_cache = 256 : i64, params = 256 : i64, persistent = 512 : i64, programs = {}}} {
  exec.program @prefill kind "prefill" {
    %w0 = exec.buffer offset 0 name "h.0.w" category "param" : memref<16xf32>
    %w1 = exec.buffer offset 64 name "h.1.w" category "param" : memref<16xf32>
    %w2 = exec.buffer offset 128 name "h.2.w" category "param" : memref<16xf32>
    %w3 = exec.buffer offset 192 name "h.3.w" category "param" : memref<16xf32>
    %k0 = exec.buffer offset 256 name "kv_cache/kv/h.0.k" category "kv_cache" : memref<16xf32>
    %k1 = exec.buffer offset 320 name "kv_cache/kv/h.1.k" category "kv_cache" : memref<16xf32>
    %k2 = exec.buffer offset 384 name "kv_cache/kv/h.2.k" category "kv_cache" : memref<16xf32>
    %k3 = exec.buffer offset 448 name "kv_cache/kv/h.3.k" category "kv_cache" : memref<16xf32>
    %pos = exec.buffer offset 512 name "positions" category "input" : memref<16xi32>
    %x = exec.buffer offset 576 category "activation" : memref<16xf32>
    %t = exec.buffer offset 640 category "activation" : memref<16xf32>
    %logits = exec.buffer offset 704 name "logits" category "output" : memref<16xf32>
    exec.kernel "mul"(%x, %w0 : memref<16xf32>, memref<16xf32>) -> (%t : memref<16xf32>)
    exec.kernel "cache_write"(%k0, %t, %pos : memref<16xf32>, memref<16xf32>, memref<16xi32>) -> (%k0 : memref<16xf32>)
    exec.kernel "mul"(%t, %w1 : memref<16xf32>, memref<16xf32>) -> (%x : memref<16xf32>)
    exec.kernel "cache_write"(%k1, %x, %pos : memref<16xf32>, memref<16xf32>, memref<16xi32>) -> (%k1 : memref<16xf32>)
    exec.kernel "mul"(%x, %w2 : memref<16xf32>, memref<16xf32>) -> (%t : memref<16xf32>)
    exec.kernel "cache_write"(%k2, %t, %pos : memref<16xf32>, memref<16xf32>, memref<16xi32>) -> (%k2 : memref<16xf32>)
    exec.kernel "mul"(%t, %w3 : memref<16xf32>, memref<16xf32>) -> (%x : memref<16xf32>)
    exec.kernel "cache_write"(%k3, %x, %pos : memref<16xf32>, memref<16xf32>, memref<16xi32>) -> (%k3 : memref<16xf32>)
    exec.kernel "matmul"(%x, %w0 : memref<16xf32>, memref<16xf32>) -> (%logits : memref<16xf32>)
  }
  exec.program @decode kind "decode" {
    %w0 = exec.buffer offset 0 name "h.0.w" category "param" : memref<16xf32>
    %w1 = exec.buffer offset 64 name "h.1.w" category "param" : memref<16xf32>
    %w2 = exec.buffer offset 128 name "h.2.w" category "param" : memref<16xf32>
    %w3 = exec.buffer offset 192 name "h.3.w" category "param" : memref<16xf32>
    %k0 = exec.buffer offset 256 name "kv_cache/kv/h.0.k" category "kv_cache" : memref<16xf32>
    %k1 = exec.buffer offset 320 name "kv_cache/kv/h.1.k" category "kv_cache" : memref<16xf32>
    %k2 = exec.buffer offset 384 name "kv_cache/kv/h.2.k" category "kv_cache" : memref<16xf32>
    %k3 = exec.buffer offset 448 name "kv_cache/kv/h.3.k" category "kv_cache" : memref<16xf32>
    %pos = exec.buffer offset 512 name "positions" category "input" : memref<16xi32>
    %x = exec.buffer offset 576 category "activation" : memref<16xf32>
    %t = exec.buffer offset 640 category "activation" : memref<16xf32>
    %logits = exec.buffer offset 704 name "logits" category "output" : memref<16xf32>
    exec.kernel "mul"(%x, %w0 : memref<16xf32>, memref<16xf32>) -> (%t : memref<16xf32>)
    exec.kernel "cache_write"(%k0, %t, %pos : memref<16xf32>, memref<16xf32>, memref<16xi32>) -> (%k0 : memref<16xf32>)
    exec.kernel "mul"(%t, %w1 : memref<16xf32>, memref<16xf32>) -> (%x : memref<16xf32>)
    exec.kernel "cache_write"(%k1, %x, %pos : memref<16xf32>, memref<16xf32>, memref<16xi32>) -> (%k1 : memref<16xf32>)
    exec.kernel "mul"(%x, %w2 : memref<16xf32>, memref<16xf32>) -> (%t : memref<16xf32>)
    exec.kernel "cache_write"(%k2, %t, %pos : memref<16xf32>, memref<16xf32>, memref<16xi32>) -> (%k2 : memref<16xf32>)
    exec.kernel "mul"(%t, %w3 : memref<16xf32>, memref<16xf32>) -> (%x : memref<16xf32>)
    exec.kernel "cache_write"(%k3, %x, %pos : memref<16xf32>, memref<16xf32>, memref<16xi32>) -> (%k3 : memref<16xf32>)
    exec.kernel "matmul"(%x, %w0 : memref<16xf32>, memref<16xf32>) -> (%logits : memref<16xf32>)
  }
}
