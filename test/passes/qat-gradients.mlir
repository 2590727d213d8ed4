// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec={gradients=fp8_e5m2, skip=head}" | FileCheck %s
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=dp=2,tp=2 qat={gradients=fp8_e5m2} emit=train" | FileCheck %s --check-prefix=TRAIN
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=gradients=fp8_e5m2:channel" 2>&1 | FileCheck %s --check-prefix=CHANNEL
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=gradients=int8:ema" 2>&1 | FileCheck %s --check-prefix=EMA
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=gradients=int8:asym" 2>&1 | FileCheck %s --check-prefix=ASYM

// gradients=: each weight matmul's output passes through qat.quantize_grad
// (an identity whose backward fake-quantizes dY); the head is skipped.
// CHECK: %[[Y:.*]] = llm.matmul %{{.*}}, %arg3
// CHECK-NEXT: %[[Q:.*]] = qat.quantize_grad %[[Y]] {scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<2x4x8xf32>
// CHECK-NOT: llm.matmul %[[Y]]
// CHECK: llm.matmul {{.*}}transpose_b
// CHECK-NOT: qat.quantize_grad

// After autodiff: dY's range is observed, max-combined over the ranks that
// hold pieces of it (dp splits the rows, tp the weights), and dY is
// fake-quantized before the backward matmuls read it.
// TRAIN: qat.quantize_grad %{{.*}} {axes = ["dp", "tp"]{{.*}}scheme = #qat.scheme<format = "fp8_e5m2">}
// TRAIN: %[[R:.*]] = qat.observe %[[DY:[^ ]*]] {llmc.backward{{.*}}scheme = #qat.scheme<format = "fp8_e5m2">} : tensor<4x128x128xf32> -> tensor<1x2xf32>
// TRAIN-NEXT: %[[G:.*]] = dist.all_reduce %[[R]] on @mesh axes ["dp", "tp"] reduction "max"
// TRAIN-NEXT: %[[DQ:.*]] = qat.fake_quant %[[DY]] range %[[G]]
// TRAIN-NEXT: llm.matmul %[[DQ]]

// CHANNEL: error: qat: bad scheme 'fp8_e5m2:channel': gradients= is per tensor, symmetric, with the minmax or delayed observer (each step's dY)
// EMA: error: qat: bad scheme 'int8:ema': gradients= is per tensor, symmetric, with the minmax or delayed observer (each step's dY)
// ASYM: error: qat: bad scheme 'int8:asym': gradients= is per tensor, symmetric, with the minmax or delayed observer (each step's dY)
