// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec={weights=fp8_e4m3:delayed16:margin1, activations=fp8_e4m3:delayed16, gradients=fp8_e5m2:delayed4:most_recent, skip=head}" | FileCheck %s
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=dp=2,tp=2 precision=fp8 fp8-scaling=delayed,history=8,margin=1 emit=train" | FileCheck %s --check-prefix=TRAIN
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=fp8_e4m3:delayed0" 2>&1 | FileCheck %s --check-prefix=HISTORY
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=fp8_e4m3:delayed:margin-1" 2>&1 | FileCheck %s --check-prefix=MARGIN
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=fp8_e4m3:delayed:mean" 2>&1 | FileCheck %s --check-prefix=ALGO
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=fp8_e4m3:most_recent" 2>&1 | FileCheck %s --check-prefix=NOT-DELAYED
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=int8:delayed" 2>&1 | FileCheck %s --check-prefix=INT8
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-qat="spec=weights=fp8_e4m3:channel:delayed" 2>&1 | FileCheck %s --check-prefix=CHANNEL
// RUN: not llmc-opt %t.mlir --llmc-train-pipeline="precision=fp8 fp8-scaling=delayed,algo=mean" 2>&1 | FileCheck %s --check-prefix=FLAG
// RUN: not llmc-opt %S/Inputs/shared-weight.mlir --llmc-qat="spec={weights=fp8_e4m3:delayed4, skip=head}" 2>&1 | FileCheck %s --check-prefix=SHARED
// RUN: not llmc-opt %S/Inputs/shared-weight.mlir --llmc-qat="spec={gradients=fp8_e5m2:delayed4, skip=head}" 2>&1 | FileCheck %s --check-prefix=SHARED-GRAD

// Each site's amax history is a new state argument (the range, then the
// amaxes): a weight's, an input's and dY's.
// CHECK: func.func @forward(
// CHECK-SAME: %[[DYS:[^:]*]]: tensor<5xf32> {llmc.name = "h.0.mlp.weight.output_grad", llmc.role = "qat_state"}
// CHECK-SAME: %[[WS:[^:]*]]: tensor<17xf32> {llmc.name = "h.0.mlp.weight", llmc.role = "qat_state"}
// CHECK-SAME: %[[XS:[^:]*]]: tensor<17xf32> {llmc.name = "h.0.mlp.weight.input", llmc.role = "qat_state"}
// The weight is quantized with the history's range, and this step's range
// (the observe) is recorded.
// CHECK: %[[WO:.*]] = qat.observe %arg3 {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 16, margin = 1>}
// CHECK-NEXT: %[[WR:.*]] = qat.delayed_range %[[WS]], %[[WO]]
// CHECK-NEXT: qat.amax_history %[[WS]], %[[WO]]
// CHECK-NEXT: %[[WQ:.*]] = qat.fake_quant %arg3 range %[[WR]]
// CHECK: %[[XO:.*]] = qat.observe
// CHECK-NEXT: %[[XR:.*]] = qat.delayed_range %[[XS]], %[[XO]] {scheme = #qat.scheme<format = "fp8_e4m3", observer = "delayed", history = 16>}
// CHECK-NEXT: qat.amax_history %[[XS]], %[[XO]]
// CHECK-NEXT: %[[XQ:.*]] = qat.fake_quant %{{.*}} range %[[XR]]
// CHECK-NEXT: %[[Y:.*]] = llm.matmul %[[XQ]], %[[WQ]]
// CHECK-NEXT: qat.quantize_grad %[[Y]] state %[[DYS]] {scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 4, algo = "most_recent">} : tensor<2x4x8xf32>, tensor<5xf32>

// Under dp×tp: evaluation and generation quantize with the histories'
// ranges and record nothing.
// TRAIN-LABEL: func.func @forward(
// TRAIN-NOT: qat.amax_history
// TRAIN: func.func @logits(
// TRAIN-NOT: qat.amax_history
// TRAIN: func.func @grad(
// The backward: dY's range, combined over the ranks holding pieces of it,
// is recorded into dY's history, whose range quantizes dY; the inputs'
// gradients pass whole (no fake_quant_grad: TE's fp8 GEMM masks nothing).
// Each dp rank's dY is of its half-batch mean loss, twice one rank's: the
// history records it halved (one rank's units) and its range is doubled.
// TRAIN: %[[R:.*]] = qat.observe %[[DY:[^ ]*]] {llmc.backward{{.*}}scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 8, margin = 1>}
// TRAIN-NEXT: %[[G:.*]] = dist.all_reduce %[[R]] on @mesh axes ["dp", "tp"] reduction "max"
// TRAIN-NEXT: %[[ONE:.*]] = llm.scale %[[G]] {factor = 5.000000e-01 : f64
// TRAIN-NEXT: %[[DR:.*]] = qat.delayed_range %[[DS:[^,]*]], %[[ONE]]
// TRAIN-NEXT: qat.amax_history %[[DS]], %[[ONE]]
// TRAIN-NEXT: %[[RANGE:.*]] = llm.scale %[[DR]] {factor = 2.000000e+00 : f64
// TRAIN-NEXT: qat.quantize_fp8 %[[DY]] range %[[RANGE]]
// TRAIN-NOT: qat.fake_quant_grad
// TRAIN: func.func @train_step(
// The step commits each of the 12 histories with the global norm.
// TRAIN: %[[NORM:.*]] = llm.sqrt
// TRAIN-COUNT-12: qat.commit_state %{{.*}}, %{{.*}}, %[[NORM]] : tensor<9xf32>, tensor<f32>
// TRAIN-NOT: qat.commit_state

// HISTORY: error: qat: bad scheme 'fp8_e4m3:delayed0': amax history length '0' must be an integer >= 1 (write e.g. delayed1024)
// MARGIN: error: qat: bad scheme 'fp8_e4m3:delayed:margin-1': margin '-1' must be an integer >= 0 (write e.g. margin0)
// ALGO: error: qat: bad scheme 'fp8_e4m3:delayed:mean': unknown field 'mean'
// NOT-DELAYED: error: qat: bad scheme 'fp8_e4m3:most_recent': 'most_recent' needs the delayed observer (write e.g. delayed1024:most_recent)
// INT8: error: qat: bad scheme 'int8:delayed': delayed scaling needs an fp8 format (fp8_e4m3 or fp8_e5m2), got 'int8'
// CHANNEL: error: qat: bad scheme 'fp8_e4m3:channel:delayed': delayed scaling is per tensor (one amax history per tensor)
// FLAG: llmc-train-pipeline: bad --fp8-scaling 'delayed,algo=mean': unknown algo 'mean' (expected max or most_recent)

// A weight two blocks read would need two histories of one name (one state
// per tensor, named after it): refused, naming it.
// SHARED: shared-weight.mlir:13:10: error: 'llm.matmul' op qat: two amax histories would share the state 'shared.weight'
// SHARED-GRAD: shared-weight.mlir:13:10: error: 'llm.matmul' op qat: two amax histories would share the state 'shared.weight.output_grad'
