// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-inference-entry-points | FileCheck %s
// RUN: not llmc-opt %s --llmc-inference-entry-points 2>&1 | FileCheck %s --check-prefix=TWO

// @logits: the parameters and tokens, returning what fed the loss; the
// targets argument and the loss are gone.
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: %arg4: tensor<2x4xi32> {llmc.name = "tokens"})
// CHECK-SAME: -> (tensor<2x4x16xf32> {llmc.name = "logits", llmc.role = "output"})
// CHECK: %[[L:.*]] = llm.matmul %{{.*}}, %arg0 {transpose_b}
// CHECK-NOT: llm.cross_entropy
// CHECK: return %[[L]] : tensor<2x4x16xf32>

// TWO: error: inference-entry-points: expected exactly one llm.cross_entropy in @forward, found 2
func.func @forward(%x: tensor<2x4xf32> {llm.param = #llm.param<name = "x", init = "normal", scale = 1.0>},
                   %t: tensor<2xi32>) -> tensor<f32> {
  %a = llm.cross_entropy %x, %t : tensor<2x4xf32>, tensor<2xi32>
  %b = llm.cross_entropy %x, %t : tensor<2x4xf32>, tensor<2xi32>
  %c = llm.add %a, %b : tensor<f32>, tensor<f32>
  return %c : tensor<f32>
}
