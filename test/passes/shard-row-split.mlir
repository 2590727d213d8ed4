// RUN: llmc-opt %s -split-input-file -verify-diagnostics --llmc-shard="mesh=dp=2"
// The data-parallel sharding rule of each op (RowSplitOpInterface): every
// way an op can refuse to run on a rank's block of batch rows.

func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<2x4xi32>) -> tensor<f32> {
  %e = llm.embedding %w, %x : tensor<4x4xf32>, tensor<2x4xi32>
  // expected-error @+1 {{moves the batch dimension; it cannot be split over ranks}}
  %m = llm.transpose %e {permutation = array<i64: 1, 0, 2>} : tensor<2x4x4xf32> to tensor<4x2x4xf32>
  %n = llm.global_norm %w : tensor<4x4xf32>
  return %n : tensor<f32>
}

// -----

func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<2x4xi32>) -> tensor<f32> {
  %e = llm.embedding %w, %x : tensor<4x4xf32>, tensor<2x4xi32>
  // expected-error @+1 {{concatenates along the batch dimension; it cannot be split}}
  %c = llm.concat %e, %e {dim = 0 : i64} : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<4x4x4xf32>
  %n = llm.global_norm %w : tensor<4x4xf32>
  return %n : tensor<f32>
}

// -----

func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<2x4xi32>) -> tensor<f32> {
  %e = llm.embedding %w, %x : tensor<4x4xf32>, tensor<2x4xi32>
  // expected-error @+1 {{cuts the batch dimension; it cannot be split over ranks}}
  %s = llm.slice %e {offsets = array<i64: 1, 0, 0>} : tensor<2x4x4xf32> to tensor<1x4x4xf32>
  %n = llm.global_norm %w : tensor<4x4xf32>
  return %n : tensor<f32>
}

// -----

func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<2x4xi32>) -> tensor<f32> {
  %e = llm.embedding %w, %x : tensor<4x4xf32>, tensor<2x4xi32>
  // expected-error @+1 {{cuts the batch dimension; it cannot be split over ranks}}
  %p = llm.pad %e {offsets = array<i64: 0, 0, 0>} : tensor<2x4x4xf32> to tensor<3x4x4xf32>
  %n = llm.global_norm %w : tensor<4x4xf32>
  return %n : tensor<f32>
}

// -----

func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<2x4xi32>) -> tensor<f32> {
  %e = llm.embedding %w, %x : tensor<4x4xf32>, tensor<2x4xi32>
  %r = llm.reshape %e : tensor<2x4x4xf32> to tensor<8x4xf32>
  // expected-error @+1 {{uses a batch-derived value as its table}}
  %t = llm.embedding %r, %x : tensor<8x4xf32>, tensor<2x4xi32>
  %n = llm.global_norm %w : tensor<4x4xf32>
  return %n : tensor<f32>
}

// -----

func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<2x4xi32>) -> tensor<f32> {
  %e = llm.embedding %w, %x : tensor<4x4xf32>, tensor<2x4xi32>
  %r = llm.reshape %e : tensor<2x4x4xf32> to tensor<8x4xf32>
  // expected-error @+1 {{contracts over the batch dimension; it cannot be split}}
  %g = llm.matmul %r, %r {transpose_a} : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  %n = llm.global_norm %w : tensor<4x4xf32>
  return %n : tensor<f32>
}

// -----

func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<2x4xi32>) -> tensor<f32> {
  %e = llm.embedding %w, %x : tensor<4x4xf32>, tensor<2x4xi32>
  %r = llm.reshape %e : tensor<2x4x4xf32> to tensor<8x4xf32>
  // expected-error @+1 {{multiplies a replicated value by a batch-derived one}}
  %g = llm.matmul %w, %r {transpose_b} : tensor<4x4xf32>, tensor<8x4xf32> -> tensor<4x8xf32>
  %n = llm.global_norm %w : tensor<4x4xf32>
  return %n : tensor<f32>
}

// -----

func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<2x4xi32>) -> tensor<f32> {
  %e = llm.embedding %w, %x : tensor<4x4xf32>, tensor<2x4xi32>
  %r = llm.reshape %e : tensor<2x4x4xf32> to tensor<8x4xf32>
  %q = llm.reshape %e : tensor<2x4x4xf32> to tensor<4x8xf32>
  // expected-error @+1 {{uses a batch-derived matrix as a shared weight}}
  %g = llm.matmul %r, %q : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %n = llm.global_norm %w : tensor<4x4xf32>
  return %n : tensor<f32>
}

// -----

func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %x: tensor<4x4xi32>) -> tensor<f32> {
  %e = llm.embedding %w, %x : tensor<4x4xf32>, tensor<4x4xi32>
  // expected-error @+1 {{reshapes the batch dimension away ('tensor<2x4x4xf32>' to 'tensor<1x64xf32>'); it cannot be split}}
  %r = llm.reshape %e : tensor<4x4x4xf32> to tensor<1x64xf32>
  %n = llm.global_norm %w : tensor<4x4xf32>
  return %n : tensor<f32>
}
