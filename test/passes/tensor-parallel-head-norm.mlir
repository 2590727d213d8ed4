// RUN: llmc model gemma3_text --preset tiny --set n_layer=2 --set batch_size=2 --set seq_len=8 -o %t.gemma3.mlir
// RUN: llmc-opt %t.gemma3.mlir --llmc-shard="mesh=tp=2" | FileCheck %s
// RUN: llmc-opt %t.gemma3.mlir --llmc-train-pipeline="mesh=tp=2 emit=train" | FileCheck %s --check-prefix=GRAD
// RUN: not llmc-opt %s --llmc-shard="mesh=tp=2" 2>&1 | FileCheck %s --check-prefix=WIDTH

// Gemma 3's q_norm and k_norm normalise each head over head_dim: the heads
// split over the ranks through the norm (4 query / 2 kv heads -> 2 / 1 per
// rank), the norm's weight stays whole and enters through dist.replicate.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg6: tensor<48xf32> {llm.param = #llm.param<name = "layers.0.self_attn.q_norm.weight", init = "zeros">}
// CHECK: %[[Q:.*]] = dist.replicate %arg6 on @mesh axes ["tp"] : tensor<48xf32>
// CHECK: llm.rmsnorm %{{.*}}, %[[Q]] {{.*}}unit_offset{{.*}} : tensor<2x8x2x48xf32>, tensor<48xf32>
// CHECK: %[[K:.*]] = dist.replicate %arg7 on @mesh axes ["tp"] : tensor<48xf32>
// CHECK: llm.rmsnorm %{{.*}}, %[[K]] {{.*}}unit_offset{{.*}} : tensor<2x8x1x48xf32>, tensor<48xf32>
// CHECK: llm.attention {{.*}} : tensor<2x8x2x48xf32>, tensor<2x8x1x48xf32>

// Each rank's norm gradient covers its own heads: the replicate's backward
// sums them over tp before the optimizer sees q_norm's gradient.
// GRAD-LABEL: func.func @grad
// GRAD: llm.rmsnorm_grad {{.*}} : tensor<2x8x1x48xf32>, tensor<48xf32>
// GRAD: dist.all_reduce %{{.*}} on @mesh axes ["tp"] reduction "sum" {{.*}}: tensor<48xf32> -> tensor<48xf32>

// A norm over the dimension tensor parallelism would split is refused.
// WIDTH: error: 'llm.rmsnorm' op tensor parallelism: cannot split the dimension a norm reduces
func.func @forward(%w: tensor<8x8xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %g: tensor<8xf32> {llm.param = #llm.param<name = "g", init = "ones">},
                   %x: tensor<2x8xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %y = llm.block "b" -> tensor<2x8xf32> {
    %m = llm.matmul %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
    %n = llm.rmsnorm %m, %g {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>
    %a = llm.gelu %n : tensor<2x8xf32>
    llm.yield %a : tensor<2x8xf32>
  }
  %l = llm.cross_entropy %y, %t : tensor<2x8xf32>, tensor<2xi32>
  return %l : tensor<f32>
}
