// RUN: llmc model qwen3 --preset tiny --set n_layer=1 --set batch_size=2 --set seq_len=8 -o %t.qwen3.mlir
// RUN: llmc-opt %t.qwen3.mlir --llmc-shard="mesh=tp=2" | FileCheck %s
// RUN: llmc-opt %t.qwen3.mlir --llmc-train-pipeline="mesh=tp=2 emit=train" | FileCheck %s --check-prefix=GRAD
// RUN: not llmc-opt %s --llmc-shard="mesh=tp=2" 2>&1 | FileCheck %s --check-prefix=ACROSS
// RUN: llmc model gemma3_text --preset tiny --set n_layer=2 --set batch_size=2 --set seq_len=8 -o %t.gemma3.mlir
// RUN: llmc-opt %t.gemma3.mlir --llmc-shard="mesh=tp=2" | FileCheck %s --check-prefix=GEMMA3
// RUN: llmc-opt %t.gemma3.mlir --llmc-train-pipeline="mesh=tp=2 emit=train" | FileCheck %s --check-prefix=GEMMA3-GRAD

// Qwen3's per-head norms of q and k: the heads split (4 query / 2 kv heads
// 48 wide -> 2 / 1 per rank), each head whole, so the norm's weight stays
// whole and replicated; it enters through dist.replicate (Megatron's f).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg6: tensor<48xf32> {llm.param = #llm.param<name = "layers.0.self_attn.q_norm.weight", init = "ones">}
// CHECK-SAME: %arg7: tensor<48xf32> {llm.param = #llm.param<name = "layers.0.self_attn.k_norm.weight", init = "ones">}
// CHECK: %[[QW:.*]] = dist.replicate %arg6 on @mesh axes ["tp"] : tensor<48xf32>
// CHECK: %[[Q:.*]] = llm.rmsnorm %{{.*}}, %[[QW]] {{.*}} : tensor<2x8x2x48xf32>, tensor<48xf32>
// CHECK: llm.rope %[[Q]]
// CHECK: %[[KW:.*]] = dist.replicate %arg7 on @mesh axes ["tp"] : tensor<48xf32>
// CHECK: %[[K:.*]] = llm.rmsnorm %{{.*}}, %[[KW]] {{.*}} : tensor<2x8x1x48xf32>, tensor<48xf32>
// CHECK: llm.rope %[[K]]
// CHECK: llm.attention {{.*}} : tensor<2x8x2x48xf32>, tensor<2x8x1x48xf32>

// Each rank's gradient of a norm weight covers its own heads: the
// replicate's backward sums the ranks' parts, so every rank steps with the
// whole gradient.
// GRAD-LABEL: func.func @grad
// GRAD-COUNT-2: dist.all_reduce %dgamma{{.*}} on @mesh axes ["tp"] reduction "sum" {llmc.backward, llmc.block_name = "layers.0"} : tensor<48xf32> -> tensor<48xf32>
// GRAD: return

// Gemma 3's q_norm and k_norm ((1 + w) norms, unit_offset) likewise.
// GEMMA3-LABEL: func.func @forward
// GEMMA3-SAME: %arg6: tensor<48xf32> {llm.param = #llm.param<name = "layers.0.self_attn.q_norm.weight", init = "zeros">}
// GEMMA3: %[[Q:.*]] = dist.replicate %arg6 on @mesh axes ["tp"] : tensor<48xf32>
// GEMMA3: llm.rmsnorm %{{.*}}, %[[Q]] {{.*}}unit_offset{{.*}} : tensor<2x8x2x48xf32>, tensor<48xf32>
// GEMMA3: %[[K:.*]] = dist.replicate %arg7 on @mesh axes ["tp"] : tensor<48xf32>
// GEMMA3: llm.rmsnorm %{{.*}}, %[[K]] {{.*}}unit_offset{{.*}} : tensor<2x8x1x48xf32>, tensor<48xf32>
// GEMMA3: llm.attention {{.*}} : tensor<2x8x2x48xf32>, tensor<2x8x1x48xf32>
// GEMMA3-GRAD-LABEL: func.func @grad
// GEMMA3-GRAD: llm.rmsnorm_grad {{.*}} : tensor<2x8x1x48xf32>, tensor<48xf32>
// GEMMA3-GRAD: dist.all_reduce %{{.*}} on @mesh axes ["tp"] reduction "sum" {{.*}}: tensor<48xf32> -> tensor<48xf32>

// A norm over the dimension tensor parallelism splits cannot be computed
// from one rank's piece.
// ACROSS: error: 'llm.rmsnorm' op tensor parallelism: cannot split the dimension a norm reduces
func.func @forward(%w: tensor<8x8xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %g: tensor<8xf32> {llm.param = #llm.param<name = "g", init = "ones">},
                   %w2: tensor<8x8xf32> {llm.param = #llm.param<name = "w2", init = "normal", scale = 1.0>},
                   %x: tensor<2x8xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %y = llm.block "b" -> tensor<2x8xf32> {
    %m = llm.matmul %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
    %n = llm.rmsnorm %m, %g {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>
    %a = llm.gelu %n : tensor<2x8xf32>
    %o = llm.matmul %a, %w2 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
    llm.yield %o : tensor<2x8xf32>
  }
  %l = llm.cross_entropy %y, %t : tensor<2x8xf32>, tensor<2xi32>
  return %l : tensor<f32>
}
