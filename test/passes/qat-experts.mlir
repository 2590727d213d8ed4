// RUN: llmc model mixtral --preset tiny --set n_layer=1 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-qat="spec={weights=fp8_e4m3, activations=fp8_e4m3, gradients=fp8_e5m2, skip=head} keep-routers=true" | FileCheck %s
// RUN: llmc-opt %t.mlir --llmc-qat="spec={weights=fp8_e4m3, activations=fp8_e4m3, skip=head,router}" | FileCheck %s --check-prefix=SKIP
// RUN: llmc-opt %t.mlir --llmc-qat="spec={weights=int4:channel, skip=head}" | FileCheck %s --check-prefix=ROUTER
// RUN: llmc-opt %t.mlir --llmc-train-pipeline="mesh=ep=2,tp=2 precision=fp8 emit=graph" | FileCheck %s --check-prefix=EP
// RUN: llmc model gpt2 --preset tiny --set n_layer=1 -o %t.gpt2.mlir
// RUN: not llmc-opt %t.gpt2.mlir --llmc-qat="spec={weights=int8, skip=router}" 2>&1 | FileCheck %s --check-prefix=NO-ROUTER
// RUN: llmc-opt %t.gpt2.mlir --llmc-qat="spec={weights=int8, skip=head} keep-routers=true" | FileCheck %s --check-prefix=DENSE

// A mixture of experts' grouped products are quantized like the other
// matmuls: the stacked experts' weight as one tensor, the routed rows as
// the input (gate and up share it), dY per product; keep-routers leaves the
// router's matmul, whose logits choose the experts, in full precision.
// CHECK: %[[LOGITS:.*]] = llm.matmul %{{[^,]*}}, %arg7 {transpose_b} : tensor<1024x128xf32>, tensor<4x128xf32> -> tensor<1024x4xf32>
// CHECK-NEXT: llm.moe_route %[[LOGITS]]
// CHECK-NEXT: %[[ROWS:.*]] = llm.moe_dispatch
// CHECK-NEXT: %[[RG:.*]] = qat.observe %arg10 {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<4x176x128xf32> -> tensor<1x2xf32>
// CHECK-NEXT: %[[G:.*]] = qat.fake_quant %arg10 range %[[RG]]
// CHECK-NEXT: %[[RX:.*]] = qat.observe %[[ROWS]] {scheme = #qat.scheme<format = "fp8_e4m3">} : tensor<2048x128xf32>
// CHECK-NEXT: %[[X:.*]] = qat.fake_quant %[[ROWS]] range %[[RX]]
// CHECK-NEXT: %[[GATE:.*]] = llm.grouped_matmul %[[X]], %offsets, %[[G]] {transpose_b}
// CHECK-NEXT: qat.quantize_grad %[[GATE]] {scheme = #qat.scheme<format = "fp8_e5m2">}
// CHECK-NEXT: qat.observe %arg8
// CHECK-NEXT: %[[U:.*]] = qat.fake_quant %arg8
// CHECK-NEXT: %[[UP:.*]] = llm.grouped_matmul %[[X]], %offsets, %[[U]] {transpose_b}
// CHECK-NEXT: qat.quantize_grad %[[UP]]
// CHECK: qat.fake_quant %arg9 {{.*}} : tensor<4x128x176xf32>
// CHECK: llm.grouped_matmul {{.*}} : tensor<2048x176xf32>, tensor<5xi32>, tensor<4x128x176xf32>
// CHECK-NEXT: qat.quantize_grad

// skip=router says the same by name.
// SKIP: %[[LOGITS:.*]] = llm.matmul %{{[^,]*}}, %arg7 {transpose_b}
// SKIP-NEXT: llm.moe_route %[[LOGITS]]
// SKIP: qat.fake_quant %arg10

// Without it the router is a weight site like any other.
// ROUTER: %[[R:.*]] = qat.fake_quant %arg7 {{.*}}granularity = "channel"
// ROUTER-NEXT: %[[LOGITS:.*]] = llm.matmul %{{[^,]*}}, %[[R]] {transpose_b}
// ROUTER-NEXT: llm.moe_route %[[LOGITS]]

// Under ep=2 × tp=2 each rank holds 2 experts' halves: the weights' range
// combines over both axes, the routed rows' over ep (a batch axis: each
// rank's rows come from every ep rank's tokens), dY's over both.
// EP: llm.moe_regroup
// EP: qat.observe %arg{{[0-9]+}} {{.*}} : tensor<2x88x128xbf16> -> tensor<1x2xf32>
// EP-NEXT: dist.all_reduce %{{.*}} on @mesh axes ["ep", "tp"] reduction "max"
// EP-NEXT: qat.fake_quant
// EP-NEXT: qat.observe %{{.*}} : tensor<2048x128xbf16> -> tensor<1x2xf32>
// EP-NEXT: dist.all_reduce %{{.*}} on @mesh axes ["ep"] reduction "max"
// EP-NEXT: qat.fake_quant
// EP-NEXT: llm.grouped_matmul
// EP-NEXT: qat.quantize_grad %{{.*}} {axes = ["ep", "tp"], scheme = #qat.scheme<format = "fp8_e5m2">}

// A model without routers: skip=router matches nothing (an error, as every
// skip entry that matches nothing is), keep-routers is silent.
// NO-ROUTER: error: qat: skip 'router' matches no layer, parameter, head or embedding of @forward
// DENSE: qat.fake_quant
