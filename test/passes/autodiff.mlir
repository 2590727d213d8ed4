// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff | FileCheck %s
// RUN: llmc-opt %s --split-input-file --llmc-autodiff --verify-diagnostics | FileCheck %s --check-prefix=FROZEN

// The gradient function: same arguments, loss then one gradient per
// trainable parameter, backward ops in reverse order tagged with their block.
// CHECK-LABEL: func.func @grad
// CHECK-SAME: -> (tensor<f32>, tensor<16x8xf32> {llmc.grad_of = "wte"}, tensor<8xf32> {llmc.grad_of = "ln.weight"}, tensor<8xf32> {llmc.grad_of = "ln.bias"}, tensor<8x8xf32> {llmc.grad_of = "h.0.mlp.weight"})
// CHECK: %[[X:.*]] = llm.embedding
// CHECK: llm.layernorm {{.*}} {epsilon = {{.*}}, llmc.block_name = "h.0"}
// CHECK: %[[LOSS:.*]] = llm.cross_entropy
// CHECK: %[[SEED:.*]] = llm.fill 1.000000e+00 {llmc.backward, llmc.loss_seed} : tensor<f32>
// CHECK: %[[DLOGITS:.*]] = llm.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]]
// Tied embedding: the head's gradient and the lookup's gradient are summed.
// CHECK: llm.matmul %[[DLOGITS]], %{{.*}} :
// CHECK: llm.matmul %{{.*}}, %{{.*}} {llmc.backward, transpose_a} : tensor<8x16xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
// Backward ops carry llmc.backward and the block of the op they differentiate.
// CHECK: llm.gelu_grad {{.*}} {llmc.backward, llmc.block_name = "h.0"}
// CHECK: llm.layernorm_grad {{.*}} {epsilon = {{.*}}, llmc.backward, llmc.block_name = "h.0"}
// CHECK: %[[DTABLE:.*]] = llm.embedding_grad
// Summing a value's gradient contributions is backward work too (of the
// layer that used the value, if any).
// CHECK: %[[DWTE:.*]] = llm.add %{{.*}}, %[[DTABLE]] {llmc.backward} : tensor<16x8xf32>
// CHECK: return %[[LOSS]], %[[DWTE]],

// Frozen parameters and inputs get no gradient: only w's is returned, and
// nothing flows back into the matmul that only reads the frozen f.
// FROZEN-LABEL: func.func @grad(
// FROZEN-SAME: -> (tensor<f32>, tensor<4x4xf32> {llmc.grad_of = "w"})
// FROZEN: %[[A:.*]] = llm.matmul %arg2, %arg1
// FROZEN: %[[D:.*]] = llm.cross_entropy_grad
// FROZEN-NEXT: %[[DW:.*]] = llm.matmul %[[A]], %[[D]] {llmc.backward, transpose_a}
// FROZEN-NEXT: return %{{.*}}, %[[DW]]
func.func @forward(%w: tensor<4x4xf32> {llm.param = #llm.param<name = "w", init = "normal", scale = 1.0>},
                   %f: tensor<4x4xf32> {llm.param = #llm.param<name = "f", init = "normal", scale = 1.0, trainable = false>},
                   %x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %a = llm.matmul %x, %f : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %b = llm.matmul %a, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %l = llm.cross_entropy %b, %t : tensor<2x4xf32>, tensor<2xi32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{autodiff: @forward must return exactly one tensor<f32> loss}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

func.func @forward(%x: tensor<4xf32> {llm.param = #llm.param<name = "x", init = "normal", scale = 1.0>}) -> tensor<f32> {
  // expected-error @+1 {{'llm.global_norm' op has no VJP rule; autodiff cannot differentiate it}}
  %n = llm.global_norm %x : tensor<4xf32>
  return %n : tensor<f32>
}
