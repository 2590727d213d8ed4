// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=gelu-grad,swiglu-grad" | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=bias" | FileCheck %s --check-prefix=OFF
// RUN: llmc-opt %s -split-input-file --llmc-fuse | llmc-opt | FileCheck %s --check-prefix=ROUND

// llmc-fuse's `gelu-grad` and `swiglu-grad`. `gelu-grad`: the MLP
// backward's data-gradient product of the down projection and the GELU's
// backward reading it become one
// llm.matmul_gelu_grad, standing where the gelu_grad stood (after the
// weight gradient's product, so the product is never a buffer of its own
// across it) and carrying its attributes.
// CHECK-LABEL: func.func @mlp_backward
// CHECK-NEXT:  %[[DW:.*]] = llm.matmul %arg3, %arg4 {llmc.backward, transpose_a}
// CHECK-NEXT:  %[[D:.*]] = llm.matmul_gelu_grad %arg0, %arg1, %arg2 {llmc.backward, llmc.block_name = "h.0", transpose_b} : tensor<2x4x8xf32>, tensor<32x8xf32>, tensor<2x4x32xf32>
// CHECK-NEXT:  return %[[D]], %[[DW]]
// OFF-LABEL: func.func @mlp_backward
// OFF: llm.gelu_grad
// ROUND-LABEL: func.func @mlp_backward
// ROUND: llm.matmul_gelu_grad %arg0, %arg1, %arg2 {llmc.backward, llmc.block_name = "h.0", transpose_b}
func.func @mlp_backward(%dy: tensor<2x4x8xf32>, %w: tensor<32x8xf32>, %pre: tensor<2x4x32xf32>,
                        %h: tensor<8x32xf32>, %dyr: tensor<8x8xf32>) -> (tensor<2x4x32xf32>, tensor<32x8xf32>) {
  %dh = llm.matmul %dy, %w {llmc.backward, llmc.block_name = "h.0", transpose_b} : tensor<2x4x8xf32>, tensor<32x8xf32> -> tensor<2x4x32xf32>
  %dw = llm.matmul %h, %dyr {llmc.backward, transpose_a} : tensor<8x32xf32>, tensor<8x8xf32> -> tensor<32x8xf32>
  %dpre = llm.gelu_grad %pre, %dh {llmc.backward, llmc.block_name = "h.0"} : tensor<2x4x32xf32>
  return %dpre, %dw : tensor<2x4x32xf32>, tensor<32x8xf32>
}

// -----

// GPT-2's c_fc has a bias: its gradient, the reduce_sum of the GELU
// input's gradient, joins the fused op (`bias_grad`: cuBLASLt's
// DGELU_BGRAD), so nothing reads that gradient again for it.
// CHECK-LABEL: func.func @with_bias_grad
// CHECK-NEXT:  %[[D:.*]], %[[DB:.*]] = llm.matmul_gelu_grad %arg0, %arg1, %arg2 {bias_grad, llmc.backward, transpose_b} : tensor<2x4x8xf32>, tensor<32x8xf32>, tensor<2x4x32xf32>
// CHECK-NEXT:  return %[[D]], %[[DB]]
// ROUND-LABEL: func.func @with_bias_grad
// ROUND: llm.matmul_gelu_grad %arg0, %arg1, %arg2 {bias_grad, llmc.backward, transpose_b}
func.func @with_bias_grad(%dy: tensor<2x4x8xf32>, %w: tensor<32x8xf32>, %pre: tensor<2x4x32xf32>)
    -> (tensor<2x4x32xf32>, tensor<32xf32>) {
  %dh = llm.matmul %dy, %w {llmc.backward, transpose_b} : tensor<2x4x8xf32>, tensor<32x8xf32> -> tensor<2x4x32xf32>
  %dpre = llm.gelu_grad %pre, %dh {llmc.backward} : tensor<2x4x32xf32>
  %db = llm.reduce_sum %dpre {llmc.backward} : tensor<2x4x32xf32> to tensor<32xf32>
  return %dpre, %db : tensor<2x4x32xf32>, tensor<32xf32>
}

// -----

// A weight stored [K, N] (no transpose) and bf16 operands fuse alike.
// CHECK-LABEL: func.func @untransposed_bf16
// CHECK-NEXT:  %[[D:.*]] = llm.matmul_gelu_grad %arg0, %arg1, %arg2 : tensor<6x8xbf16>, tensor<8x32xbf16>, tensor<6x32xbf16>
// CHECK-NEXT:  return %[[D]]
func.func @untransposed_bf16(%dy: tensor<6x8xbf16>, %w: tensor<8x32xbf16>, %pre: tensor<6x32xbf16>) -> tensor<6x32xbf16> {
  %dh = llm.matmul %dy, %w : tensor<6x8xbf16>, tensor<8x32xbf16> -> tensor<6x32xbf16>
  %dpre = llm.gelu_grad %pre, %dh : tensor<6x32xbf16>
  return %dpre : tensor<6x32xbf16>
}

// -----

// What stays: a product something else reads too, a product that is
// gelu_grad's x rather than its dy, a product with its left operand
// transposed, and ops of two parts of the step (two microbatches).
// CHECK-LABEL: func.func @kept
// CHECK-NOT:   matmul_gelu_grad
// CHECK:       return
func.func @kept(%dy: tensor<8x8xf32>, %w: tensor<8x8xf32>, %pre: tensor<8x8xf32>)
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %a = llm.matmul %dy, %w : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %ga = llm.gelu_grad %pre, %a : tensor<8x8xf32>
  %b = llm.matmul %dy, %w : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %gb = llm.gelu_grad %b, %pre : tensor<8x8xf32>
  %c = llm.matmul %dy, %w {transpose_a} : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %gc = llm.gelu_grad %pre, %c : tensor<8x8xf32>
  %d = llm.matmul %dy, %w {llmc.microbatch = 0 : i64} : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %gd = llm.gelu_grad %pre, %d {llmc.microbatch = 1 : i64} : tensor<8x8xf32>
  return %ga, %a, %gb, %gc, %gd : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// `swiglu-grad`: a SwiGLU MLP's down projection's data-gradient product
// and swiglu_grad reading it (Llama's down_proj) become one
// matmul_swiglu_grad with both gradients, where the swiglu_grad stood.
// CHECK-LABEL: func.func @swiglu_backward
// CHECK-NEXT:  %[[DG:.*]], %[[DU:.*]] = llm.matmul_swiglu_grad %arg0, %arg1, %arg2, %arg3 {llmc.backward, transpose_b} : tensor<2x4x8xf32>, tensor<24x8xf32>, tensor<2x4x24xf32>
// CHECK-NEXT:  return %[[DG]], %[[DU]]
// OFF-LABEL: func.func @swiglu_backward
// OFF: llm.swiglu_grad
// ROUND-LABEL: func.func @swiglu_backward
// ROUND: llm.matmul_swiglu_grad %arg0, %arg1, %arg2, %arg3 {llmc.backward, transpose_b}
func.func @swiglu_backward(%dy: tensor<2x4x8xf32>, %w: tensor<24x8xf32>, %gate: tensor<2x4x24xf32>,
                           %up: tensor<2x4x24xf32>) -> (tensor<2x4x24xf32>, tensor<2x4x24xf32>) {
  %dh = llm.matmul %dy, %w {llmc.backward, transpose_b} : tensor<2x4x8xf32>, tensor<24x8xf32> -> tensor<2x4x24xf32>
  %dg, %du = llm.swiglu_grad %gate, %up, %dh {llmc.backward} : tensor<2x4x24xf32>
  return %dg, %du : tensor<2x4x24xf32>, tensor<2x4x24xf32>
}

// -----

// What stays: the product read elsewhere too, or as the gate rather than
// the upstream gradient.
// CHECK-LABEL: func.func @swiglu_kept
// CHECK-NOT:   matmul_swiglu_grad
// CHECK:       return
func.func @swiglu_kept(%dy: tensor<8x8xf32>, %w: tensor<8x8xf32>, %g: tensor<8x8xf32>)
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %a = llm.matmul %dy, %w : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %ga, %ua = llm.swiglu_grad %g, %g, %a : tensor<8x8xf32>
  %b = llm.matmul %dy, %w : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %gb, %ub = llm.swiglu_grad %b, %g, %g : tensor<8x8xf32>
  return %ga, %a, %gb : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
