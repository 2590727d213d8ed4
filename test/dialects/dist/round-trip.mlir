// RUN: llmc-opt %s | llmc-opt | FileCheck %s
// Every dist op and attribute survives print → parse → print.

// CHECK: dist.mesh @world axes ["pp", "dp", "tp"] shape [2, 2, 2]
dist.mesh @world axes ["pp", "dp", "tp"] shape [2, 2, 2]

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<8x16xf32>, %y: tensor<2x8x8x16xf32>) {
  // CHECK: dist.shard %{{.*}} {sharding = #dist.sharding<mesh = @world, dims = {{\[}}["dp"], ["tp"]], partial = ["pp"]>} : tensor<8x16xf32>
  %s = dist.shard %x {sharding = #dist.sharding<mesh = @world, dims = [["dp"], ["tp"]], partial = ["pp"]>} : tensor<8x16xf32>
  // CHECK: dist.shard %{{.*}} {sharding = #dist.sharding<mesh = @world, dims = {{\[}}["dp", "tp"], []]>} : tensor<8x16xf32>
  %s2 = dist.shard %x {sharding = #dist.sharding<mesh = @world, dims = [["dp", "tp"], []]>} : tensor<8x16xf32>
  // CHECK: dist.all_reduce %{{.*}} on @world axes ["tp"] reduction "sum" : tensor<8x16xf32> -> tensor<8x16xf32>
  %r = dist.all_reduce %x on @world axes ["tp"] reduction "sum" : tensor<8x16xf32> -> tensor<8x16xf32>
  // CHECK: dist.all_reduce %{{.*}} on @world axes ["dp", "tp"] reduction "max"
  %m = dist.all_reduce %x on @world axes ["dp", "tp"] reduction "max" : tensor<8x16xf32> -> tensor<8x16xf32>
  // CHECK: dist.all_gather %{{.*}} on @world axes ["dp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
  %g = dist.all_gather %x on @world axes ["dp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
  // CHECK: dist.reduce_scatter %{{.*}} on @world axes ["dp", "tp"] dim 1 reduction "sum" : tensor<8x16xf32> -> tensor<8x4xf32>
  %rs = dist.reduce_scatter %x on @world axes ["dp", "tp"] dim 1 reduction "sum" : tensor<8x16xf32> -> tensor<8x4xf32>
  // CHECK: dist.broadcast %{{.*}} on @world axes ["dp"] root 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  %b = dist.broadcast %x on @world axes ["dp"] root 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  // CHECK: dist.reduce %{{.*}} on @world axes ["dp"] root 0 reduction "mean" : tensor<8x16xf32> -> tensor<8x16xf32>
  %rd = dist.reduce %x on @world axes ["dp"] root 0 reduction "mean" : tensor<8x16xf32> -> tensor<8x16xf32>
  // CHECK: dist.all_to_all %{{.*}} on @world axes ["tp"] split 2 concat 1 : tensor<2x8x8x16xf32> -> tensor<2x16x4x16xf32>
  %a = dist.all_to_all %y on @world axes ["tp"] split 2 concat 1 : tensor<2x8x8x16xf32> -> tensor<2x16x4x16xf32>
  // A rank-dependent attribute: this rank's piece starts at tp·16 in dim 1.
  // CHECK: llm.dropout %{{.*}} {dist.rank_offsets = [#dist.rank_offset<mesh = @world, attr = "offsets", index = 1, axes = ["tp"], stride = 16>], global_shape = array<i64: 8, 32>
  %so = llm.dropout %x {rate = 0.1 : f64, seed = 1 : i64, global_shape = array<i64: 8, 32>, offsets = array<i64: 0, 0>, dist.rank_offsets = [#dist.rank_offset<mesh = @world, attr = "offsets", index = 1, axes = ["tp"], stride = 16>]} : tensor<8x16xf32>
  // CHECK: dist.send %{{.*}} on @world axis "pp" shift 1 tag 3 : tensor<8x16xf32>
  dist.send %x on @world axis "pp" shift 1 tag 3 : tensor<8x16xf32>
  // CHECK: dist.recv on @world axis "pp" shift -1 tag 3 : tensor<8x16xf32>
  %v = dist.recv on @world axis "pp" shift -1 tag 3 : tensor<8x16xf32>
  return
}
