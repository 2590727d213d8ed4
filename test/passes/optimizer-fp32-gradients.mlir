// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=bf16 microbatches=2 emit=train fuse=none" | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=bf16 mesh=dp=2 emit=train fuse=none" | FileCheck %s --check-prefix=DP
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=bf16 mesh=dp=2 zero=2 microbatches=2 emit=train fuse=none" | FileCheck %s --check-prefix=ZERO2
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=bf16 mesh=dp=2 zero=3 emit=train fuse=none" | FileCheck %s --check-prefix=ZERO3
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=fp16 microbatches=2 emit=train fuse=none" | FileCheck %s --check-prefix=FP16
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 -o %t.gpt2.mlir
// RUN: llmc-opt %t.gpt2.mlir --llmc-train-pipeline="precision=bf16 mesh=tp=2 sp=true emit=train fuse=none" | FileCheck %s --check-prefix=SP
// RUN: llmc-opt %t.gpt2.mlir --llmc-train-pipeline="precision=bf16 grad-dtype=bf16 mesh=tp=2 sp=true emit=train fuse=none" | FileCheck %s --check-prefix=SP-BF16-GRADS
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=bf16 grad-dtype=bf16 microbatches=2 emit=train fuse=none" | FileCheck %s --check-prefix=BF16-GRADS
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=bf16 grad-dtype=bf16 mesh=dp=2 zero=2 emit=train fuse=none" | FileCheck %s --check-prefix=BF16-GRADS-ZERO2
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision --llmc-autodiff --llmc-optimizer="fp32-gradients=false" | FileCheck %s --check-prefix=PASS-OFF
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="grad-dtype=bf16" 2>&1 | FileCheck %s --check-prefix=MISMATCH
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=bf16 grad-dtype=f32" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// fp32 gradients (the default under bf16): each microbatch's bf16 weight
// gradient is widened right where the backward produces it, so the sum over
// microbatches, its mean, the global norm and AdamW all run on fp32, and
// AdamW reads the accumulator with no cast of its own.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W0:.*]] = llm.matmul {{.*}}llmc.microbatch = 0 : i64, transpose_a} : tensor<8x8xbf16>, tensor<8x8xbf16> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[A0:.*]] = llm.cast %[[W0]] : tensor<8x8xbf16> to tensor<8x8xf32>
// CHECK: %[[W1:.*]] = llm.matmul {{.*}}llmc.microbatch = 1 : i64, transpose_a} : tensor<8x8xbf16>, tensor<8x8xbf16> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[A1:.*]] = llm.cast %[[W1]] : tensor<8x8xbf16> to tensor<8x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = llm.add %[[A0]], %[[A1]] : tensor<8x8xf32>, tensor<8x8xf32>
// CHECK-NEXT: %[[MEAN:.*]] = llm.scale %[[SUM]] {{.*}} : tensor<8x8xf32>
// CHECK: %[[NORM:.*]] = llm.global_norm {{.*}} : tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x8xf32>
// CHECK-NOT: llm.cast {{.*}}bf16> to tensor<{{.*}}f32>
// CHECK: llm.adamw %arg7, %[[MEAN]], {{.*}} norm %[[NORM]] {{.*}} : tensor<8x8xf32>
// CHECK-NEXT: llm.cast %{{.*}} : tensor<8x8xf32> to tensor<8x8xbf16>

// Data parallelism: the fused all-reduce runs on an fp32 bucket.
// DP-LABEL: func.func @train_step
// DP: llm.concat {{.*}} -> tensor<208xf32>
// DP-NEXT: dist.all_reduce %{{.*}} on @mesh axes ["dp"] reduction "mean" {llmc.gradient_sync} : tensor<208xf32> -> tensor<208xf32>
// DP-NOT: gradient_sync} : tensor<{{.*}}bf16>

// ZeRO-2: each microbatch's widened gradient is reduce-scattered to an fp32
// shard, and the shards are summed in fp32.
// ZERO2-LABEL: func.func @train_step
// ZERO2: %[[G:.*]] = llm.cast %{{.*}} : tensor<8x8xbf16> to tensor<8x8xf32>
// ZERO2-NEXT: %[[S0:.*]] = dist.reduce_scatter %[[G]] on @mesh axes ["dp"] dim 0 reduction "mean" : tensor<8x8xf32> -> tensor<4x8xf32>
// ZERO2: %[[G1:.*]] = llm.cast %{{.*}} : tensor<8x8xbf16> to tensor<8x8xf32>
// ZERO2-NEXT: %[[S1:.*]] = dist.reduce_scatter %[[G1]] {{.*}} : tensor<8x8xf32> -> tensor<4x8xf32>
// ZERO2-NEXT: llm.add %[[S0]], %[[S1]] : tensor<4x8xf32>, tensor<4x8xf32>
// ZERO2: llm.global_norm {{.*}}{squared} : tensor<8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>
// ZERO2-NOT: reduce_scatter {{.*}}bf16>
// The updated parameters are still gathered in bf16.
// ZERO2: dist.all_gather %{{.*}} : tensor<4x8xbf16> -> tensor<8x8xbf16>

// ZeRO-3: the same fp32 reduce-scatter; parameters are gathered in bf16.
// ZERO3-LABEL: func.func @train_step
// ZERO3: dist.all_gather %{{.*}} : tensor<4x8xbf16> -> tensor<8x8xbf16>
// ZERO3: dist.reduce_scatter %{{.*}} : tensor<8x8xf32> -> tensor<4x8xf32>
// ZERO3-NOT: reduce_scatter {{.*}}bf16>

// Sequence parallelism: a norm's gain and bias gradients are partial sums
// over each rank's sequence shard, all-reduced over tp in the backward; the
// widening moves below that sum (as part of the same backward step), so it
// adds fp32 values.
// SP-LABEL: func.func @train_step
// SP: %[[W:.*]] = llm.cast %dgamma{{.*}} {llmc.backward, llmc.microbatch = 0 : i64} : tensor<128xbf16> to tensor<128xf32>
// SP-NEXT: dist.all_reduce %[[W]] on @mesh axes ["tp"] reduction "sum" {llmc.backward, llmc.microbatch = 0 : i64} : tensor<128xf32> -> tensor<128xf32>
// SP-NOT: dist.all_reduce {{.*}}tensor<128xbf16> -> tensor<128xbf16>
// SP-BF16-GRADS-LABEL: func.func @train_step
// SP-BF16-GRADS: dist.all_reduce %dgamma{{.*}} on @mesh axes ["tp"] reduction "sum" {llmc.backward, llmc.microbatch = 0 : i64} : tensor<128xbf16> -> tensor<128xbf16>

// fp16 (loss scaling): the scaled f16 gradients are widened the same way,
// and AdamW unscales the fp32 sum.
// FP16-LABEL: func.func @train_step
// FP16: llm.cast %{{.*}} : tensor<8x8xf16> to tensor<8x8xf32>
// FP16: llm.add %{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8x8xf32>
// FP16: llm.global_norm {{.*}} : tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x8xf32>
// FP16: llm.adamw %arg7, {{.*}} loss_scale %{{.*}} : tensor<8x8xf32>

// --grad-dtype bf16: gradients stay bf16 through accumulation and the norm;
// AdamW widens the mean right before the update.
// BF16-GRADS-LABEL: func.func @train_step
// BF16-GRADS-NOT: llm.cast {{.*}}bf16> to tensor<{{.*}}f32>
// BF16-GRADS: %[[SUM:.*]] = llm.add %{{.*}}, %{{.*}} : tensor<8x8xbf16>, tensor<8x8xbf16>
// BF16-GRADS-NEXT: %[[MEAN:.*]] = llm.scale %[[SUM]] {{.*}} : tensor<8x8xbf16>
// BF16-GRADS: llm.global_norm {{.*}} : tensor<16x8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8x8xbf16>
// BF16-GRADS: %[[G:.*]] = llm.cast %[[MEAN]] : tensor<8x8xbf16> to tensor<8x8xf32>
// BF16-GRADS-NEXT: llm.adamw %arg7, %[[G]], {{.*}} : tensor<8x8xf32>
// BF16-GRADS-ZERO2-LABEL: func.func @train_step
// BF16-GRADS-ZERO2: dist.reduce_scatter {{.*}} : tensor<8x8xbf16> -> tensor<4x8xbf16>

// The pass option the pipeline's --grad-dtype sets.
// PASS-OFF-LABEL: func.func @train_step
// PASS-OFF: %[[G:.*]] = llm.cast %{{.*}} : tensor<16x8xbf16> to tensor<16x8xf32>
// PASS-OFF-NEXT: llm.adamw %arg4, %[[G]]

// MISMATCH: error: llmc-train-pipeline: --grad-dtype bf16 needs --precision bf16 (gradients are fp32 or in the compute type)
// UNKNOWN: error: llmc-train-pipeline: unknown --grad-dtype 'f32' (expected fp32, bf16 or fp16)
