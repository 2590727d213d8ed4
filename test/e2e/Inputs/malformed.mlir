// A forward graph with a type error on line 3.
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %y = llm.gelu %x : tensor<5xf32>
}
