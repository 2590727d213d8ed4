// RUN: llmc-opt %s -split-input-file --llmc-pad-vocab="multiple=64" --verify-diagnostics
// RUN: not llmc-opt %s -split-input-file --llmc-pad-vocab="multiple=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// Every diagnostic of llmc-pad-vocab.

// ZERO: error: pad-vocab: multiple (--vocab-multiple) must be >= 1, got 0

// The head's weight read by anything but the head and a tied lookup.
func.func @forward(%w: tensor<100x16xf32> {llm.param = #llm.param<name = "lm_head.weight", init = "normal", scale = 0.02>},
                   %h: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> (tensor<f32>, tensor<100x16xf32>) {
  %l = llm.matmul %h, %w {transpose_b} : tensor<2x4x16xf32>, tensor<100x16xf32> -> tensor<2x4x100xf32>
  %loss = llm.cross_entropy %l, %targets : tensor<2x4x100xf32>, tensor<2x4xi32>
  // expected-error @+1 {{'llm.scale' op pad-vocab: 'lm_head.weight' is the LM head's weight and is read here too, where padding its 100 classes to 128 would change the result; compile with --vocab-multiple 1}}
  %s = llm.scale %w {factor = 2.0 : f64} : tensor<100x16xf32>
  return %loss, %s : tensor<f32>, tensor<100x16xf32>
}

// -----

// The vocabulary is padded before any layout splits it.
func.func @forward(%w: tensor<100x16xf32> {llm.param = #llm.param<name = "lm_head.weight", init = "normal", scale = 0.02>, llmc.shard = {global_shape = array<i64: 200, 16>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 0 : i64}]}},
                   %h: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'llm.matmul' op pad-vocab: 'lm_head.weight' is split already; the vocabulary is padded before any layout}}
  %l = llm.matmul %h, %w {transpose_b} : tensor<2x4x16xf32>, tensor<100x16xf32> -> tensor<2x4x100xf32>
  %loss = llm.cross_entropy %l, %targets : tensor<2x4x100xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}
