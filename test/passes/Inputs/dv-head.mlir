// A model whose head is an untied [D, V] weight (not transposed): padding
// its vocabulary pads the weight's columns.
module attributes {llmc.model = {family = "gpt2", vocab_size = 100 : i64}} {
func.func @forward(%w: tensor<16x100xf32> {llm.param = #llm.param<name = "lm_head.weight", init = "normal", scale = 0.02>},
                   %h: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %l = llm.matmul %h, %w : tensor<2x4x16xf32>, tensor<16x100xf32> -> tensor<2x4x100xf32>
  %loss = llm.cross_entropy %l, %targets : tensor<2x4x100xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}
}
