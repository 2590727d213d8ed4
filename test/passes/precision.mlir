// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision | FileCheck %s
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision=compute-type=f32 | FileCheck %s --check-prefix=F32
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision=compute-type=fp8 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-precision --llmc-autodiff | FileCheck %s --check-prefix=GRAD

// Parameters are stored in the compute type (the optimizer keeps fp32
// masters); everything they feed computes in it; the loss stays fp32.
// CHECK-LABEL: func.func @forward(%arg0: tensor<16x8xbf16> {llm.param = #llm.param<name = "wte"
// CHECK-SAME: %arg3: tensor<8x8xbf16>
// CHECK-NOT: llm.cast
// CHECK: llm.embedding %arg0, %arg4 : tensor<16x8xbf16>, tensor<2x4xi32>
// CHECK: llm.block "h.0" -> tensor<2x4x8xbf16>
// CHECK: llm.matmul %{{.*}}, %arg3 : tensor<2x4x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xbf16>
// CHECK: llm.matmul %{{.*}}, %arg0 {transpose_b} : tensor<2x4x8xbf16>, tensor<16x8xbf16> -> tensor<2x4x16xbf16>
// CHECK: llm.cross_entropy %{{.*}} : tensor<2x4x16xbf16>, tensor<2x4xi32>
// CHECK: return %{{.*}} : tensor<f32>

// F32-NOT: bf16

// BAD: error: precision: unknown compute type 'fp8' (expected f32, bf16 or f16)

// Gradients are in the parameters' type (2 bytes each, as in the ZeRO
// paper's accounting).
// GRAD-LABEL: func.func @grad
// GRAD-SAME: -> (tensor<f32>, tensor<16x8xbf16> {llmc.grad_of = "wte"}
