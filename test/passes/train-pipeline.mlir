// The registered pipeline is exactly what `llmc compile` runs.
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="emit=train" | FileCheck %s --check-prefix=TRAIN
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline --mlir-print-ir-after-all 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=bf16 microbatches=2" --verify-each | FileCheck %s --check-prefix=BF16

// TRAIN-DAG: func.func @forward
// TRAIN-DAG: func.func @grad
// TRAIN-DAG: func.func @train_step
// TRAIN-DAG: func.func @logits

// STAGES: IR Dump After Autodiff
// STAGES: IR Dump After Optimizer
// STAGES: IR Dump After InferenceEntryPoints
// STAGES: IR Dump After DecomposeCollectives
// STAGES: IR Dump After LowerToExec
// STAGES: IR Dump After VerifyCollectives
// STAGES: exec.program @train_step
// STAGES: exec.program @eval
// STAGES: exec.program @logits
// STAGES: exec.program @grad

// BF16: exec.program @train_step
// BF16: exec.buffer offset 0 name "wte" category "param" {{.*}} : memref<16x8xbf16>
// BF16: exec.buffer offset {{[0-9]+}} name "master/wte" category "optim" : memref<16x8xf32>
// BF16: exec.kernel "matmul"({{.*}} : memref<2x4x8xbf16>, memref<8x8xbf16>) -> ({{.*}} : memref<2x4x8xbf16>)
