// RUN: llmc model mixtral --set n_layer=1 --set batch_size=2 --set seq_len=8 --set num_experts=2 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=tp=2" | FileCheck %s
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=ep=2,tp=2" | FileCheck %s --check-prefix=EP
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=ep=2,tp=2 shared-tokens=1" | FileCheck %s --check-prefix=SHARED
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=tp=2 shared-tokens=1" | FileCheck %s --check-prefix=GEN
// Tensor parallelism inside a mixture of experts: routing and dispatch stay
// replicated on every rank; the experts' stacked up projections (w1, w3)
// are column-parallel (176 rows -> 88 per rank), reading the dispatched copies
// through the f operator; its down projection (w2) row-parallel, the
// partial sums of all experts' rows completed by one all-reduce before
// the combine (whose backward reads them whole for the routing weights'
// gradient).

// CHECK: llm.moe_route %{{.*}} {normalize, top_k = 2 : i64} : tensor<16x2xf32>
// CHECK: %[[XS:.*]] = llm.moe_dispatch
// CHECK: %[[F:.*]] = dist.replicate %[[XS]] on @mesh axes ["tp"] : tensor<32x128xf32>
// CHECK: llm.grouped_matmul %[[F]], %offsets, %{{.*}} {transpose_b} : tensor<32x128xf32>, tensor<3xi32>, tensor<2x88x128xf32>
// CHECK: llm.grouped_matmul %[[F]], %offsets, %{{.*}} {transpose_b} : tensor<32x128xf32>, tensor<3xi32>, tensor<2x88x128xf32>
// CHECK: %[[DOWN:.*]] = llm.grouped_matmul %{{.*}}, %offsets, %{{.*}} {transpose_b} : tensor<32x88xf32>, tensor<3xi32>, tensor<2x128x88xf32>
// CHECK: %[[SUM:.*]] = dist.all_reduce %[[DOWN]] on @mesh axes ["tp"] reduction "sum" : tensor<32x128xf32>
// CHECK: llm.moe_combine %[[SUM]], %positions weights %weights

// Under ep=2 the rows go home by all-to-all first (linear in them): the
// sum waits for the unpack, 16 rows a rank instead of the exchange's 32.
// EP: %[[DOWN:.*]] = llm.grouped_matmul {{.*}} : tensor<32x88xf32>, tensor<2xi32>, tensor<1x128x88xf32>
// EP-NOT: dist.all_reduce
// EP: %[[BACK:.*]] = llm.moe_ungroup %[[DOWN]]
// EP-NEXT: %[[HOME:.*]] = dist.all_to_all %[[BACK]] on @mesh axes ["ep"]
// EP-NEXT: %[[YS:.*]] = llm.moe_unpack %[[HOME]]
// EP-NEXT: %[[SUM:.*]] = dist.all_reduce %[[YS]] on @mesh axes ["tp"] reduction "sum" : tensor<16x128xf32>
// EP-NEXT: llm.moe_combine %[[SUM]]

// A generation step is never differentiated: the sum passes the combine
// too, 16 tokens instead of 32 rows ...
// GEN: %[[DOWN:.*]] = llm.grouped_matmul {{.*}} tensor<2x128x88xf32>
// GEN-NOT: dist.all_reduce
// GEN: %[[Y:.*]] = llm.moe_combine %[[DOWN]]
// GEN-NEXT: dist.all_reduce %[[Y]] on @mesh axes ["tp"] reduction "sum" : tensor<16x128xf32>

// ... and with ep, whose ranks share the tokens, tp's sum joins ep's: one
// all-reduce over both per layer.
// SHARED: llm.grouped_matmul {{.*}} tensor<1x128x88xf32>
// SHARED-NOT: dist.all_reduce
// SHARED: llm.moe_combine
// SHARED-NEXT: dist.all_reduce %{{.*}} on @mesh axes ["ep", "tp"] reduction "sum" : tensor<16x128xf32>

