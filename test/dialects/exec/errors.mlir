// RUN: llmc-opt %s -split-input-file -verify-diagnostics
// Every exec verifier diagnostic.

// expected-error @+1 {{needs a non-empty kind}}
exec.program @p kind "" {
}

// -----

exec.program @p kind "train_step" {
  // expected-error @+1 {{waits for event 3 before any record_event of it}}
  exec.wait_event 3 stream 0
}

// -----

exec.program @p kind "train_step" {
  // expected-error @+1 {{unknown category 'weights'}}
  %b = exec.buffer offset 0 category "weights" : memref<4xf32>
}

// -----

exec.program @p kind "train_step" {
  // expected-error @+1 {{buffer must be a static, identity-layout memref}}
  %b = exec.buffer offset 0 : memref<4x4xf32, strided<[1, 4]>>
}

// -----

exec.program @p kind "train_step" {
  // expected-error @+1 {{offset must be >= 0}}
  %b = exec.buffer offset -64 : memref<4xf32>
}

// -----

exec.program @p kind "train_step" {
  // expected-error @+1 {{offset 2 is not aligned to the 4-byte element size}}
  %b = exec.buffer offset 2 : memref<4xf32>
}

// -----

module attributes {exec.arena_bytes = 64 : i64} {
  exec.program @p kind "train_step" {
    // expected-error @+1 {{bytes [32, 96) exceed the arena of 64 bytes}}
    %b = exec.buffer offset 32 : memref<16xf32>
  }
}

// -----

exec.program @p kind "train_step" {
  // expected-error @+1 {{name must not be empty}}
  %b = exec.buffer offset 0 name "" : memref<4xf32>
}

// -----

exec.program @p kind "train_step" {
  %b = exec.buffer offset 0 : memref<4xf32>
  // expected-error @+1 {{needs a kernel name}}
  exec.kernel ""() -> (%b : memref<4xf32>)
}

// -----

exec.program @p kind "train_step" {
  %b = exec.buffer offset 0 : memref<4xf32>
  // expected-error @+1 {{kernel 'gelu' writes no output}}
  exec.kernel "gelu"(%b : memref<4xf32>) -> ()
}

// -----

exec.program @p kind "train_step" {
  %b = exec.buffer offset 0 : memref<4xf32>
  // expected-error @+1 {{stream must be >= 0}}
  exec.kernel "fill"() -> (%b : memref<4xf32>) {value = 0.0 : f64, stream = -1 : i64}
}

// -----

exec.program @p kind "train_step" {
  %b = exec.buffer offset 0 : memref<4xf32>
  // expected-error @+1 {{attribute 'mode' must be an integer, float or integer array}}
  exec.kernel "fill"() -> (%b : memref<4xf32>) {mode = "fast"}
}

// -----

exec.program @p kind "train_step" {
  %b = exec.buffer offset 0 : memref<4xf32>
  // expected-error @+1 {{'exec.fault_site' must be a unit attribute}}
  exec.kernel "fill"() -> (%b : memref<4xf32>) {value = 0.0 : f64, exec.fault_site = 1 : i64}
}

// -----

exec.program @p kind "train_step" {
  %b = exec.buffer offset 0 : memref<4xf32>
  // expected-error @+1 {{needs a module attribute 'exec.mesh' to resolve axis 'dp'}}
  exec.all_reduce %b -> %b group ["dp"] : memref<4xf32> -> memref<4xf32>
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{mesh has no axis 'tp'}}
    exec.all_reduce %b -> %b group ["tp"] : memref<4xf32> -> memref<4xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{group must name at least one mesh axis}}
    exec.all_reduce %b -> %b group [] : memref<4xf32> -> memref<4xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{group entries must be axis names}}
    exec.all_reduce %b -> %b group [1] : memref<4xf32> -> memref<4xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{axis 'dp' appears twice in the group}}
    exec.all_reduce %b -> %b group ["dp", "dp"] : memref<4xf32> -> memref<4xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{unknown reduction 'prod'}}
    exec.all_reduce %b -> %b group ["dp"] {reduction = "prod"} : memref<4xf32> -> memref<4xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{root 2 is outside the group of 2}}
    exec.broadcast %b -> %b group ["dp"] {root = 2 : i64} : memref<4xf32> -> memref<4xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    %c = exec.buffer offset 64 : memref<4xbf16>
    // expected-error @+1 {{input and output element types differ}}
    exec.all_reduce %b -> %c group ["dp"] : memref<4xf32> -> memref<4xbf16>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    %c = exec.buffer offset 64 : memref<8xf32>
    // expected-error @+1 {{input and output shapes must match}}
    exec.all_reduce %b -> %c group ["dp"] : memref<4xf32> -> memref<8xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4x2xf32>
    %c = exec.buffer offset 64 : memref<8x3xf32>
    // expected-error @+1 {{input and output may differ only in dimension 0}}
    exec.all_gather %b -> %c group ["dp"] : memref<4x2xf32> -> memref<8x3xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    %c = exec.buffer offset 64 : memref<4xf32>
    // expected-error @+1 {{output dim 0 must be 8 (input × group size 2), got 4}}
    exec.all_gather %b -> %c group ["dp"] : memref<4xf32> -> memref<4xf32>
  }
}

// -----

module attributes {exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    %c = exec.buffer offset 64 : memref<4xf32>
    // expected-error @+1 {{input dim 0 must be 8 (output × group size 2), got 4}}
    exec.reduce_scatter %b -> %c group ["dp"] : memref<4xf32> -> memref<4xf32>
  }
}

// -----

module attributes {exec.mesh = {tp = 4 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<6xf32>
    // expected-error @+1 {{dim 0 (6) must be equal on both sides and divisible by the group size 4}}
    exec.all_to_all %b -> %b group ["tp"] : memref<6xf32> -> memref<6xf32>
  }
}

// -----

module attributes {exec.mesh = {pp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{shift 2 must be non-zero and smaller than the size of axis 'pp' (2)}}
    exec.send %b axis "pp" shift 2 tag 0 : memref<4xf32>
  }
}

// -----

module attributes {exec.mesh = {pp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{channel 7 is not 0 (shared) or a transfer channel, 1 to 6}}
    exec.recv %b axis "pp" shift 1 tag 0 {channel = 7 : i64} : memref<4xf32>
  }
}

// -----

module attributes {exec.mesh = {pp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %b = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{mesh has no axis 'dp'}}
    exec.recv %b axis "dp" shift 1 tag 0 : memref<4xf32>
  }
}

// -----

// Host memory (llmc-offload-optimizer): numbered after the arena, declared
// by the module, kept apart from device kernels and collectives.
module attributes {exec.arena_bytes = 64 : i64} {
  exec.program @p kind "train_step" {
    // expected-error @+1 {{is in the host space, but the module has no 'exec.host_bytes'}}
    %h = exec.buffer offset 64 {exec.host_space} : memref<4xf32>
  }
}

// -----

module attributes {exec.arena_bytes = 64 : i64, exec.host_bytes = 16 : i64} {
  exec.program @p kind "train_step" {
    // expected-error @+1 {{bytes [32, 48) exceed the host space [64, 80)}}
    %h = exec.buffer offset 32 {exec.host_space} : memref<4xf32>
  }
}

// -----

module attributes {exec.arena_bytes = 64 : i64, exec.host_bytes = 64 : i64} {
  exec.program @p kind "train_step" {
    %d = exec.buffer offset 0 : memref<4xf32>
    %h = exec.buffer offset 64 {exec.host_space} : memref<4xf32>
    // expected-error @+1 {{input 0 is in device memory, but 'adamw' reads host memory}}
    exec.kernel "adamw" (%d : memref<4xf32>) -> (%h : memref<4xf32>) {exec.on_host}
  }
}

// -----

module attributes {exec.arena_bytes = 64 : i64, exec.host_bytes = 64 : i64} {
  exec.program @p kind "train_step" {
    %d = exec.buffer offset 0 : memref<4xf32>
    %h = exec.buffer offset 64 {exec.host_space} : memref<4xf32>
    // expected-error @+1 {{input 0 is in host memory, but 'scale' reads device memory}}
    exec.kernel "scale" (%h : memref<4xf32>) -> (%d : memref<4xf32>)
  }
}

// -----

module attributes {exec.arena_bytes = 64 : i64, exec.host_bytes = 64 : i64} {
  exec.program @p kind "train_step" {
    %d = exec.buffer offset 0 : memref<4xf32>
    %h = exec.buffer offset 64 {exec.host_space} : memref<4xf32>
    // expected-error @+1 {{output 0 is in device memory, but 'copy_to_host' writes host memory}}
    exec.kernel "copy_to_host" (%d : memref<4xf32>) -> (%d : memref<4xf32>)
  }
}

// -----

module attributes {exec.arena_bytes = 64 : i64, exec.host_bytes = 64 : i64} {
  exec.program @p kind "train_step" {
    %d = exec.buffer offset 0 : memref<4xf32>
    %h = exec.buffer offset 64 {exec.host_space} : memref<4xf32>
    // expected-error @+1 {{'copy_to_device' runs on the device, not the host}}
    exec.kernel "copy_to_device" (%h : memref<4xf32>) -> (%d : memref<4xf32>) {exec.on_host}
  }
}

// -----

module attributes {exec.arena_bytes = 64 : i64, exec.host_bytes = 64 : i64, exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %h = exec.buffer offset 64 {exec.host_space} : memref<4xf32>
    // expected-error @+1 {{communicates a buffer in host memory; only a collective marked exec.on_host moves host memory}}
    exec.all_reduce %h -> %h group ["dp"] : memref<4xf32> -> memref<4xf32>
  }
}

// -----

module attributes {exec.arena_bytes = 64 : i64, exec.host_bytes = 64 : i64, exec.mesh = {dp = 2 : i64}} {
  exec.program @p kind "train_step" {
    %d = exec.buffer offset 0 : memref<4xf32>
    // expected-error @+1 {{runs on the host but communicates a buffer in device memory}}
    exec.all_reduce %d -> %d group ["dp"] {exec.on_host} : memref<4xf32> -> memref<4xf32>
  }
}
