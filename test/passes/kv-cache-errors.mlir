// RUN: not llmc-opt %s -split-input-file --llmc-kv-cache 2>&1 | FileCheck %s

// What llmc-kv-cache refuses, each with the op or function it concerns.

// CHECK: error: kv-cache: @logits must take `tokens` and `positions` inputs
func.func @logits(%w: tensor<32x32xf32> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 0.02>},
                  %tokens: tensor<2x8xi32> {llmc.name = "tokens", llmc.role = "input"})
    -> tensor<2x8x32xf32> {
  %x = llm.embedding %w, %tokens : tensor<32x32xf32>, tensor<2x8xi32>
  %logits = llm.matmul %x, %w {transpose_b} : tensor<2x8x32xf32>, tensor<32x32xf32> -> tensor<2x8x32xf32>
  return %logits : tensor<2x8x32xf32>
}

// -----

// CHECK: error: 'llm.attention' op kv-cache: only causal attention without segment ids can read a cache
func.func @logits(%w: tensor<32x32xf32> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 0.02>},
                  %tokens: tensor<2x8xi32> {llmc.name = "tokens", llmc.role = "input"},
                  %positions: tensor<2x8xi32> {llmc.name = "positions", llmc.role = "input"})
    -> tensor<2x8x32xf32> {
  %x = llm.embedding %w, %tokens : tensor<32x32xf32>, tensor<2x8xi32>
  %q = llm.reshape %x : tensor<2x8x32xf32> to tensor<2x8x2x16xf32>
  %o, %lse = llm.attention %q, %q, %q {scale = 0.25 : f64} : tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
  %r = llm.reshape %o : tensor<2x8x2x16xf32> to tensor<2x8x32xf32>
  %logits = llm.matmul %r, %w {transpose_b} : tensor<2x8x32xf32>, tensor<32x32xf32> -> tensor<2x8x32xf32>
  return %logits : tensor<2x8x32xf32>
}

// -----

// CHECK: error: kv-cache: no @logits (run llmc-inference-entry-points first)
func.func @train_step() {
  return
}
