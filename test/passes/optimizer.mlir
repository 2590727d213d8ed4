// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer="microbatches=2 no-decay=norm,bias,embedding" | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer="max-grad-norm=0" | FileCheck %s --check-prefix=NOCLIP
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision --llmc-autodiff --llmc-optimizer | FileCheck %s --check-prefix=BF16
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer="optimizer=adamw8bit" | FileCheck %s --check-prefix=EIGHT-BIT
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="mesh=dp=2 zero=1 optimizer=adamw8bit emit=train" | FileCheck %s --check-prefix=EIGHT-BIT-ZERO
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer="optimizer=sgd" 2>&1 | FileCheck %s --check-prefix=BAD-OPTIMIZER
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer="no-decay=weights" 2>&1 | FileCheck %s --check-prefix=BADKIND
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-optimizer 2>&1 | FileCheck %s --check-prefix=NOGRAD
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-autodiff --llmc-optimizer="microbatches=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// Signature: params, adam m, adam v, batch [M, B, T], lr, step; results are
// the loss, the updated state tied to the arguments it overwrites, and the
// gradient norm.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %arg0: tensor<16x8xf32> {llm.param = {{.*}}, llmc.name = "wte", llmc.role = "param"}
// CHECK-SAME: %arg4: tensor<16x8xf32> {llmc.name = "wte", llmc.role = "adam_m"}
// CHECK-SAME: %arg8: tensor<16x8xf32> {llmc.name = "wte", llmc.role = "adam_v"}
// CHECK-SAME: %arg12: tensor<2x2x4xi32> {llmc.name = "tokens", llmc.role = "input"}
// CHECK-SAME: %arg14: tensor<f32> {llmc.name = "lr", llmc.role = "input"}
// CHECK-SAME: %arg15: tensor<f32> {llmc.name = "step", llmc.role = "input"}
// CHECK-SAME: -> (tensor<f32> {llmc.name = "loss", llmc.role = "output"}, tensor<16x8xf32> {llmc.tied_to = 0 : i64}
// CHECK-SAME: tensor<f32> {llmc.name = "grad_norm", llmc.role = "output"})
// Two microbatches, each a slice of the batch.
// CHECK: llm.slice %arg12 {offsets = array<i64: 0, 0, 0>} : tensor<2x2x4xi32> to tensor<1x2x4xi32>
// CHECK: %[[L0:.*]] = llm.cross_entropy
// CHECK: llm.slice %arg12 {offsets = array<i64: 1, 0, 0>} : tensor<2x2x4xi32> to tensor<1x2x4xi32>
// CHECK: %[[L1:.*]] = llm.cross_entropy
// Each gradient is averaged where the last microbatch's backward produces
// it (so a data-parallel sync can overlap the rest of backward); then the
// averaged loss, one global norm, one AdamW per parameter.
// CHECK: %[[G:.*]] = llm.scale %{{.*}} {factor = 5.000000e-01 : f64} : tensor<16x8xf32>
// CHECK: %[[SUM:.*]] = llm.add %[[L0]], %[[L1]] : tensor<f32>, tensor<f32>
// CHECK: %[[LOSS:.*]] = llm.scale %[[SUM]] {factor = 5.000000e-01 : f64}
// CHECK: %[[NORM:.*]] = llm.global_norm
// No decay for the tied embedding, the norm gain and the bias…
// CHECK: llm.adamw %arg0, %[[G]], %arg4, %arg8, %arg14, %arg15 norm %[[NORM]] {{{.*}}max_grad_norm = 1.000000e+00 : f64, weight_decay = 0.000000e+00 : f64}
// CHECK: llm.adamw %arg1, {{.*}}weight_decay = 0.000000e+00
// CHECK: llm.adamw %arg2, {{.*}}weight_decay = 0.000000e+00
// … decay for the matrix.
// CHECK: llm.adamw %arg3, {{.*}}weight_decay = 1.000000e-01
// CHECK: return %[[LOSS]], {{.*}}, %[[NORM]] :

// Clipping off: the norm is still reported and still passed to AdamW, where
// a non-finite one skips the step; max_grad_norm = 0 only turns the clip off.
// NOCLIP: %[[N:.*]] = llm.global_norm
// NOCLIP: llm.adamw {{.*}} norm %[[N]] {{{.*}}max_grad_norm = 0.000000e+00
// NOCLIP: return {{.*}}, %[[N]] :

// BADKIND: error: optimizer: unknown no-decay kind 'weights' (expected norm, bias, embedding or none)
// NOGRAD: error: optimizer: needs @forward and @grad (run llmc-autodiff first)
// ZERO: error: optimizer: microbatches must be >= 1, got 0

// Mixed precision: bf16 parameters get fp32 master copies (optimizer
// state); AdamW updates the master with the fp32 gradient (widened where
// the backward produced it; optimizer-fp32-gradients.mlir), and the
// parameter becomes the rounded master. Norm gains and biases are still
// recognised and not decayed; the matmul weight is.
// BF16-LABEL: func.func @train_step(%arg0: tensor<16x8xbf16> {{{.*}}llmc.role = "param"}
// BF16-SAME: %arg4: tensor<16x8xf32> {llmc.name = "wte", llmc.role = "master"}
// BF16-SAME: %arg8: tensor<16x8xf32> {llmc.name = "wte", llmc.role = "adam_m"}
// BF16-SAME: -> (tensor<f32> {llmc.name = "loss", llmc.role = "output"}, tensor<16x8xbf16> {llmc.tied_to = 0 : i64}
// BF16-SAME: tensor<16x8xf32> {llmc.tied_to = 4 : i64}
// BF16: %[[G:.*]] = llm.cast %{{.*}} : tensor<16x8xbf16> to tensor<16x8xf32>
// BF16: %[[NEW:.*]], %{{.*}}, %{{.*}} = llm.adamw %arg4, %[[G]], %arg8, %arg12
// BF16-NEXT: llm.cast %[[NEW]] : tensor<16x8xf32> to tensor<16x8xbf16>
// BF16: llm.adamw %arg5, {{.*}}weight_decay = 0.000000e+00
// BF16: llm.adamw %arg6, {{.*}}weight_decay = 0.000000e+00
// BF16: llm.adamw %arg7, {{.*}}weight_decay = 1.000000e-01

// 8-bit AdamW: each moment is uint8 codes shaped like the parameter plus one
// fp32 absmax per block of 2048 elements, four slots after the parameters,
// each updated in place by llm.adamw8bit.
// EIGHT-BIT-LABEL: func.func @train_step
// EIGHT-BIT-SAME: tensor<16x8xi8> {llmc.name = "wte", llmc.role = "adam_m"}
// EIGHT-BIT-SAME: tensor<1xf32> {llmc.name = "wte", llmc.role = "adam_m_absmax"}
// EIGHT-BIT-SAME: tensor<16x8xi8> {llmc.name = "wte", llmc.role = "adam_v"}
// EIGHT-BIT-SAME: tensor<1xf32> {llmc.name = "wte", llmc.role = "adam_v_absmax"}
// EIGHT-BIT: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = llm.adamw8bit %arg0, %{{.*}}, %arg4, %arg8, %arg12, %arg16, %{{.*}}, %{{.*}} norm
// EIGHT-BIT-SAME: : tensor<16x8xf32>, tensor<16x8xi8>, tensor<1xf32>
// EIGHT-BIT-NOT: llm.adamw {

// ZeRO shards the codes like fp32 moments; each rank's absmax covers the
// blocks of its own piece, so the whole absmax is every piece's blocks.
// EIGHT-BIT-ZERO-LABEL: func.func @train_step
// EIGHT-BIT-ZERO-SAME: tensor<8x8xi8> {llmc.name = "wte", llmc.role = "adam_m", llmc.shard = {global_shape = array<i64: 16, 8>, levels = [{axes = ["dp"], blocks = 1 : i64, dim = 0 : i64}]}}
// EIGHT-BIT-ZERO-SAME: tensor<1xf32> {llmc.name = "wte", llmc.role = "adam_m_absmax", llmc.shard = {global_shape = array<i64: 2>, levels = [{axes = ["dp"], blocks = 1 : i64, dim = 0 : i64}]}}

// BAD-OPTIMIZER: error: optimizer: unknown optimizer 'sgd' (expected adamw or adamw8bit)
