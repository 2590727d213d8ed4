// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision=compute-type=f16 --llmc-autodiff --llmc-optimizer="loss-scaling=true microbatches=2" | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=fp16 emit=train" | FileCheck %s --check-prefix=PIPELINE
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=bf16 emit=train" | FileCheck %s --check-prefix=BF16
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-optimizer="loss-scaling=true" 2>&1 | FileCheck %s --check-prefix=NOGRAD

// fp16 with dynamic loss scaling: parameters and activations are f16 (fp32
// masters), the step takes the scale as an input after `step`, every
// microbatch's backward is seeded with it (d(scale·loss)/d loss) instead of
// a fill of 1, and each AdamW update unscales the gradients and the norm.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %arg0: tensor<16x8xf16> {llm.param = {{.*}}, llmc.name = "wte", llmc.role = "param"}
// CHECK-SAME: %arg4: tensor<16x8xf32> {llmc.name = "wte", llmc.role = "master"}
// CHECK-SAME: %[[LR:arg[0-9]+]]: tensor<f32> {llmc.name = "lr", llmc.role = "input"}
// CHECK-SAME: %[[STEP:arg[0-9]+]]: tensor<f32> {llmc.name = "step", llmc.role = "input"}
// CHECK-SAME: %[[SCALE:arg[0-9]+]]: tensor<f32> {llmc.name = "loss_scale", llmc.role = "input"})
// CHECK-NOT: llm.fill 1.0
// CHECK: llm.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SCALE]] {{.*}}: tensor<2x4x16xf16>
// CHECK-NOT: llm.fill 1.0
// CHECK: llm.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SCALE]] {{.*}}: tensor<2x4x16xf16>
// The scaled f16 gradients are widened to fp32 (--grad-dtype fp32) before
// they are summed, so the norm and AdamW see fp32.
// CHECK: %[[NORM:.*]] = llm.global_norm {{.*}}xf32>
// CHECK: llm.adamw %arg4, %{{.*}}, %{{.*}}, %{{.*}}, %[[LR]], %[[STEP]] norm %[[NORM]] loss_scale %[[SCALE]] {{.*}} : tensor<16x8xf32>
// CHECK: llm.cast %{{.*}} : tensor<16x8xf32> to tensor<16x8xf16>

// The driver's --precision fp16 turns it on.
// PIPELINE: func.func @train_step(
// PIPELINE-SAME: {llmc.name = "loss_scale", llmc.role = "input"}
// PIPELINE: llm.multi_tensor_adamw {{.*}} loss_scale %
// BF16-NOT: loss_scale

// NOGRAD: error: optimizer: needs @forward and @grad
