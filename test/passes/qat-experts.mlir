// RUN: llmc model mixtral --preset tiny --set n_layer=1 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-qat="spec={weights=fp8_e4m3, activations=fp8_e4m3, gradients=fp8_e5m2, skip=head} keep-routers=true" | FileCheck %s
// RUN: llmc-opt %t.mlir --llmc-qat="spec={weights=fp8_e4m3, activations=fp8_e4m3, skip=head,router}" | FileCheck %s --check-prefix=SKIP
// RUN: llmc-opt %t.mlir --llmc-qat="spec={weights=int4:channel, skip=head}" | FileCheck %s --check-prefix=ROUTER
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=ep=2,tp=2 precision=fp8 emit=graph" | FileCheck %s --check-prefix=EP
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=ep=2,tp=2 precision=fp8 fp8-scaling=delayed,history=8 emit=graph" | FileCheck %s --check-prefix=EP-DELAYED
// RUN: llmc-opt %S/Inputs/odd-experts.mlir --llmc-qat="spec={weights=int8:channel}" | FileCheck %s --check-prefix=PER-ROW
// RUN: llmc-opt %S/Inputs/odd-experts.mlir --llmc-qat="spec={weights=int8:channel1}" | FileCheck %s --check-prefix=PER-COLUMN
// RUN: not llmc-opt %S/Inputs/odd-experts.mlir --llmc-qat="spec={weights=int8:channel2}" 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: llmc-opt %S/Inputs/odd-experts.mlir --llmc-qat="spec={weights=int4:block5}" | FileCheck %s --check-prefix=BLOCKS
// RUN: llmc-opt %S/Inputs/odd-experts.mlir --llmc-qat="spec={weights=fp8_e4m3:delayed16}" | FileCheck %s --check-prefix=DELAYED
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 -o %t.gpt2.mlir
// RUN: not llmc-opt %t.gpt2.mlir --llmc-qat="spec={weights=int8, skip=router}" 2>&1 | FileCheck %s --check-prefix=NO-ROUTER
// RUN: llmc-opt %t.gpt2.mlir --llmc-qat="spec={weights=int8, skip=head} keep-routers=true" | FileCheck %s --check-prefix=DENSE

// A mixture of experts' grouped products are quantized like the other
// matmuls: the stacked experts' weight expert by expert (a per-tensor
// scheme's range per expert, on the view [G, A·B], as `llmc quantize`
// stores a stack), the routed rows as the input (gate and up share it)
// expert by expert too (each row's range, each group's, given back to its
// rows), dY likewise (quantize_grad with the offsets); keep-routers leaves
// the router's matmul, whose logits choose the experts, in full precision.
// CHECK: %[[LOGITS:.*]] = llm.matmul %{{[^,]*}}, %arg7 {transpose_b} : tensor<1024x128xf32>, tensor<4x128xf32> -> tensor<1024x4xf32>
// CHECK-NEXT: llm.moe_route %[[LOGITS]]
// CHECK-NEXT: %[[ROWS:.*]] = llm.moe_dispatch
// CHECK-NEXT: %[[VG:.*]] = llm.reshape %arg10 : tensor<4x176x128xf32> to tensor<4x22528xf32>
// CHECK-NEXT: %[[RG:.*]] = qat.observe %[[VG]] {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<4x22528xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[QG:.*]] = qat.fake_quant %[[VG]] range %[[RG]]
// CHECK-NEXT: %[[G:.*]] = llm.reshape %[[QG]] : tensor<4x22528xf32> to tensor<4x176x128xf32>
// CHECK-NEXT: %[[RR:.*]] = qat.observe %[[ROWS]] {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">} : tensor<2048x128xf32> -> tensor<2048x2xf32>
// CHECK-NEXT: %[[RX:.*]] = qat.group_ranges %[[RR]], %offsets : tensor<2048x2xf32>, tensor<5xi32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[RB:.*]] = qat.row_ranges %[[RX]], %offsets : tensor<4x2xf32>, tensor<5xi32> -> tensor<2048x2xf32>
// CHECK-NEXT: %[[X:.*]] = qat.fake_quant %[[ROWS]] range %[[RB]] {scheme = #qat.scheme<format = "fp8_e4m3", granularity = "channel">}
// CHECK-NEXT: %[[GATE:.*]] = llm.grouped_matmul %[[X]], %offsets, %[[G]] {transpose_b}
// CHECK-NEXT: qat.quantize_grad %[[GATE]] offsets %offsets {scheme = #qat.scheme<format = "fp8_e5m2">}
// CHECK-NEXT: llm.reshape %arg8
// CHECK-NEXT: qat.observe
// CHECK-NEXT: qat.fake_quant
// CHECK-NEXT: %[[U:.*]] = llm.reshape
// CHECK-NEXT: %[[UP:.*]] = llm.grouped_matmul %[[X]], %offsets, %[[U]] {transpose_b}
// CHECK-NEXT: qat.quantize_grad %[[UP]]
// CHECK: llm.reshape %arg9 : tensor<4x128x176xf32> to tensor<4x22528xf32>
// CHECK: llm.grouped_matmul {{.*}} : tensor<2048x176xf32>, tensor<5xi32>, tensor<4x128x176xf32>
// CHECK-NEXT: qat.quantize_grad

// skip=router says the same by name.
// SKIP: %[[LOGITS:.*]] = llm.matmul %{{[^,]*}}, %arg7 {transpose_b}
// SKIP-NEXT: llm.moe_route %[[LOGITS]]
// SKIP: llm.reshape %arg10

// Without it the router is a weight site like any other.
// ROUTER: %[[R:.*]] = qat.fake_quant %arg7 {{.*}}granularity = "channel"
// ROUTER-NEXT: %[[LOGITS:.*]] = llm.matmul %{{[^,]*}}, %[[R]] {transpose_b}
// ROUTER-NEXT: llm.moe_route %[[LOGITS]]

// Under ep=2 × tp=2 each rank holds 2 experts' halves: each expert's
// range combines over tp, which splits it (ep splits the experts, whose
// ranges are their own). So do each expert's rows: an ep rank holds every
// row of its experts, from every ep rank's tokens, so nothing combines
// over ep; the gate's rows are whole on each tp rank, the down
// projection's split over tp, and dY (split over tp's columns) combines
// over tp.
// EP: llm.moe_regroup
// EP: llm.reshape %arg{{[0-9]+}} : tensor<2x88x128xbf16> to tensor<2x11264xbf16>
// EP-NEXT: qat.observe %{{.*}} : tensor<2x11264xbf16> -> tensor<2x2xf32>
// EP-NEXT: dist.all_reduce %{{.*}} on @mesh axes ["tp"] reduction "max"
// EP-NEXT: qat.fake_quant
// EP-NEXT: llm.reshape
// EP-NEXT: qat.observe %{{.*}} : tensor<2048x128xbf16> -> tensor<2048x2xf32>
// EP-NEXT: qat.group_ranges %{{.*}}, %local_offsets : tensor<2048x2xf32>, tensor<3xi32> -> tensor<2x2xf32>
// EP-NEXT: qat.row_ranges
// EP-NEXT: qat.fake_quant
// EP-NEXT: llm.grouped_matmul
// EP-NEXT: qat.quantize_grad %{{.*}} offsets %local_offsets {axes = ["tp"], scheme = #qat.scheme<format = "fp8_e5m2">}
// EP: qat.observe %{{.*}} : tensor<2048x88xbf16> -> tensor<2048x2xf32>
// EP-NEXT: qat.group_ranges
// EP-NEXT: dist.all_reduce %{{.*}} on @mesh axes ["tp"] reduction "max" : tensor<2x2xf32>
// EP-NEXT: qat.row_ranges
// EP-NEXT: qat.fake_quant
// EP-NEXT: llm.grouped_matmul

// Per channel, a range per expert and channel, the axis counted in each
// expert's matrix as `llmc quantize` counts it: each expert's rows
// (`channel0`, or left out for [G, F, K]: the output channels) on the view
// [G·A, B]; its columns (`channel1`) on the transposed view [G·B, A];
// a third axis is refused. Blocks never
// cross an expert's row, and a delayed scheme keeps one amax history for
// the stack (per tensor only).
// PER-ROW: %[[V:.*]] = llm.reshape %arg0 : tensor<3x7x5xf32> to tensor<21x5xf32>
// PER-ROW-NEXT: qat.observe %[[V]] {{.*}} : tensor<21x5xf32> -> tensor<21x2xf32>
// PER-ROW-NEXT: %[[Q:.*]] = qat.fake_quant %[[V]]
// PER-ROW-NEXT: %[[W:.*]] = llm.reshape %[[Q]] : tensor<21x5xf32> to tensor<3x7x5xf32>
// PER-ROW-NEXT: llm.grouped_matmul %arg1, %arg2, %[[W]]
// PER-COLUMN: %[[T:.*]] = llm.transpose %arg0 {permutation = array<i64: 0, 2, 1>} : tensor<3x7x5xf32> to tensor<3x5x7xf32>
// PER-COLUMN-NEXT: %[[V:.*]] = llm.reshape %[[T]] : tensor<3x5x7xf32> to tensor<15x7xf32>
// PER-COLUMN-NEXT: qat.observe %[[V]] {{.*}} : tensor<15x7xf32> -> tensor<15x2xf32>
// PER-COLUMN-NEXT: %[[Q:.*]] = qat.fake_quant %[[V]]
// PER-COLUMN-NEXT: %[[B:.*]] = llm.reshape %[[Q]] : tensor<15x7xf32> to tensor<3x5x7xf32>
// PER-COLUMN-NEXT: %[[W:.*]] = llm.transpose %[[B]] {permutation = array<i64: 0, 2, 1>} : tensor<3x5x7xf32> to tensor<3x7x5xf32>
// PER-COLUMN-NEXT: llm.grouped_matmul %arg1, %arg2, %[[W]]
// AXIS: error: 'llm.grouped_matmul' op qat: channel axis 2 of each expert's matrix of 'experts.w' (0 or 1)
// BLOCKS: qat.observe %arg0 {{.*}} : tensor<3x7x5xf32> -> tensor<21x2xf32>
// A delayed scheme keeps an amax history per expert: the stack's state is
// [experts, history + 1], each row recording its expert's range.
// DELAYED: %arg3: tensor<3x17xf32> {llmc.name = "experts.w", llmc.role = "qat_state"}
// DELAYED: %[[V:.*]] = llm.reshape %arg0 : tensor<3x7x5xf32> to tensor<3x35xf32>
// DELAYED-NEXT: %[[O:.*]] = qat.observe %[[V]] {{.*}} : tensor<3x35xf32> -> tensor<3x2xf32>
// DELAYED-NEXT: %[[R:.*]] = qat.delayed_range %arg3, %[[O]] {{.*}} : tensor<3x17xf32>, tensor<3x2xf32>
// DELAYED-NEXT: qat.amax_history %arg3, %[[O]] {{.*}} : tensor<3x17xf32>, tensor<3x2xf32>
// DELAYED-NEXT: qat.fake_quant %[[V]] range %[[R]]

// Delayed scaling under ep=2 × tp=2: each rank keeps the histories of its
// 2 experts (state [2, 9] of the global [4, 9], sharded over ep like the
// stack) for the stack, the rows and dY; each expert's range is combined
// over tp before it is recorded, never over ep. ep splits the batch, so
// dY's histories record it in one rank's units (batch_ranks = 2).
// EP-DELAYED: tensor<2x9xf32> {llmc.name = "layers.0.block_sparse_moe.experts.w3.weight.output_grad", llmc.role = "qat_state", llmc.shard = {global_shape = array<i64: 4, 9>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-DELAYED-SAME: tensor<2x9xf32> {llmc.name = "layers.0.block_sparse_moe.experts.w3.weight", llmc.role = "qat_state", llmc.shard = {global_shape = array<i64: 4, 9>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-DELAYED-SAME: tensor<2x9xf32> {llmc.name = "layers.0.block_sparse_moe.experts.w3.weight.input", llmc.role = "qat_state", llmc.shard = {global_shape = array<i64: 4, 9>, levels = [{axes = ["ep"], blocks = 1 : i64, dim = 0 : i64}]}}
// EP-DELAYED: llm.moe_regroup
// EP-DELAYED: qat.observe %{{.*}} : tensor<2x11264xbf16> -> tensor<2x2xf32>
// EP-DELAYED-NEXT: %[[W:.*]] = dist.all_reduce %{{.*}} on @mesh axes ["tp"] reduction "max"
// EP-DELAYED-NEXT: qat.delayed_range %{{.*}}, %[[W]] {{.*}} : tensor<2x9xf32>, tensor<2x2xf32>
// EP-DELAYED-NEXT: qat.amax_history %{{.*}}, %[[W]] {{.*}} : tensor<2x9xf32>, tensor<2x2xf32>
// EP-DELAYED: qat.observe %{{.*}} : tensor<2048x128xbf16> -> tensor<2048x2xf32>
// EP-DELAYED-NEXT: %[[G:.*]] = qat.group_ranges %{{.*}}, %local_offsets : tensor<2048x2xf32>, tensor<3xi32> -> tensor<2x2xf32>
// EP-DELAYED-NEXT: %[[RG:.*]] = qat.delayed_range %{{.*}}, %[[G]] {{.*}} : tensor<2x9xf32>, tensor<2x2xf32>
// EP-DELAYED-NEXT: qat.amax_history %{{.*}}, %[[G]]
// EP-DELAYED-NEXT: qat.row_ranges %[[RG]], %local_offsets
// EP-DELAYED: llm.grouped_matmul
// EP-DELAYED-NEXT: qat.quantize_grad %{{.*}} state %{{.*}} offsets %local_offsets {axes = ["tp"], batch_ranks = 2 : i64, scheme = #qat.scheme<format = "fp8_e5m2", observer = "delayed", history = 8>} : tensor<2048x88xbf16>, tensor<2x9xf32> offsets tensor<3xi32>
// EP-DELAYED: qat.group_ranges
// EP-DELAYED-NEXT: %[[D:.*]] = dist.all_reduce %{{.*}} on @mesh axes ["tp"] reduction "max" : tensor<2x2xf32>
// EP-DELAYED-NEXT: qat.delayed_range %{{.*}}, %[[D]] {{.*}} : tensor<2x9xf32>, tensor<2x2xf32>

// A model without routers: skip=router matches nothing (an error, as every
// skip entry that matches nothing is), keep-routers is silent.
// NO-ROUTER: error: qat: skip 'router' matches no layer, parameter, head or embedding of @forward
// DENSE: qat.fake_quant
