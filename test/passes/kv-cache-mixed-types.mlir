// RUN: not llmc-opt %s --llmc-kv-cache="program=decode cache-type=int8" 2>&1 | FileCheck %s

// One pool type serves every layer: keys of two types are refused.
// CHECK: error: 'llm.attention' op kv-cache: every layer's keys must have one type, got 'bf16' and 'f32'
func.func @logits(%w: tensor<32x32xf32> {llm.param = #llm.param<name = "wte.weight", init = "normal", scale = 0.02>},
                  %tokens: tensor<2x1xi32> {llmc.name = "tokens", llmc.role = "input"},
                  %positions: tensor<2x1xi32> {llmc.name = "positions", llmc.role = "input"})
    -> (tensor<2x1x32xf32> {llmc.name = "logits", llmc.role = "output"}) {
  %x = llm.embedding %w, %tokens : tensor<32x32xf32>, tensor<2x1xi32>
  %q = llm.reshape %x : tensor<2x1x32xf32> to tensor<2x1x2x16xf32>
  %o, %lse = llm.attention %q, %q, %q {causal, scale = 0.25 : f64} : tensor<2x1x2x16xf32>, tensor<2x1x2x16xf32>
  %h = llm.cast %o : tensor<2x1x2x16xf32> to tensor<2x1x2x16xbf16>
  %o2, %lse2 = llm.attention %h, %h, %h {causal, scale = 0.25 : f64} : tensor<2x1x2x16xbf16>, tensor<2x1x2x16xbf16>
  %f = llm.cast %o2 : tensor<2x1x2x16xbf16> to tensor<2x1x2x16xf32>
  %r = llm.reshape %f : tensor<2x1x2x16xf32> to tensor<2x1x32xf32>
  %logits = llm.matmul %r, %w {transpose_b} : tensor<2x1x32xf32>, tensor<32x32xf32> -> tensor<2x1x32xf32>
  return %logits : tensor<2x1x32xf32>
}
