// Stacks of experts split as quantized storage cannot take them.

// Four experts of 8x4 whose rows two levels split (tp, then dp): one split
// per dimension of the stack.
module {
  dist.mesh @mesh axes ["dp", "tp"] shape [2, 2]
  func.func @forward(%w: tensor<4x2x4xf32> {llm.param = #llm.param<name = "experts.w", init = "normal", scale = 2.000000e-02>, llmc.shard = {global_shape = array<i64: 4, 8, 4>, levels = [{axes = ["tp"], blocks = 1 : i64, dim = 1 : i64}, {axes = ["dp"], blocks = 1 : i64, dim = 1 : i64}]}},
                     %x: tensor<4x4xf32>, %off: tensor<5xi32>) -> tensor<4x2xf32> {
    %y = llm.grouped_matmul %x, %off, %w {transpose_b} : tensor<4x4xf32>, tensor<5xi32>, tensor<4x2x4xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// Four experts split in two blocks over ep=2: each rank's experts are not
// one run of the stack.
module {
  dist.mesh @mesh axes ["ep"] shape [2]
  func.func @forward(%w: tensor<2x8x4xf32> {llm.param = #llm.param<name = "experts.w", init = "normal", scale = 2.000000e-02>, llmc.shard = {global_shape = array<i64: 4, 8, 4>, levels = [{axes = ["ep"], blocks = 2 : i64, dim = 0 : i64}]}},
                     %x: tensor<4x4xf32>, %off: tensor<3xi32>) -> tensor<4x8xf32> {
    %y = llm.grouped_matmul %x, %off, %w {transpose_b} : tensor<4x4xf32>, tensor<3xi32>, tensor<2x8x4xf32>
    return %y : tensor<4x8xf32>
  }
}
