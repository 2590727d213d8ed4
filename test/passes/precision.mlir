// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision=compute-type=f32 | FileCheck %s --check-prefix=F32
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision=compute-type=fp8 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision --llmc-autodiff | FileCheck %s --check-prefix=GRAD

// Parameters stay fp32 arguments and are cast where they are read; the
// embedding table is looked up in fp32 and its rows cast; the loss stays fp32.
// CHECK-LABEL: func.func @forward(%arg0: tensor<16x8xf32>
// CHECK: %[[HEAD:.*]] = llm.cast %arg0 : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK: %[[W:.*]] = llm.cast %arg3 : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK: %[[ROWS:.*]] = llm.embedding %arg0, %arg4 : tensor<16x8xf32>, tensor<2x4xi32>
// CHECK: %[[X:.*]] = llm.cast %[[ROWS]] : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK: llm.block "h.0" -> tensor<2x4x8xbf16>
// CHECK: llm.matmul %{{.*}}, %[[W]] : tensor<2x4x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xbf16>
// CHECK: llm.matmul %{{.*}}, %[[HEAD]] {transpose_b} : tensor<2x4x8xbf16>, tensor<16x8xbf16> -> tensor<2x4x16xbf16>
// CHECK: llm.cross_entropy %{{.*}} : tensor<2x4x16xbf16>, tensor<2x4xi32>
// CHECK: return %{{.*}} : tensor<f32>

// F32-NOT: llm.cast

// BAD: error: precision: unknown compute type 'fp8' (expected f32, bf16 or f16)

// Gradients come back to fp32 through the casts' VJPs.
// GRAD-LABEL: func.func @grad
// GRAD-SAME: -> (tensor<f32>, tensor<16x8xf32> {llmc.grad_of = "wte"}
// GRAD: llm.cast %{{.*}} : tensor<16x8xbf16> to tensor<16x8xf32>
