// A one-block GPT-style model small enough to read in a test.
func.func @forward(
    %wte: tensor<16x8xf32> {llm.param = #llm.param<name = "wte", init = "normal", scale = 0.02>},
    %g: tensor<8xf32> {llm.param = #llm.param<name = "ln.weight", init = "ones">},
    %b: tensor<8xf32> {llm.param = #llm.param<name = "ln.bias", init = "zeros">},
    %w: tensor<8x8xf32> {llm.param = #llm.param<name = "h.0.mlp.weight", init = "normal", scale = 0.02>},
    %tokens: tensor<2x4xi32> {llmc.name = "tokens"},
    %targets: tensor<2x4xi32> {llmc.name = "targets"}) -> tensor<f32> {
  %x = llm.embedding %wte, %tokens : tensor<16x8xf32>, tensor<2x4xi32>
  %h = llm.block "h.0" -> tensor<2x4x8xf32> {
    %n = llm.layernorm %x, %g, %b {epsilon = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
    %m = llm.matmul %n, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
    %a = llm.gelu %m : tensor<2x4x8xf32>
    %r = llm.add %x, %a : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    llm.yield %r : tensor<2x4x8xf32>
  }
  %logits = llm.matmul %h, %wte {transpose_b} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = llm.cross_entropy %logits, %targets : tensor<2x4x16xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}
