// Three experts of 7x5: 35 weights each, an odd number of 4-bit codes.
func.func @forward(%w: tensor<3x7x5xf32> {llm.param = #llm.param<name = "experts.w", init = "normal", scale = 2.000000e-02>},
                   %x: tensor<4x5xf32>, %off: tensor<4xi32>) -> tensor<4x7xf32> {
  %y = llm.grouped_matmul %x, %off, %w {transpose_b} : tensor<4x5xf32>, tensor<4xi32>, tensor<3x7x5xf32>
  return %y : tensor<4x7xf32>
}
