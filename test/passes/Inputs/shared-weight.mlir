// One weight read by the matmuls of two blocks (a weight-shared layer).
func.func @forward(
    %wte: tensor<16x8xf32> {llm.param = #llm.param<name = "wte", init = "normal", scale = 0.02>},
    %w: tensor<8x8xf32> {llm.param = #llm.param<name = "shared.weight", init = "normal", scale = 0.02>},
    %tokens: tensor<2x4xi32> {llmc.name = "tokens"},
    %targets: tensor<2x4xi32> {llmc.name = "targets"}) -> tensor<f32> {
  %x = llm.embedding %wte, %tokens : tensor<16x8xf32>, tensor<2x4xi32>
  %h0 = llm.block "h.0" -> tensor<2x4x8xf32> {
    %m = llm.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
    llm.yield %m : tensor<2x4x8xf32>
  }
  %h1 = llm.block "h.1" -> tensor<2x4x8xf32> {
    %m = llm.matmul %h0, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
    llm.yield %m : tensor<2x4x8xf32>
  }
  %logits = llm.matmul %h1, %wte {transpose_b} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = llm.cross_entropy %logits, %targets : tensor<2x4x16xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}
