// RUN: llmc model mixtral --set n_layer=1 --set batch_size=2 --set seq_len=8 --set num_experts=2 -o %t.mlir
// RUN: llmc-opt %t.mlir --llmc-shard="mesh=tp=2" | FileCheck %s
// Tensor parallelism inside a mixture of experts: routing and dispatch stay
// replicated on every rank; the experts' stacked up projections (w1, w3)
// are column-parallel (176 rows -> 88 per rank), reading the dispatched copies
// through the f operator; its down projection (w2) row-parallel, the
// partial sums of all experts' rows completed by one all-reduce before
// the combine.

// CHECK: llm.moe_route %{{.*}} {normalize, top_k = 2 : i64} : tensor<16x2xf32>
// CHECK: %[[XS:.*]] = llm.moe_dispatch
// CHECK: %[[F:.*]] = dist.replicate %[[XS]] on @mesh axes ["tp"] : tensor<32x128xf32>
// CHECK: llm.grouped_matmul %[[F]], %offsets, %{{.*}} {transpose_b} : tensor<32x128xf32>, tensor<3xi32>, tensor<2x88x128xf32>
// CHECK: llm.grouped_matmul %[[F]], %offsets, %{{.*}} {transpose_b} : tensor<32x128xf32>, tensor<3xi32>, tensor<2x88x128xf32>
// CHECK: %[[DOWN:.*]] = llm.grouped_matmul %{{.*}}, %offsets, %{{.*}} {transpose_b} : tensor<32x88xf32>, tensor<3xi32>, tensor<2x128x88xf32>
// CHECK: %[[SUM:.*]] = dist.all_reduce %[[DOWN]] on @mesh axes ["tp"] reduction "sum" : tensor<32x128xf32>
// CHECK: llm.moe_combine %[[SUM]], %positions weights %weights
