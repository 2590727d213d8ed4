// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=add-norm" | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse | FileCheck %s
// RUN: llmc-opt %s -split-input-file --llmc-fuse="fusions=bias" | FileCheck %s --check-prefix=OFF
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="emit=train" | FileCheck %s --check-prefix=PIPELINE

// GPT-2's residual stream: the add that ends one layer (h.0) feeds the
// norm that starts the next (h.1); they fuse, and the sum, which the next
// residual add reads, is the fused op's first result. The fused op stands
// where the norm was and carries its attributes.
// CHECK-LABEL: func.func @layernorm
// CHECK-NEXT:  %[[S:.*]], %[[Y:.*]] = llm.add_layernorm %arg0, %arg1, %arg2, %arg3 {epsilon = 1.000000e-05 : f64, llmc.block_name = "h.1"} : tensor<2x4x8xf32>, tensor<8xf32>
// CHECK-NEXT:  %[[Z:.*]] = llm.add %[[S]], %[[Y]]
// CHECK-NEXT:  return %[[Z]]
// OFF-LABEL: func.func @layernorm
// OFF: llm.layernorm %
func.func @layernorm(%a: tensor<2x4x8xf32>, %b: tensor<2x4x8xf32>, %g: tensor<8xf32>,
                     %beta: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %s = llm.add %a, %b {llmc.block_name = "h.0"} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %y = llm.layernorm %s, %g, %beta {epsilon = 1.0e-5 : f64, llmc.block_name = "h.1"} : tensor<2x4x8xf32>, tensor<8xf32>
  %z = llm.add %s, %y : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// Tensor parallelism adds a row-parallel projection's bias after its
// all-reduce, where no GEMM epilogue can take it: the bias add joins the
// residual add and the norm, as add_layernorm's bias, in either operand
// order.
// CHECK-LABEL: func.func @tp_bias
// CHECK-NEXT:  %[[P:.*]] = dist.all_reduce %arg1
// CHECK-NEXT:  %[[S:.*]], %[[Y:.*]] = llm.add_layernorm %arg0, %[[P]], %arg2, %arg3 bias %arg4 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32> bias tensor<8xf32>
// CHECK-NEXT:  %[[Q:.*]] = dist.all_reduce %[[Y]]
// CHECK-NEXT:  %[[S2:.*]], %[[Y2:.*]] = llm.add_layernorm %[[S]], %[[Q]], %arg2, %arg3 bias %arg4 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32> bias tensor<8xf32>
// CHECK-NEXT:  return %[[S2]], %[[Y2]]
// OFF-LABEL: func.func @tp_bias
// OFF-COUNT-4: llm.add %
dist.mesh @mesh axes ["tp"] shape [2]
func.func @tp_bias(%a: tensor<2x4x8xf32>, %p: tensor<2x4x8xf32>, %g: tensor<8xf32>,
                   %beta: tensor<8xf32>, %bias: tensor<8xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %r = dist.all_reduce %p on @mesh axes ["tp"] reduction "sum" : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %b = llm.add %r, %bias : tensor<2x4x8xf32>, tensor<8xf32>
  %s = llm.add %a, %b : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %y = llm.layernorm %s, %g, %beta {epsilon = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  %r2 = dist.all_reduce %y on @mesh axes ["tp"] reduction "sum" : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %b2 = llm.add %r2, %bias : tensor<2x4x8xf32>, tensor<8xf32>
  %s2 = llm.add %b2, %s : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %y2 = llm.layernorm %s2, %g, %beta {epsilon = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  return %s2, %y2 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// The bias add stays its own op when something else reads the biased
// value, and before an rmsnorm (add_rmsnorm takes no bias).
// CHECK-LABEL: func.func @bias_kept
// CHECK-NEXT:  %[[B:.*]] = llm.add %arg1, %arg4
// CHECK-NEXT:  %[[S:.*]], %[[Y:.*]] = llm.add_layernorm %arg0, %[[B]], %arg2, %arg3 {epsilon
// CHECK-NEXT:  %[[C:.*]] = llm.add %arg1, %arg4
// CHECK-NEXT:  %{{.*}}, %{{.*}} = llm.add_rmsnorm %arg0, %[[C]], %arg2 {epsilon
func.func @bias_kept(%a: tensor<2x4x8xf32>, %p: tensor<2x4x8xf32>, %g: tensor<8xf32>,
                     %beta: tensor<8xf32>, %bias: tensor<8xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %b = llm.add %p, %bias : tensor<2x4x8xf32>, tensor<8xf32>
  %s = llm.add %a, %b : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %y = llm.layernorm %s, %g, %beta {epsilon = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  %c = llm.add %p, %bias : tensor<2x4x8xf32>, tensor<8xf32>
  %t = llm.add %a, %c : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %z = llm.rmsnorm %t, %g {epsilon = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xf32>
  return %b, %y, %t, %z : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Llama's, in bf16.
// CHECK-LABEL: func.func @rmsnorm
// CHECK-NEXT:  %[[S:.*]], %[[Y:.*]] = llm.add_rmsnorm %arg0, %arg1, %arg2 {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xbf16>, tensor<8xbf16>
// CHECK-NEXT:  return %[[S]], %[[Y]]
func.func @rmsnorm(%a: tensor<2x4x8xbf16>, %b: tensor<2x4x8xbf16>, %g: tensor<8xbf16>)
    -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) {
  %s = llm.add %a, %b : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
  %y = llm.rmsnorm %s, %g {epsilon = 1.0e-5 : f64} : tensor<2x4x8xbf16>, tensor<8xbf16>
  return %s, %y : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
}

// -----

// Gemma's (1 + w) norm keeps its unit_offset through the fusion.
// CHECK-LABEL: func.func @unit_offset
// CHECK-NEXT:  %[[S:.*]], %[[Y:.*]] = llm.add_rmsnorm %arg0, %arg1, %arg2 {epsilon = {{.*}} : f64, unit_offset} : tensor<2x4x8xf32>, tensor<8xf32>
func.func @unit_offset(%a: tensor<2x4x8xf32>, %b: tensor<2x4x8xf32>, %g: tensor<8xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %s = llm.add %a, %b : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %y = llm.rmsnorm %s, %g {epsilon = 1.0e-6 : f64, unit_offset} : tensor<2x4x8xf32>, tensor<8xf32>
  return %s, %y : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// A reader of the sum between add and norm: the fused op stands at the add
// (the norm's parameters are there already).
// CHECK-LABEL: func.func @reader_between
// CHECK-NEXT:  %[[S:.*]], %[[Y:.*]] = llm.add_rmsnorm %arg0, %arg1, %arg2
// CHECK-NEXT:  llm.gelu %[[S]]
func.func @reader_between(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>, %g: tensor<8xf32>)
    -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %s = llm.add %a, %b : tensor<2x8xf32>, tensor<2x8xf32>
  %h = llm.gelu %s : tensor<2x8xf32>
  %y = llm.rmsnorm %s, %g {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return %h, %y : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Not fused: a bias add (broadcast), ops of different parts of the step
// (forward and a recomputation, other microbatches), and an op between
// add and norm (a collective would be one: the norm does not read the
// add).
// CHECK-LABEL: func.func @no_match
// CHECK-NOT:   llm.add_layernorm
// CHECK-NOT:   llm.add_rmsnorm
// CHECK:       return
func.func @no_match(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>, %v: tensor<8xf32>, %g: tensor<8xf32>)
    -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %s0 = llm.add %a, %v : tensor<2x8xf32>, tensor<8xf32>
  %y0 = llm.rmsnorm %s0, %g {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>
  %s1 = llm.add %a, %b : tensor<2x8xf32>, tensor<2x8xf32>
  %y1 = llm.rmsnorm %s1, %g {epsilon = 1.0e-5 : f64, llmc.backward, llmc.recomputed} : tensor<2x8xf32>, tensor<8xf32>
  %s2 = llm.add %b, %a {llmc.microbatch = 0 : i64} : tensor<2x8xf32>, tensor<2x8xf32>
  %y2 = llm.rmsnorm %s2, %g {epsilon = 1.0e-5 : f64, llmc.microbatch = 1 : i64} : tensor<2x8xf32>, tensor<8xf32>
  %s3 = llm.add %a, %a : tensor<2x8xf32>, tensor<2x8xf32>
  %c = llm.stop_gradient %s3 : tensor<2x8xf32>
  %y3 = llm.rmsnorm %c, %g {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>
  return %y0, %y1, %y2, %y3 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// The backward: the norm's dx meets the residual stream's gradient (as
// either operand of the add); dgamma and dbeta pass through.
// CHECK-LABEL: func.func @layernorm_grad
// CHECK-NEXT:  %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = llm.layernorm_grad_add %arg0, %arg1, %arg2, %arg3 {epsilon = 1.000000e-05 : f64, llmc.backward, llmc.block_name = "h.0"} : tensor<2x4x8xf32>, tensor<8xf32>
// CHECK-NEXT:  return %[[DX]], %[[DG]], %[[DB]]
// OFF-LABEL: func.func @layernorm_grad
// OFF: llm.layernorm_grad %
func.func @layernorm_grad(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x4x8xf32>,
                          %dres: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dg, %db = llm.layernorm_grad %x, %g, %dy {epsilon = 1.0e-5 : f64, llmc.backward, llmc.block_name = "h.0"} : tensor<2x4x8xf32>, tensor<8xf32>
  %d = llm.add %dres, %dx {llmc.backward, llmc.block_name = "h.0"} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  return %d, %dg, %db : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// The fused backward stands where the norm's backward was (x and dy die
// there), since its addend exists by then; dgamma's reader stays after it.
// CHECK-LABEL: func.func @rmsnorm_grad
// CHECK-NEXT:  %[[DX:.*]], %[[DG:.*]] = llm.rmsnorm_grad_add %arg0, %arg1, %arg2, %arg3 {epsilon = 1.000000e-05 : f64}
// CHECK-NEXT:  llm.scale %[[DG]]
// CHECK-NEXT:  return %[[DX]]
func.func @rmsnorm_grad(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x8xf32>,
                        %dres: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>) {
  %dx, %dg = llm.rmsnorm_grad %x, %g, %dy {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>
  %dg2 = llm.scale %dg {factor = 2.0 : f64} : tensor<8xf32>
  %d = llm.add %dx, %dres : tensor<2x8xf32>, tensor<2x8xf32>
  return %d, %dg2 : tensor<2x8xf32>, tensor<8xf32>
}

// -----

// Not fused: dx read by more than the add (the final norm's dx feeds the
// head's products too), and dgamma read before an addend made after the
// norm's backward.
// CHECK-LABEL: func.func @grad_no_match
// CHECK-NOT:   _grad_add
// CHECK:       return
func.func @grad_no_match(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x8xf32>,
                         %dres: tensor<2x8xf32>)
    -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) {
  %dx, %dg = llm.rmsnorm_grad %x, %g, %dy {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>
  %d = llm.add %dx, %dres : tensor<2x8xf32>, tensor<2x8xf32>
  %dx2, %dg2 = llm.rmsnorm_grad %x, %g, %dy {epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>
  %dg3 = llm.scale %dg2 {factor = 2.0 : f64} : tensor<8xf32>
  %late = llm.gelu %dres : tensor<2x8xf32>
  %d2 = llm.add %dx2, %late : tensor<2x8xf32>, tensor<2x8xf32>
  return %d, %dx, %d2, %dg3 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>
}

// The whole training pipeline on test/passes/Inputs/tiny-gpt.mlir (one
// block, a layernorm of the embeddings, no norm after the residual add):
// the forward has nothing to fuse; in the backward the layernorm's dx
// meets the residual's gradient.
// PIPELINE-LABEL: func.func @train_step
// PIPELINE-NOT: llm.add_layernorm
// PIPELINE: llm.layernorm_grad_add %{{.*}}, %arg1, %{{.*}}, %dh {epsilon = 1.000000e-05 : f64, llmc.backward, llmc.block_name = "h.0", llmc.microbatch = 0 : i64}
// PIPELINE-NOT: llm.layernorm_grad
